package operator

import "github.com/intentgate/intentgate/internal/tools/packet"

const operationIDProperty = `{"type": "string", "minLength": 8, "maxLength": 128, "pattern": "^[A-Za-z0-9._:-]+$",
      "description": "Your key for this intent: choose it before the first attempt and reuse it on every retry. A new id means a new intent."}`

const handleProperty = `{"type": "string", "pattern": "^op_[a-z2-7]{26}$", "description": "The operation's public handle (ticket_handle)."}`

// ResolveInputSchema is resolve_operation's input (operators only). The
// operation is named by handle (operators act on other clients'
// operations) or by the operator's own operation_id. resource_id is
// required by Resolve for SUCCEEDED unless the operation already records one;
// effects_removed is required by Resolve for FAILED when effects are known.
const ResolveInputSchema = `{
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "operation_id": ` + operationIDProperty + `,
    "handle": ` + handleProperty + `,
    "resolution": {"type": "string", "enum": ["SUCCEEDED", "FAILED"]},
    "evidence": {"type": "string", "minLength": 1, "maxLength": 1000, "description": "The operator's statement of what was checked and found."},
    "resource_id": {"type": "string", "minLength": 1, "maxLength": 128, "pattern": "^[A-Za-z0-9._:-]+$", "description": "The effect the operator verified (e.g. the ticket id to keep)."},
    "effects_removed": {"type": "boolean", "description": "FAILED only: the operator states every effect of this operation was removed at the provider. Required to resolve FAILED when effects are known to exist; recorded in the journal."}
  },
  "required": ["resolution", "evidence"],
  "oneOf": [{"required": ["operation_id"]}, {"required": ["handle"]}]
}`

// ResolveOutputSchema: resolve_operation answers with the review packet.
const ResolveOutputSchema = packet.OutputSchema

// GetOperationInputSchema is get_operation's input: the caller's
// operation_id or the public handle (exactly one).
const GetOperationInputSchema = `{
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "operation_id": ` + operationIDProperty + `,
    "handle": ` + handleProperty + `
  },
  "oneOf": [{"required": ["operation_id"]}, {"required": ["handle"]}]
}`
