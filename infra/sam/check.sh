#!/usr/bin/env bash
# Validates template.yaml, and its SAM expansion in both auth modes, with
# cfn-lint, and builds all four functions (MCP, reconciler and their two
# PreTraffic hooks) with `sam build` (no container) into .aws-sam/.
#
#   infra/sam/check.sh              lint + build
#   infra/sam/check.sh --lint-only  lint only (no Go toolchain needed)
#
# Tools come from the project virtualenv: $INTENTGATE_TOOLS_VENV (default
# .venv-tools at the repository root, which `make venv` creates), holding
# cfn-lint and aws-sam-cli.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"

venv="${INTENTGATE_TOOLS_VENV:-.venv-tools}"
case "$venv" in /*) ;; *) venv="$root/$venv" ;; esac
cfn_lint="$venv/bin/cfn-lint"
sam="$venv/bin/sam"

export SAM_CLI_TELEMETRY=0
# Both tools need a region to resolve pseudo parameters; nothing is contacted.
export AWS_DEFAULT_REGION="${AWS_DEFAULT_REGION:-us-east-1}"
export AWS_REGION="${AWS_REGION:-$AWS_DEFAULT_REGION}"

lint_only=false
for arg in "$@"; do
  case "$arg" in
    --lint-only) lint_only=true ;;
    *) echo "usage: $0 [--lint-only]" >&2; exit 2 ;;
  esac
done

require() {
  if [ ! -x "$1" ]; then
    echo "missing $1: create the tools virtualenv (make venv) or set INTENTGATE_TOOLS_VENV" >&2
    exit 1
  fi
}
require "$cfn_lint"
$lint_only || require "$sam"

# lint WHAT ARGS...: cfn-lint's exit status is a bit set (2 errors, 4
# warnings, 8 informational). Errors and warnings fail the check;
# informational findings are printed only.
lint() {
  local what="$1" rc
  shift
  set +e
  "$cfn_lint" --format parseable "$@"
  rc=$?
  set -e
  if [ $((rc & 6)) -ne 0 ]; then
    echo "cfn-lint reported errors or warnings in $what (exit $rc)" >&2
    exit 1
  fi
  echo "cfn-lint ($what): no errors, no warnings"
}

echo "== cfn-lint $("$cfn_lint" --version | awk '{print $2}') template.yaml"
lint template.yaml template.yaml

# cfn-lint skips some checks on SAM resources (a dependency cycle through
# the alias AutoPublishAlias creates, for one); CloudFormation runs them on
# the expanded template. So expand it as CloudFormation would, in both auth
# modes, and lint that too. DeploymentType is read by the transform only
# (W2001 after it).
echo "== SAM transform -> .aws-sam/expanded, cfn-lint of the expanded templates"
"$venv/bin/python" infra/sam/expand.py template.yaml .aws-sam/expanded
lint "the expanded template" --ignore-checks W2001 -- .aws-sam/expanded/expanded-token.json .aws-sam/expanded/expanded-gateway.json

if $lint_only; then
  exit 0
fi

for dir in functions/mcp functions/reconciler; do
  if ! ls "$dir"/*.go >/dev/null 2>&1; then
    echo "no Go main package in $dir: sam build needs both functions" >&2
    exit 1
  fi
done

echo "== sam build (no container) -> .aws-sam/build"
# BuildMethod makefile + ContextPath infra/sam: infra/sam/Makefile builds
# each main package from the repository root (where go.mod is).
"$sam" build --template-file template.yaml --build-dir .aws-sam/build --cache-dir .aws-sam/cache

for fn in McpFunction ReconcilerFunction McpPreTrafficHook ReconcilerPreTrafficHook; do
  bin=".aws-sam/build/$fn/bootstrap"
  if [ ! -x "$bin" ]; then
    echo "sam build produced no $bin" >&2
    exit 1
  fi
  echo "$bin: $(wc -c <"$bin") bytes"
done
echo "sam build: ok"
