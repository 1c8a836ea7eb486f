"""Expands template.yaml with the SAM transform, as CloudFormation does at
deploy time, so the expanded template can be linted: cfn-lint skips some
checks on SAM resources (a dependency cycle through the alias that
AutoPublishAlias creates, for one) that CloudFormation then refuses.

    python infra/sam/expand.py template.yaml OUT_DIR

writes OUT_DIR/expanded-token.json and OUT_DIR/expanded-gateway.json (the
two auth modes) and checks that a function's new revision (the template's
<Function>Revision parameter) publishes a new version of that function and
of no other: SAM names a version after the function's code and properties
with parameter references unresolved, so a change of parameter values alone
would leave the alias on the old version without it.
"""

import json
import logging
import os
import sys

from samtranslator.translator.transform import transform
from samtranslator.yaml_helper import yaml_parse

FUNCTIONS = ("McpFunction", "ReconcilerFunction")

# Values for the parameters without a default; the rest keep theirs.
SAMPLES = {
    "TokenIssuer": "https://auth.example.com/",
    "JwksUrl": "https://auth.example.com/.well-known/jwks.json",
    "ResourceUrl": "https://mcp.example.com/mcp",
    "RiskApiUrl": "https://risk.example.com",
    "ReleaseApiUrl": "https://release.example.com",
}
GATEWAY = {
    "GatewayJwtAuthorizer": "true",
    "JwtAudience": "https://mcp.example.com/mcp",
    "GatewayRequiredScope": "intentgate/mcp",
}
PSEUDO = {
    "AWS::Region": "us-east-1",
    "AWS::AccountId": "123456789012",
    "AWS::StackName": "intentgate-check",
    "AWS::Partition": "aws",
    "AWS::URLSuffix": "amazonaws.com",
}


class NoManagedPolicies:
    """The template names managed policies by ARN only: nothing to look up."""

    def load(self):
        return {}


def expand(source, overrides, code="build-1"):
    tpl = yaml_parse(source)
    for fn, res in tpl["Resources"].items():
        if res.get("Type") != "AWS::Serverless::Function":
            continue
        # sam deploy replaces the local build directory with its S3 upload,
        # named after the code.
        res["Properties"]["CodeUri"] = "s3://intentgate-check/%s/%s.zip" % (code, fn)
    params = {}
    for name, p in tpl.get("Parameters", {}).items():
        if "Default" in p:
            params[name] = p["Default"]
    params.update(SAMPLES)
    params.update(overrides)
    params.update(PSEUDO)
    return transform(tpl, params, NoManagedPolicies())


def versions(expanded):
    """Logical id of each function's AWS::Lambda::Version."""
    out = {}
    for logical_id, res in expanded["Resources"].items():
        if res["Type"] != "AWS::Lambda::Version":
            continue
        fn = res["Properties"]["FunctionName"]["Ref"]
        out[fn] = logical_id
    return out


def main():
    # The translator logs its feature toggles and metrics at INFO/WARNING.
    logging.disable(logging.WARNING)
    # The translator wants a region for its pseudo parameters; nothing is
    # contacted.
    os.environ.setdefault("AWS_DEFAULT_REGION", PSEUDO["AWS::Region"])
    if len(sys.argv) != 3:
        print("usage: expand.py TEMPLATE OUT_DIR", file=sys.stderr)
        return 2
    with open(sys.argv[1]) as f:
        source = f.read()
    out_dir = sys.argv[2]
    os.makedirs(out_dir, exist_ok=True)
    for mode, overrides in (("token", {}), ("gateway", GATEWAY)):
        expanded = expand(source, overrides)
        path = os.path.join(out_dir, "expanded-%s.json" % mode)
        with open(path, "w") as f:
            json.dump(expanded, f, indent=1, default=str)
        print("%s: %d resources" % (path, len(expanded["Resources"])))

    revisions = {fn: "1" * 64 for fn in FUNCTIONS}
    named = {fn + "Revision": rev for fn, rev in revisions.items()}
    first = versions(expand(source, named))
    again = versions(expand(source, named))
    # Without revisions (plain sam deploy) new code still publishes.
    unnamed = versions(expand(source, {}))
    new_code = versions(expand(source, {}, code="build-2"))
    problems = []
    for fn in FUNCTIONS:
        if fn not in first:
            problems.append("%s publishes no version (AutoPublishAlias?)" % fn)
            continue
        if first[fn] != again[fn]:
            problems.append("%s: the same revision named two versions" % fn)
        moved = versions(expand(source, dict(named, **{fn + "Revision": "2" * 64})))
        for other in FUNCTIONS:
            if other == fn and moved[other] == first[other]:
                problems.append("%s: a new %sRevision publishes no new version (AutoPublishCodeSha256?)" % (fn, fn))
            if other != fn and moved[other] != first[other]:
                problems.append("%s: a new %sRevision publishes a version of %s too" % (other, fn, other))
        if unnamed[fn] == new_code[fn]:
            problems.append("%s: without a revision, new code publishes no new version" % fn)
    if problems:
        for p in problems:
            print("expand: " + p, file=sys.stderr)
        return 1
    print("a function's new revision publishes a new version of it alone; without one, new code publishes (%s)" % ", ".join(FUNCTIONS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
