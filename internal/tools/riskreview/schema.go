package riskreview

import "github.com/intentgate/intentgate/internal/tools/packet"

const operationIDSchema = `{"type":"string","minLength":8,"maxLength":128,"pattern":"^[A-Za-z0-9._:-]+$",
 "description":"Your key for this intent: choose it before the first attempt and reuse it on every retry."}`

const statusEnum = `{"enum":["PENDING","SUCCEEDED","FAILED","UNKNOWN","RETRYABLE","ESCALATED"]}`

const outcomeEnum = `{"enum":["committed_and_verified","failed_without_effect","rejected_before_dispatch",
 "dispatch_acknowledged_response_missing","provider_status_unavailable","verification_inconclusive",
 "incident_multiple_effects","pending"]}`

// InputSchema is request_risk_review's input.
const InputSchema = `{
 "type":"object","additionalProperties":false,
 "properties":{
  "order_id":{"type":"string","minLength":1,"maxLength":64,"description":"The order to review, e.g. O20260728001."},
  "reason":{"type":"string","minLength":1,"maxLength":500,"description":"Why a review is needed."},
  "operation_id":` + operationIDSchema + `
 },
 "required":["order_id","reason"]}`

// OutputSchema is the structured result of both risk-review tools.
const OutputSchema = `{
 "type":"object","additionalProperties":false,
 "properties":{
  "review_id":{"type":"string"},
  "operation_id":{"type":"string"},
  "status":` + statusEnum + `,
  "outcome":` + outcomeEnum + `,
  "deduplicated":{"type":"boolean"},
  "retry_allowed":{"type":"boolean"},
  "next_action":` + packet.NextActionSchema + `,
  "downstream_review_id":{"type":"string"},
  "effect_receipt":{"type":"string"},
  "code":{"type":"string"},
  "message":{"type":"string"}
 },
 "required":["review_id","status","outcome","retry_allowed"]}`

// StatusInputSchema is get_risk_review_status's input.
const StatusInputSchema = `{
 "type":"object","additionalProperties":false,
 "properties":{"review_id":{"type":"string","minLength":29,"maxLength":29,"pattern":"^op_[a-z2-7]{26}$"}},
 "required":["review_id"]}`
