#!/bin/bash
# READY hook: what the devstack needs when it points at LocalStack instead
# of moto. Idempotent: LocalStack runs READY hooks on every start, and with
# persistence the resources may already exist.
#
#  - the operations table, same schema as OperationsTable in template.yaml
#    (named apart from the SAM stack's "<stack>-operations" table so
#    `samlocal deploy` does not collide with it);
#  - the downstream API key as an SSM SecureString (a dummy local value);
#  - the S3 bucket samlocal uploads build artifacts to (samconfig.toml [localstack]).
set -euo pipefail

export AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-test}"
export AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-test}"
export AWS_DEFAULT_REGION="${AWS_DEFAULT_REGION:-us-east-1}"
export AWS_PAGER=""

table="${INTENTGATE_TABLE:-intentgate-operations}"
api_key_parameter="${INTENTGATE_API_KEY_PARAMETER:-/intentgate/local/downstream-api-key}"
bucket="${INTENTGATE_SAM_BUCKET:-intentgate-sam-artifacts}"
aws_cli="${AWS_CLI:-awslocal}"

log() { echo "intentgate init: $*"; }

if "$aws_cli" dynamodb describe-table --table-name "$table" >/dev/null 2>&1; then
  log "table $table exists"
else
  log "creating table $table"
  # Key: pk only. GSI "due" (gsi1pk HASH, gsi1sk RANGE, ALL) is sparse: only
  # items needing reconciliation carry its attributes.
  "$aws_cli" dynamodb create-table \
    --table-name "$table" \
    --billing-mode PAY_PER_REQUEST \
    --attribute-definitions \
      AttributeName=pk,AttributeType=S \
      AttributeName=gsi1pk,AttributeType=S \
      AttributeName=gsi1sk,AttributeType=S \
    --key-schema AttributeName=pk,KeyType=HASH \
    --global-secondary-indexes '[{"IndexName":"due","KeySchema":[{"AttributeName":"gsi1pk","KeyType":"HASH"},{"AttributeName":"gsi1sk","KeyType":"RANGE"}],"Projection":{"ProjectionType":"ALL"}}]' \
    --stream-specification StreamEnabled=true,StreamViewType=NEW_AND_OLD_IMAGES \
    --sse-specification Enabled=true \
    >/dev/null
  "$aws_cli" dynamodb wait table-exists --table-name "$table"
fi

ttl_status="$("$aws_cli" dynamodb describe-time-to-live --table-name "$table" \
  --query TimeToLiveDescription.TimeToLiveStatus --output text)"
case "$ttl_status" in
  ENABLED|ENABLING) log "TTL on expires_at is $ttl_status" ;;
  *)
    log "enabling TTL on expires_at"
    "$aws_cli" dynamodb update-time-to-live --table-name "$table" \
      --time-to-live-specification Enabled=true,AttributeName=expires_at >/dev/null
    ;;
esac
"$aws_cli" dynamodb update-continuous-backups --table-name "$table" \
  --point-in-time-recovery-specification PointInTimeRecoveryEnabled=true >/dev/null

if "$aws_cli" ssm get-parameter --name "$api_key_parameter" >/dev/null 2>&1; then
  log "parameter $api_key_parameter exists"
else
  log "creating parameter $api_key_parameter"
  "$aws_cli" ssm put-parameter --name "$api_key_parameter" --type SecureString \
    --value "local-downstream-key" >/dev/null
fi

if "$aws_cli" s3api head-bucket --bucket "$bucket" >/dev/null 2>&1; then
  log "bucket $bucket exists"
else
  log "creating bucket $bucket"
  "$aws_cli" s3api create-bucket --bucket "$bucket" >/dev/null
fi

log "ready: table=$table parameter=$api_key_parameter bucket=$bucket"
