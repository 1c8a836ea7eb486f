package app

import (
	"context"

	"github.com/intentgate/intentgate/internal/obs"
	"github.com/intentgate/intentgate/internal/operation"
	"github.com/intentgate/intentgate/internal/requestid"
	"github.com/intentgate/intentgate/internal/tools"
	operatortools "github.com/intentgate/intentgate/internal/tools/operator"
)

// operatorNamed and operatorDetail are what an operator's resolution names
// and why (its evidence): audited with the transition; other events'
// resource ids and details (a provider's own text among them) stay in the
// journal.
func operatorNamed(ev operation.Event) string {
	if ev.Source != operatortools.SourceOperator {
		return ""
	}
	return ev.ResourceID
}

func operatorDetail(ev operation.Event) string {
	if ev.Source != operatortools.SourceOperator {
		return ""
	}
	return ev.Detail
}

// ReasonEffectAfterFailure is the escalated_operations reason of a verified
// effect reported for an operation that had FAILED (proven no effect, its
// business key released): the provider broke its promise or a search
// missed the effect.
const ReasonEffectAfterFailure = "effect_after_failure"

// observe is the executor's transition hook, shared by the MCP function and
// the reconciler: one audit record per transition, and the metrics the
// alarms in template.yaml watch.
func observe(auditor *obs.Auditor, metrics *obs.Metrics) func(context.Context, tools.TransitionReport) {
	return func(ctx context.Context, t tools.TransitionReport) {
		auditor.Record(ctx, obs.AuditRecord{
			Kind: obs.KindTransition, RequestID: requestid.From(ctx).Request, Tool: t.Tool,
			OperationHash: obs.OperationHash(t.To.Key), Handle: t.To.Handle,
			BusinessKey: t.To.BusinessKey, ArgumentDigest: t.To.RequestDigest,
			ClientPrincipal: t.To.Key.ClientID, EndUserPrincipal: t.To.EndUserID, Tenant: t.To.TenantID,
			FromState: string(t.From.State), ToState: string(t.To.State), Event: string(t.Event.Type),
			Status: string(t.To.State), Outcome: string(t.To.Outcome), DownstreamLatency: t.DownstreamLatency,
			ErrorClass: t.ErrorClass, ProbeCount: t.To.ProbeCount,
			Actor: t.Event.Actor, ResourceID: operatorNamed(t.Event), Detail: operatorDetail(t.Event),
		})
		if t.DownstreamLatency > 0 {
			metrics.DownstreamLatency(ctx, t.Tool, t.DownstreamLatency)
		}
		if t.Event.Source != "" && t.Event.Result != "" && t.From.State == operation.StateUnknown {
			metrics.ReconcileProbe(ctx, t.Event.Source, t.Event.Result)
		}
		switch {
		case t.To.State == operation.StateUnknown && t.From.State != operation.StateUnknown:
			metrics.UnknownOperation(ctx, t.Tool)
		case t.To.State == operation.StateEscalated && t.From.State != operation.StateEscalated:
			metrics.EscalatedOperation(ctx, t.Tool, string(t.Event.Type))
		case t.From.State == operation.StateFailed && t.Event.Type == operation.EventEvidenceRecorded &&
			len(t.From.EffectsReportedAfterFailure()) == 0:
			// FAILED stays final, but a verified effect of it needs an
			// operator as much as an incident does: the escalated alarm,
			// once per operation (the first effect reported).
			metrics.EscalatedOperation(ctx, t.Tool, ReasonEffectAfterFailure)
		case t.From.State == operation.StateFailed && t.Event.Type == operation.EventAuditExhausted:
			// A withdrawal's audit that could not finish: the operation
			// stays FAILED, and an operator must look as for an incident.
			metrics.EscalatedOperation(ctx, t.Tool, string(t.Event.Type))
		}
	}
}
