package gateway

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/intentgate/intentgate/internal/mcpserver"
	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/tools"
	"github.com/intentgate/intentgate/internal/tools/packet"
	"github.com/intentgate/intentgate/internal/tools/riskreview"
)

const operationIDSchema = `{"type":"string","minLength":8,"maxLength":128,"pattern":"^[A-Za-z0-9._:-]+$",
 "description":"Your key for this intent: choose it before the first attempt and reuse it on every retry."}`

const statusEnum = `{"enum":["PENDING","SUCCEEDED","FAILED","UNKNOWN","RETRYABLE","ESCALATED"]}`

const outcomeEnum = `{"enum":["committed_and_verified","failed_without_effect","rejected_before_dispatch",
 "dispatch_acknowledged_response_missing","provider_status_unavailable","verification_inconclusive",
 "incident_multiple_effects","pending"]}`

const requestRiskReviewInput = `{
 "type":"object","additionalProperties":false,
 "properties":{
  "order_id":{"type":"string","minLength":1,"maxLength":64,"description":"The order to review, e.g. O20260728001."},
  "reason":{"type":"string","minLength":1,"maxLength":500,"description":"Why a review is needed."},
  "operation_id":` + operationIDSchema + `
 },
 "required":["order_id","reason"]}`

const reviewOutput = `{
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

const reviewStatusInput = `{
 "type":"object","additionalProperties":false,
 "properties":{"review_id":{"type":"string","minLength":29,"maxLength":29,"pattern":"^op_[a-z2-7]{26}$"}},
 "required":["review_id"]}`

func (g *Gateway) riskTools() []mcpserver.Tool {
	return []mcpserver.Tool{{
		Name:  riskreview.ToolRequest,
		Title: "Request a risk review",
		Description: "Request a risk review for an order your merchant owns. Exactly once per order: " +
			"reuse operation_id on every retry. If the status is UNKNOWN, do not call again: " +
			"call get_risk_review_status with the review_id.",
		InputSchema:  json.RawMessage(requestRiskReviewInput),
		OutputSchema: json.RawMessage(reviewOutput),
		Annotations: &mcp.ToolAnnotations{Title: "Request a risk review", DestructiveHint: ptr(false),
			IdempotentHint: true, OpenWorldHint: ptr(true)},
		Handler: g.serve(g.requestRiskReview),
	}, {
		Name:         riskreview.ToolStatus,
		Title:        "Risk review status",
		Description:  "The current status of a risk review, by the review_id request_risk_review returned.",
		InputSchema:  json.RawMessage(reviewStatusInput),
		OutputSchema: json.RawMessage(reviewOutput),
		Annotations:  &mcp.ToolAnnotations{Title: "Risk review status", ReadOnlyHint: true, OpenWorldHint: ptr(false)},
		Handler:      g.serve(g.riskReviewStatus),
	}}
}

func ptr[T any](v T) *T { return &v }

func (g *Gateway) requestRiskReview(ctx context.Context, call mcpserver.Call, c tools.Caller, rec *callRecord) *mcp.CallToolResult {
	sub, res := g.submit(ctx, call, c, rec, g.cfg.Risk)
	if res != nil {
		return res
	}
	return g.renderReview(sub.Operation, sub.OperationID, sub.Deduplicated, rec)
}

func (g *Gateway) riskReviewStatus(ctx context.Context, call mcpserver.Call, c tools.Caller, rec *callRecord) *mcp.CallToolResult {
	op, _, err := g.lookup(ctx, c, call.Arguments, "review_id")
	if err == nil && op.Key.Tool != riskreview.ToolRequest {
		err = tools.Fail(tools.CodeNotFound, false, nil, "no such review")
	}
	if err != nil {
		return g.failure(ctx, rec, err)
	}
	rec.withOperation(op)
	ownKey := "" // another client's operation_id is never revealed
	if id := packet.OwnOperationID(op, c); id != nil {
		ownKey = *id
	}
	res := g.renderReview(op, ownKey, false, rec)
	res.IsError = false // the query itself succeeded; the status says the rest
	return res
}

func (g *Gateway) renderReview(op operation.Operation, operationID string, deduplicated bool, rec *callRecord) *mcp.CallToolResult {
	v := viewOf(op, riskreview.ToolStatus, "review_id")
	if v.isError {
		rec.Code = string(v.code)
	}
	body := map[string]any{
		"review_id": op.Handle, "status": string(op.State),
		"outcome": string(op.Outcome), "deduplicated": deduplicated,
	}
	if operationID != "" {
		body["operation_id"] = operationID
	}
	if op.ResourceID != "" {
		body["downstream_review_id"] = op.ResourceID
	}
	if op.Receipt != "" {
		body["effect_receipt"] = op.Receipt
	}
	if deduplicated {
		v.message = "an active review for this order already exists; this is it (nothing new was sent): " + v.message
	}
	return operationResult(body, v)
}
