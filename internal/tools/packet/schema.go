package packet

// NextActionSchema is the JSON Schema of tools.NextAction, shared by every
// output schema that carries a next_action.
const NextActionSchema = `{
      "type": "object",
      "additionalProperties": false,
      "properties": {
        "tool": {"type": "string"},
        "arguments": {"type": "object", "additionalProperties": {"type": "string"}},
        "hint": {"type": "string"}
      },
      "required": ["hint"]
    }`

// OutputSchema is the JSON Schema 2020-12 of get_operation's
// structuredContent: a Packet. Every field is typed and required (absent
// evidence is null, not missing); additionalProperties is false throughout.
const OutputSchema = `{
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "operation_id": {"type": ["string", "null"], "minLength": 8, "maxLength": 128, "description": "Your own key for the operation; null when it belongs to another client (use handle)."},
    "handle": {"type": "string", "pattern": "^op_[a-z2-7]{26}$"},
    "tool": {"type": "string"},
    "state": {"type": "string", "enum": ["PENDING", "SUCCEEDED", "FAILED", "UNKNOWN", "RETRYABLE", "ESCALATED"]},
    "outcome": {"type": "string", "enum": ["committed_and_verified", "failed_without_effect", "rejected_before_dispatch", "dispatch_acknowledged_response_missing", "provider_status_unavailable", "verification_inconclusive", "incident_multiple_effects", "pending"]},
    "attempts": {"type": "integer", "minimum": 0},
    "client_timeouts": {"type": "integer", "minimum": 0},
    "resource_id": {"type": ["string", "null"]},
    "duplicate_resources": {"type": "integer", "minimum": 0},
    "effect_receipt": {"type": ["string", "null"]},
    "dependent_actions_blocked_while_unknown": {"type": "boolean"},
    "dependent_actions_blocked": {"type": "boolean"},
    "approval_may_have_been_given": {"type": "boolean", "description": "True when the operation was SUCCEEDED and approvable before it became an incident: an approval of a dependent action may already have been given and must be reviewed."},
    "request_digest": {"type": "string", "pattern": "^sha256:[0-9a-f]{64}$"},
    "target": {"type": "object", "additionalProperties": {"type": "string"}},
    "retry_allowed": {"type": "boolean", "const": false},
    "next_action": ` + NextActionSchema + `,
    "escalation": {"type": ["string", "null"]},
    "created_at": {"type": "string", "format": "date-time"},
    "updated_at": {"type": "string", "format": "date-time"},
    "timeline": {
      "type": "array",
      "items": {
        "type": "object",
        "additionalProperties": false,
        "properties": {
          "at": {"type": "string", "format": "date-time"},
          "event": {"type": "string"},
          "journal_event": {"type": "string"},
          "from": {"type": "string"},
          "to": {"type": "string"},
          "source": {"type": "string"},
          "result": {"type": "string"},
          "resource_id": {"type": "string"},
          "decision": {"type": "string"},
          "detail": {"type": "string"}
        },
        "required": ["at", "event", "journal_event"]
      }
    }
  },
  "required": ["operation_id", "handle", "tool", "state", "outcome", "attempts", "client_timeouts",
    "resource_id", "duplicate_resources", "effect_receipt", "dependent_actions_blocked_while_unknown",
    "dependent_actions_blocked", "approval_may_have_been_given", "request_digest", "target", "retry_allowed", "next_action",
    "escalation", "created_at", "updated_at", "timeline"]
}`
