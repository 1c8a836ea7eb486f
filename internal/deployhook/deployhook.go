// Package deployhook is the CodeDeploy PreTraffic check of a new function
// version: before any traffic moves to it, one invocation with its probe
// event, and the verdict reported to CodeDeploy, which stops the
// deployment and keeps the old version on Failed.
//
// A canary alone decides nothing at low traffic: in its window the new
// version may get no invocation at all (the reconciler's sweep runs once a
// minute; 10% of five sweeps is half an invocation), and its rollback
// alarms then have nothing to count. This check runs the new version's
// whole start (configuration, SecureStrings, the issuer's keys) and one
// request every time.
package deployhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
)

// Probe names the event a function is checked with: for the MCP function
// one without effects (GET /healthz); for the reconciler the work its
// schedule starts every minute anyway, one sweep with its claims and
// provider calls, done once by the new version on the live table.
type Probe string

const (
	// ProbeMCP sends the MCP function GET /healthz as API Gateway would:
	// the function answers 204 only once its whole start succeeded.
	ProbeMCP Probe = "mcp"
	// ProbeReconciler sends the reconciler a scheduled event: one sweep of
	// the due index, as the schedule starts every minute.
	ProbeReconciler Probe = "reconciler"
)

// Event is what CodeDeploy invokes a lifecycle hook with.
type Event struct {
	DeploymentID                  string `json:"DeploymentId"`
	LifecycleEventHookExecutionID string `json:"LifecycleEventHookExecutionId"`
}

// Invoker invokes a function version synchronously. functionError is
// Lambda's FunctionError ("Unhandled" and the like): set when the function
// failed, with the error document as result.
type Invoker interface {
	Invoke(ctx context.Context, target string, payload []byte) (result []byte, functionError string, err error)
}

// Reporter tells CodeDeploy the hook's verdict.
type Reporter interface {
	Report(ctx context.Context, deploymentID, executionID string, succeeded bool) error
}

// Hook checks Target (a function version ARN) with Probe.
type Hook struct {
	Target   string
	Probe    Probe
	Invoker  Invoker
	Reporter Reporter
	Logger   *slog.Logger
	// RetryWait is the first wait after Lambda throttled the invocation
	// (doubling, at most maxRetryWait); 0 means defaultRetryWait.
	RetryWait time.Duration
	// ReportReserve is kept from the hook's own deadline for the report;
	// 0 means defaultReportReserve.
	ReportReserve time.Duration
}

const (
	defaultRetryWait     = time.Second
	maxRetryWait         = 8 * time.Second
	defaultReportReserve = 5 * time.Second
)

// Config reads the hook's settings: INTENTGATE_HOOK_TARGET, the version
// ARN of the function to check, and INTENTGATE_HOOK_PROBE, mcp or
// reconciler.
func Config(lookup func(string) (string, bool)) (target string, probe Probe, err error) {
	target, _ = lookup("INTENTGATE_HOOK_TARGET")
	if !isVersionARN(target) {
		return "", "", fmt.Errorf("INTENTGATE_HOOK_TARGET %q: want a function version ARN (arn:aws:lambda:<region>:<account>:function:<name>:<version>)", target)
	}
	p, _ := lookup("INTENTGATE_HOOK_PROBE")
	switch Probe(p) {
	case ProbeMCP, ProbeReconciler:
		return target, Probe(p), nil
	default:
		return "", "", fmt.Errorf("INTENTGATE_HOOK_PROBE %q: want %q or %q", p, ProbeMCP, ProbeReconciler)
	}
}

// isVersionARN: a published version (digits), not $LATEST or an alias,
// which could name code other than the one being deployed.
func isVersionARN(s string) bool {
	parts := strings.Split(s, ":")
	if len(parts) != 8 || parts[0] != "arn" || parts[2] != "lambda" || parts[5] != "function" || parts[6] == "" {
		return false
	}
	v := parts[7]
	return v != "" && strings.Trim(v, "0123456789") == ""
}

// Handle checks the target and reports the verdict. It fails only when
// the verdict could not be reported; CodeDeploy then fails the hook when
// it times out.
func (h Hook) Handle(ctx context.Context, ev Event) error {
	if ev.DeploymentID == "" || ev.LifecycleEventHookExecutionID == "" {
		return errors.New("deployhook: the event names no deployment or hook execution: not a CodeDeploy lifecycle event")
	}
	verdict := h.check(ctx)
	if verdict != nil {
		h.Logger.ErrorContext(ctx, "the new version failed its pre-traffic check; CodeDeploy stops the deployment",
			"target", h.Target, "probe", string(h.Probe), "deployment_id", ev.DeploymentID, "error", verdict)
	} else {
		h.Logger.InfoContext(ctx, "the new version passed its pre-traffic check",
			"target", h.Target, "probe", string(h.Probe), "deployment_id", ev.DeploymentID)
	}
	if err := h.Reporter.Report(ctx, ev.DeploymentID, ev.LifecycleEventHookExecutionID, verdict == nil); err != nil {
		return fmt.Errorf("deployhook: report to CodeDeploy (deployment %s): %w", ev.DeploymentID, err)
	}
	return nil
}

// check invokes the target once it gets an instance. Reserved concurrency
// is the function's, all its versions' included: while the versions
// serving traffic hold all of it, Lambda refuses the invocation with
// TooManyRequestsException, which says nothing about the new version. The
// check waits for an instance until only ReportReserve of the hook's time
// is left, so that the verdict still reaches CodeDeploy.
func (h Hook) check(ctx context.Context) error {
	payload, err := h.Probe.Event()
	if err != nil {
		return err
	}
	if deadline, ok := ctx.Deadline(); ok {
		reserve := h.ReportReserve
		if reserve <= 0 {
			reserve = defaultReportReserve
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline.Add(-reserve))
		defer cancel()
	}
	wait := h.RetryWait
	if wait <= 0 {
		wait = defaultRetryWait
	}
	var result []byte
	var functionError string
	for {
		result, functionError, err = h.Invoker.Invoke(ctx, h.Target, payload)
		var throttled *lambdatypes.TooManyRequestsException
		if err == nil || !errors.As(err, &throttled) {
			break
		}
		h.Logger.WarnContext(ctx, "the function is at its concurrency limit; the pre-traffic check waits for an instance",
			"target", h.Target, "retry_in", wait.String())
		select {
		case <-ctx.Done():
			return fmt.Errorf("invoke %s: throttled until the check ran out of time: %w", h.Target, err)
		case <-time.After(wait):
		}
		wait = min(2*wait, maxRetryWait)
	}
	if err != nil {
		return fmt.Errorf("invoke %s: %w", h.Target, err)
	}
	if functionError != "" {
		return fmt.Errorf("%s failed (%s): %s", h.Target, functionError, clip(result))
	}
	return h.Probe.Judge(result)
}

// Event is the payload the probe invokes its function with.
func (p Probe) Event() ([]byte, error) {
	switch p {
	case ProbeMCP:
		return json.Marshal(events.APIGatewayV2HTTPRequest{
			Version:  "2.0",
			RouteKey: "GET /healthz",
			RawPath:  "/healthz",
			Headers:  map[string]string{"host": "deployhook.invalid", "user-agent": "intentgate-deployhook"},
			RequestContext: events.APIGatewayV2HTTPRequestContext{
				RouteKey:  "GET /healthz",
				Stage:     "$default",
				RequestID: "deployhook",
				HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{
					Method: http.MethodGet, Path: "/healthz", Protocol: "HTTP/1.1", SourceIP: "127.0.0.1", UserAgent: "intentgate-deployhook",
				},
			},
		})
	case ProbeReconciler:
		return json.Marshal(map[string]any{
			"version": "0", "id": "deployhook", "detail-type": "Scheduled Event", "source": "aws.events",
			"resources": []string{}, "detail": map[string]any{},
		})
	default:
		return nil, fmt.Errorf("deployhook: unknown probe %q", p)
	}
}

// Judge reads the result of an invocation without a function error.
func (p Probe) Judge(result []byte) error {
	if p != ProbeMCP {
		return nil // the reconciler's success is the absence of a function error
	}
	var resp events.APIGatewayV2HTTPResponse
	if err := json.Unmarshal(result, &resp); err != nil {
		return fmt.Errorf("GET /healthz: the answer is not an API Gateway response: %w: %s", err, clip(result))
	}
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("GET /healthz answered %d, want %d: %s", resp.StatusCode, http.StatusNoContent, clip([]byte(resp.Body)))
	}
	return nil
}

// clip keeps a log line short whatever the function answered.
func clip(b []byte) string {
	const most = 512
	if len(b) <= most {
		return string(b)
	}
	return string(b[:most]) + "..."
}
