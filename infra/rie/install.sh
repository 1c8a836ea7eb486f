#!/usr/bin/env sh
# Installs the AWS Lambda Runtime Interface Emulator into <repo>/.build/bin
# (git-ignored). test/rie installs the same version itself when it is
# missing; this script is for running the emulator by hand.
set -eu
RIE_MODULE=github.com/aws/aws-lambda-runtime-interface-emulator
RIE_VERSION=v0.0.0-20261030222936-bef5c4ba774d
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$root/.build/bin"
GOBIN="$root/.build/bin" GOFLAGS= GOWORK=off go install "$RIE_MODULE/cmd/aws-lambda-rie@$RIE_VERSION"
echo "$root/.build/bin/aws-lambda-rie"
