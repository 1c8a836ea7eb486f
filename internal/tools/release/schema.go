package release

import "github.com/intentgate/intentgate/internal/tools/packet"

// JSON Schema 2020-12 documents of this family's tools. Input schemas are
// closed ("additionalProperties": false); Prepare enforces the same rules
// again, so a caller that bypasses the schema gains nothing.

const operationIDProperty = `{"type": "string", "minLength": 8, "maxLength": 128, "pattern": "^[A-Za-z0-9._:-]+$",
      "description": "Your key for this intent: choose it before the first attempt and reuse it on every retry. A new id means a new intent."}`

const handleProperty = `{"type": "string", "pattern": "^op_[a-z2-7]{26}$", "description": "The operation's public handle (ticket_handle)."}`

// InputSchema is create_deployment_ticket's input.
const InputSchema = `{
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "service": {"type": "string", "minLength": 2, "maxLength": 63, "pattern": "^[a-z][a-z0-9-]{1,62}$", "description": "Service to deploy, e.g. payments-api."},
    "commit": {"type": "string", "minLength": 7, "maxLength": 40, "pattern": "^[0-9a-f]{7,40}$", "description": "Commit SHA (7-40 lowercase hex)."},
    "environment": {"type": "string", "minLength": 2, "maxLength": 32, "pattern": "^[a-z][a-z0-9-]{1,31}$", "description": "Target environment, e.g. production-eu."},
    "operation_id": ` + operationIDProperty + `
  },
  "required": ["service", "commit", "environment"]
}`

// OutputSchema is create_deployment_ticket's structuredContent (Result).
const OutputSchema = `{
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "ticket_handle": {"type": "string", "pattern": "^op_[a-z2-7]{26}$"},
    "operation_id": {"type": ["string", "null"]},
    "status": {"type": "string", "enum": ["PENDING", "SUCCEEDED", "FAILED", "UNKNOWN", "RETRYABLE", "ESCALATED"]},
    "outcome": {"type": "string", "enum": ["committed_and_verified", "failed_without_effect", "rejected_before_dispatch", "dispatch_acknowledged_response_missing", "provider_status_unavailable", "verification_inconclusive", "incident_multiple_effects", "pending"]},
    "resource_id": {"type": ["string", "null"]},
    "effect_receipt": {"type": ["string", "null"]},
    "deduplicated": {"type": "boolean"},
    "retry_allowed": {"type": "boolean", "const": false},
    "next_action": ` + packet.NextActionSchema + `,
    "code": {"type": "string"},
    "message": {"type": "string"}
  },
  "required": ["ticket_handle", "operation_id", "status", "outcome", "resource_id", "effect_receipt", "deduplicated", "retry_allowed", "next_action"]
}`

// ApproveInputSchema is approve_rollout's input: the ticket operation, by
// the caller's operation_id or by its ticket_handle (exactly one).
const ApproveInputSchema = `{
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "operation_id": ` + operationIDProperty + `,
    "ticket_handle": ` + handleProperty + `
  },
  "oneOf": [{"required": ["operation_id"]}, {"required": ["ticket_handle"]}]
}`

// ApproveOutputSchema is approve_rollout's structuredContent (Approval).
const ApproveOutputSchema = `{
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "ticket_handle": {"type": "string"},
    "operation_id": {"type": ["string", "null"], "description": "Your own key for the ticket operation; null when it is another client's."},
    "ticket_id": {"type": "string", "minLength": 1},
    "effect_receipt": {"type": "string", "minLength": 1},
    "decision": {"type": "string", "const": "approved"}
  },
  "required": ["ticket_handle", "operation_id", "ticket_id", "effect_receipt", "decision"]
}`
