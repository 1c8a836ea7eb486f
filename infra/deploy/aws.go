package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"
)

// runner runs external commands (sam, the venv's python) and reads the
// token issuer's public documents; tests replace it.
type runner interface {
	// available checks a tool can be run before anything else is.
	available(path string) error
	run(ctx context.Context, out io.Writer, cmd ...string) error
	output(ctx context.Context, cmd ...string) ([]byte, error)
	fetch(ctx context.Context, url string) (status int, body []byte, err error)
}

type execRunner struct{}

func (execRunner) available(path string) error {
	if _, err := exec.LookPath(path); err != nil {
		return fmt.Errorf("%s can not be run: %w", path, err)
	}
	return nil
}

// samInterruptGrace is how long sam may take to stop after Ctrl-C: it
// deletes a stack whose first create failed itself, client side, which it
// can not do when killed at once (the stack would stay in
// ROLLBACK_COMPLETE).
const samInterruptGrace = 2 * time.Minute

func (execRunner) run(ctx context.Context, out io.Writer, cmd ...string) error {
	c := exec.CommandContext(ctx, cmd[0], cmd[1:]...)
	c.Cancel = func() error { return c.Process.Signal(os.Interrupt) }
	c.WaitDelay = samInterruptGrace
	c.Stdin, c.Stdout, c.Stderr = os.Stdin, out, os.Stderr
	c.Env = append(os.Environ(), "SAM_CLI_TELEMETRY=0")
	if err := c.Run(); err != nil {
		return fmt.Errorf("%s: %w", strings.Join(cmd[:2], " "), err)
	}
	return nil
}

func (execRunner) output(ctx context.Context, cmd ...string) ([]byte, error) {
	c := exec.CommandContext(ctx, cmd[0], cmd[1:]...)
	c.Stderr = os.Stderr
	b, err := c.Output()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", strings.Join(cmd[:2], " "), err)
	}
	return b, nil
}

// accountFacts are what the concurrency check needs.
type accountFacts struct {
	Limit      int `json:"limit"`      // AccountLimit.ConcurrentExecutions
	Unreserved int `json:"unreserved"` // AccountLimit.UnreservedConcurrentExecutions
	// OursReserved: what this stack's functions reserve today (already
	// subtracted from Unreserved), so a redeploy is not counted twice.
	OursReserved int `json:"ours_reserved"`
}

// lambdaUnreservedMinimum is what Lambda keeps unreserved in every account.
const lambdaUnreservedMinimum = 100

// awsErrors turns what boto3 raises for missing credentials or a refused
// call into one line on stderr and exit status 2, instead of a traceback.
const awsErrors = `
import sys
from botocore.exceptions import ClientError, NoCredentialsError, NoRegionError, EndpointConnectionError
def fail(e, needs):
    if isinstance(e, NoCredentialsError):
        print("no AWS credentials: aws configure, AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY", file=sys.stderr)
    elif isinstance(e, ClientError):
        err = e.response.get("Error", {})
        print("AWS refused: %s: %s (the deploying identity needs %s)" % (err.get("Code"), err.get("Message"), needs), file=sys.stderr)
    else:
        print("AWS: %s" % e, file=sys.stderr)
    sys.exit(2)
`

const accountScript = awsErrors + `
import boto3, json
stack, region = sys.argv[1], sys.argv[2]
try:
    lam = boto3.client("lambda", region_name=region)
    limit = lam.get_account_settings()["AccountLimit"]
    ours = 0
    for fn in (stack + "-mcp", stack + "-reconciler"):
        try:
            ours += lam.get_function_concurrency(FunctionName=fn).get("ReservedConcurrentExecutions", 0)
        except lam.exceptions.ResourceNotFoundException:
            pass
except Exception as e:
    fail(e, "lambda:GetAccountSettings and lambda:GetFunctionConcurrency")
print(json.dumps({"limit": limit["ConcurrentExecutions"], "unreserved": limit["UnreservedConcurrentExecutions"], "ours_reserved": ours}))
`

func accountConcurrency(ctx context.Context, r runner, python string, o options) (accountFacts, error) {
	raw, err := r.output(ctx, python, "-c", accountScript, o.stack, o.region)
	if err != nil {
		return accountFacts{}, fmt.Errorf("read the account's Lambda concurrency (credentials for %s?): %w", o.region, err)
	}
	var f accountFacts
	if err := json.Unmarshal(bytes.TrimSpace(raw), &f); err != nil {
		return accountFacts{}, fmt.Errorf("account concurrency answer %q: %w", raw, err)
	}
	return f, nil
}

// reservations are the parameters fitConcurrency checks.
var reservations = []string{"McpReservedConcurrency", "ReconcilerReservedConcurrency"}

// fitConcurrency checks the reservations (answered, else the template's
// defaults, read on every run) leave Lambda its 100 unreserved executions;
// if not, it offers (interactive) to deploy without reservations, else
// refuses with the numbers. Only that choice is written into answers.
func fitConcurrency(ctx context.Context, p prompter, tpl map[string]parameter, answers map[string]string, f accountFacts) error {
	want := 0
	for _, k := range reservations {
		v, answered := answers[k]
		if !answered && tpl[k].Default != nil {
			v = *tpl[k].Default
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return fmt.Errorf("%s=%q: want a non-negative integer", k, v)
		}
		want += n
	}
	if want == 0 {
		// Nothing to reserve: a small account's limit is no obstacle.
		return nil
	}
	left := f.Unreserved + f.OursReserved - want
	if left >= lambdaUnreservedMinimum {
		return nil
	}
	msg := fmt.Sprintf("the account's Lambda concurrency limit is %d (%d unreserved now); reserving %d would leave %d, but Lambda keeps %d unreserved",
		f.Limit, f.Unreserved, want, left, lambdaUnreservedMinimum)
	ok, err := p.confirm(ctx, msg+". Deploy without reserved concurrency (route throttling remains the only cap; ask AWS for a higher limit later, then run with -guided)?")
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%s: request a limit increase (Service Quotas, Lambda concurrent executions) or set McpReservedConcurrency=0 and ReconcilerReservedConcurrency=0 in the answers file", msg)
	}
	answers["McpReservedConcurrency"], answers["ReconcilerReservedConcurrency"] = "0", "0"
	return nil
}

const stackScript = awsErrors + `
import boto3, json
stack, region = sys.argv[1], sys.argv[2]

def left_table():
    # The operations table outlives its stack (DeletionPolicy): a stack
    # about to be created under the same name would fail to create it.
    # Unknown (not allowed to look) reads as none: CloudFormation says so.
    name = stack + "-operations"
    try:
        boto3.client("dynamodb", region_name=region).describe_table(TableName=name)
    except ClientError:
        return ""
    return name

try:
    stacks = boto3.client("cloudformation", region_name=region).describe_stacks(StackName=stack)["Stacks"]
except ClientError as e:
    err = e.response.get("Error", {})
    if err.get("Code") == "ValidationError" and "does not exist" in err.get("Message", ""):
        print(json.dumps({"left_table": left_table()}))
        sys.exit(0)
    fail(e, "cloudformation:DescribeStacks")
except Exception as e:
    fail(e, "cloudformation:DescribeStacks")
s = stacks[0]
outs = {o["OutputKey"]: o["OutputValue"] for o in s.get("Outputs", [])}
params = {p["ParameterKey"]: p.get("ParameterValue", "") for p in s.get("Parameters", [])}
# REVIEW_IN_PROGRESS: a stack sam made for a change set never executed,
# which has created nothing: it is created like a new one.
left = left_table() if s["StackStatus"] == "REVIEW_IN_PROGRESS" else ""
print(json.dumps({"endpoint": outs.get("McpEndpointUrl", ""), "resource_url": params.get("ResourceUrl", ""), "stage": params.get("Stage", ""), "status": s["StackStatus"], "left_table": left}))
`

// stackState is what a deploy needs to know of the stack: its endpoint
// (empty when there is no stack, or no output yet), the ResourceUrl its
// functions were last deployed with and its status (empty: no stack).
// LeftTable names the operations table of a stack of this name that is
// gone (or was never created): the table is retained when its stack is
// deleted, and creating the stack again would fail on it.
type stackState struct {
	Endpoint    string `json:"endpoint"`
	ResourceURL string `json:"resource_url"`
	Stage       string `json:"stage,omitempty"` // the deployed stack's Stage parameter
	Status      string `json:"status"`
	LeftTable   string `json:"left_table,omitempty"`
}

// deployable says what to do about a stack CloudFormation will not
// update, before anything is built. No stack, or one sam left in
// REVIEW_IN_PROGRESS (a declined first change set), deploys as new.
func (st stackState) deployable(o options) error {
	where := fmt.Sprintf("-stack %s -region %s", o.stack, o.region)
	switch s := st.Status; {
	case (s == "" || s == "REVIEW_IN_PROGRESS") && st.LeftTable != "":
		return fmt.Errorf("the DynamoDB table %s, kept when an earlier stack %s was deleted, is still in %s: creating the stack would fail on it (\"already exists\"). "+
			"Export its records if they must be kept, then aws dynamodb delete-table --table-name %s --region %s; or deploy under another -stack",
			st.LeftTable, o.stack, o.region, st.LeftTable, o.region)
	case s == "" || s == "REVIEW_IN_PROGRESS":
		return nil
	case s == "ROLLBACK_COMPLETE" || s == "ROLLBACK_FAILED" || s == "DELETE_FAILED":
		return fmt.Errorf("the stack %s is %s (a first create that failed, or a delete that did): run make destroy ARGS=\"%s\", then deploy again", o.stack, s, where)
	case strings.HasSuffix(s, "_IN_PROGRESS"):
		return fmt.Errorf("the stack %s is %s: wait for it to finish (aws cloudformation describe-stacks --stack-name %s --region %s), then deploy again", o.stack, s, o.stack, o.region)
	case s == "UPDATE_ROLLBACK_FAILED":
		return fmt.Errorf("the stack %s is %s: aws cloudformation continue-update-rollback --stack-name %s --region %s, then deploy again", o.stack, s, o.stack, o.region)
	case strings.HasSuffix(s, "_FAILED"):
		return fmt.Errorf("the stack %s is %s: see its events in the CloudFormation console before deploying again", o.stack, s)
	}
	return nil
}

func readStack(ctx context.Context, r runner, python string, o options) (stackState, error) {
	raw, err := r.output(ctx, python, "-c", stackScript, o.stack, o.region)
	if err != nil {
		return stackState{}, fmt.Errorf("read stack %s: %w", o.stack, err)
	}
	var st stackState
	if err := json.Unmarshal(bytes.TrimSpace(raw), &st); err != nil {
		return stackState{}, fmt.Errorf("stack %s: answer %q: %w", o.stack, raw, err)
	}
	if st.Endpoint != "" && !strings.HasPrefix(st.Endpoint, "https://") {
		return stackState{}, fmt.Errorf("stack output McpEndpointUrl = %q is not an https URL", st.Endpoint)
	}
	return st, nil
}

// stageScript lists the other intentgate stacks in the region (stacks of
// template.yaml: they have its McpFunctionRevision parameter) with their
// Stage; stacks that hold no resources (a change set never executed, a
// failed create rolled back) do not count.
const stageScript = awsErrors + `
import boto3, json
stack, region = sys.argv[1], sys.argv[2]
# stages_in_use
empty = ("REVIEW_IN_PROGRESS", "ROLLBACK_COMPLETE", "DELETE_COMPLETE")
found = {}
try:
    for page in boto3.client("cloudformation", region_name=region).get_paginator("describe_stacks").paginate():
        for s in page["Stacks"]:
            params = {p["ParameterKey"]: p.get("ParameterValue", "") for p in s.get("Parameters", [])}
            if s["StackName"] != stack and s["StackStatus"] not in empty and "McpFunctionRevision" in params and "Stage" in params:
                found[s["StackName"]] = params["Stage"]
except ClientError as e:
    err = e.response.get("Error", {})
    if "AccessDenied" in err.get("Code", ""):
        print(json.dumps({"unchecked": "%s: %s" % (err.get("Code"), err.get("Message"))}))
        sys.exit(0)
    fail(e, "cloudformation:DescribeStacks")
except Exception as e:
    fail(e, "cloudformation:DescribeStacks")
print(json.dumps({"stages": found}))
`

// stageFacts answers stageScript: the other intentgate stacks' Stage, by
// stack name, or why they could not be listed.
type stageFacts struct {
	Stages    map[string]string `json:"stages"`
	Unchecked string            `json:"unchecked,omitempty"`
}

// checkStage refuses a Stage another intentgate stack in the region uses.
// The functions publish their metrics (namespace intentgate) under the
// Stage dimension and the access-log metrics are named after it, so the
// alarms of two such stacks would read each other's metrics, and those
// that are rollback triggers (escalations, for one) would roll back the
// other stack's deploys. A deployer who may not list the stacks is told,
// and the deploy goes on. So is one whose stack already has that Stage
// (current): stacks that share one since before this check must still be
// deployable, to be fixed or moved to a Stage of their own.
func checkStage(ctx context.Context, r runner, python string, o options, out io.Writer, stage, current string) error {
	raw, err := r.output(ctx, python, "-c", stageScript, o.stack, o.region)
	if err != nil {
		return fmt.Errorf("list the region's intentgate stacks: %w", err)
	}
	var f stageFacts
	if err := json.Unmarshal(bytes.TrimSpace(raw), &f); err != nil {
		return fmt.Errorf("intentgate stacks answer %q: %w", raw, err)
	}
	if f.Unchecked != "" {
		fmt.Fprintf(out, "Could not check that no other stack in %s uses Stage %s (%s): two stacks of one Stage read each other's metrics and alarms.\n", o.region, stage, f.Unchecked)
		return nil
	}
	var others []string
	for name, s := range f.Stages {
		if s == stage && name != o.stack {
			others = append(others, name)
		}
	}
	if len(others) == 0 {
		return nil
	}
	slices.Sort(others)
	if stage == current {
		fmt.Fprintf(out, "Warning: the Stage %q of this stack is also the Stage of %s in %s: the stacks read each other's metrics and alarms, "+
			"and one stack's escalations can roll back the other's deploys. Give each its own Stage (make deploy ARGS=-guided).\n",
			stage, strings.Join(others, ", "), o.region)
		return nil
	}
	return fmt.Errorf("the Stage %q is already the Stage of the stack %s in %s: the functions publish their metrics under the Stage alone, so the two stacks' alarms would read each other's, "+
		"and one stack's escalations would roll back the other's deploys. Answer another Stage (make deploy ARGS=-guided), one per stack in a region",
		stage, strings.Join(others, ", "), o.region)
}
