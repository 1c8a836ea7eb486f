// Command deploy is `make deploy` and `make destroy`: a one-command SAM
// deployment of template.yaml to a real AWS account.
//
//	go run ./infra/deploy [-stack intentgate-dev] [-region us-east-1] [-guided] [-yes] [-republish] [-fix-forward]
//	go run ./infra/deploy -destroy [-stack ...] [-region ...] [-yes]
//
// The first run (or -guided) asks for what the template cannot default:
// the token issuer and its JWKS URL, the providers' URLs, the SSM names of
// their API keys, and remembers the answers in .deploy/<stack>.json (git
// ignores it), with the region the stack went to (.deploy/<stack>.region),
// so later runs ask nothing and go back there. Every answer is checked
// against the template parameter's own rules before anything is deployed.
// Before deploying it checks the account's Lambda concurrency: reserved
// concurrency must leave Lambda its 100 unreserved executions. Without a
// ResourceUrl (no custom domain yet) it deploys once with a placeholder,
// reads the McpEndpointUrl output and deploys again with it; later runs
// read the endpoint from the stack again. Every deploy
// names each function's version after its built code, its properties and
// the parameter values they use (<Function>Revision), so a change of
// answers alone reaches the alias, and only of the functions it touches.
// A deploy that created the stack (which CloudFormation checks with no
// PreTraffic hook) then asks the API for the protected resource metadata,
// which the MCP function answers only once its whole start succeeded.
//
// AWS is reached only through the tools virtualenv (sam, and boto3 for the
// account checks); credentials come from the usual AWS environment.
package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := needsTerminal(ctx, os.Args[1:], os.Stdin); err != nil {
		fmt.Fprintln(os.Stderr, "deploy:", err)
		os.Exit(2)
	}
	if err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, execRunner{}); err != nil {
		fmt.Fprintln(os.Stderr, "deploy:", err)
		os.Exit(1)
	}
}

// needsTerminal refuses a run that would ask questions (no -yes) when
// stdin is not a terminal: in CI sam's confirmation would fail only after
// the build, the upload and the change set, and answers piped in are read
// ahead of sam's own prompt.
func needsTerminal(ctx context.Context, args []string, stdin *os.File) error {
	o, err := parseArgs(ctx, args)
	if err != nil || o.yes {
		return nil // run reports the arguments' error
	}
	if fi, err := stdin.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
		return nil
	}
	return errors.New("stdin is not a terminal: run interactively, or pass -yes (ARGS=-yes) with the answers remembered")
}

// options are the command line.
type options struct {
	stack, region, venv, template, stateDir, buildDir string
	guided, yes, destroy, republish, fixForward       bool
	// regionGiven: -region was on the command line (not a default).
	regionGiven bool
	// regionFrom says where a region not given came from.
	regionFrom string
}

func parseArgs(ctx context.Context, args []string) (options, error) {
	fs := flag.NewFlagSet("deploy", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var o options
	fs.StringVar(&o.stack, "stack", "intentgate-dev", "CloudFormation stack name")
	fs.StringVar(&o.region, "region", "", "AWS region (default: the one the stack was deployed to, else AWS_REGION, AWS_DEFAULT_REGION, the AWS profile's region, us-east-1)")
	fs.StringVar(&o.venv, "venv", ".venv-tools", "virtualenv holding sam and boto3")
	fs.StringVar(&o.template, "template", "template.yaml", "SAM template")
	fs.StringVar(&o.stateDir, "state", ".deploy", "where answers are remembered")
	fs.StringVar(&o.buildDir, "build-dir", ".aws-sam/build", "where sam build puts the functions and the template it deploys")
	fs.BoolVar(&o.guided, "guided", false, "ask every question again (answers so far are the defaults)")
	fs.BoolVar(&o.yes, "yes", false, "no confirmation prompts (CI); fails instead of asking")
	fs.BoolVar(&o.destroy, "destroy", false, "delete the stack (the operations table is retained)")
	fs.BoolVar(&o.republish, "republish", false, "publish new versions even of unchanged code and answers (new instances read the SSM parameters again)")
	fs.BoolVar(&o.fixForward, "fix-forward", false, "this deploy is rolled back only by the new version's own errors, not by the alarms the old version may be setting off (docs/runbook.md); not remembered")
	if err := fs.Parse(args); err != nil {
		var usage strings.Builder
		fs.SetOutput(&usage)
		fs.PrintDefaults()
		return options{}, fmt.Errorf("%w\nusage: make deploy ARGS=\"[flags]\", make destroy ARGS=\"[flags]\" (go run ./infra/deploy [flags])\n%s", err, usage.String())
	}
	if fs.NArg() > 0 {
		return options{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	fs.Visit(func(f *flag.Flag) { o.regionGiven = o.regionGiven || f.Name == "region" })
	if !o.regionGiven {
		var err error
		if o.region, o.regionFrom, err = ambientRegion(ctx); err != nil {
			return options{}, err
		}
	}
	if !stackName.MatchString(o.stack) {
		return options{}, fmt.Errorf("-stack %q: 1-53 letters, digits and hyphens, starting with a letter (the reconciler's function name, <stack>-reconciler, may have 64)", o.stack)
	}
	if !regionName.MatchString(o.region) {
		return options{}, fmt.Errorf("-region %q is not an AWS region name", o.region)
	}
	if o.guided && o.yes {
		return options{}, fmt.Errorf("-guided asks questions; -yes forbids them")
	}
	return o, nil
}

const defaultRegion = "us-east-1"

// ambientRegion is the region sam and the AWS CLI would pick without
// --region: AWS_REGION, AWS_DEFAULT_REGION, then the region of the
// profile (AWS_PROFILE, else default) in the CLI's config file; us-east-1
// only when none names one. The SDK's own loader reads them, in that
// order. A profile named but not there is an error: the credentials
// would fail after the questions, and its region is unknown.
func ambientRegion(ctx context.Context) (region, from string, _ error) {
	for _, k := range []string{"AWS_REGION", "AWS_DEFAULT_REGION"} {
		if v := os.Getenv(k); v != "" {
			return v, k, nil
		}
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return "", "", fmt.Errorf("read the AWS profile's region (or pass -region): %w", err)
	}
	if cfg.Region == "" {
		return defaultRegion, "the default: neither the environment nor the AWS profile names a region", nil
	}
	profile := os.Getenv("AWS_PROFILE")
	if profile == "" {
		profile = cmp.Or(os.Getenv("AWS_DEFAULT_PROFILE"), "default")
	}
	return cfg.Region, "the AWS profile " + profile, nil
}

func run(ctx context.Context, args []string, in io.Reader, out io.Writer, r runner) error {
	o, err := parseArgs(ctx, args)
	if err != nil {
		return err
	}
	sam := filepath.Join(o.venv, "bin", "sam")
	python := filepath.Join(o.venv, "bin", "python")
	for _, tool := range []string{sam, python} {
		if err := r.available(tool); err != nil {
			return fmt.Errorf("%w (make deploy builds the tools virtualenv %s first)", err, o.venv)
		}
	}
	o, regionRemembered, err := settleRegion(ctx, r, python, o, out)
	if err != nil {
		return err
	}
	samConfig, err := emptySamConfig(o.stateDir)
	if err != nil {
		return err
	}
	if o.destroy {
		return destroy(ctx, r, out, o, sam, python, samConfig)
	}
	tpl, err := loadParameters(o.template)
	if err != nil {
		return err
	}
	state := filepath.Join(o.stateDir, o.stack+".json")
	answers, err := loadAnswers(state)
	if err != nil {
		return err
	}
	if len(answers) > 0 && !regionRemembered && !o.regionGiven {
		// Answers from before regions were remembered (or a region file
		// removed by hand): the stack may be in another region than the
		// one the defaults give now, and deploying would create a second.
		st, err := readStack(ctx, r, python, o)
		if err != nil {
			return err
		}
		if st.Status == "" {
			return fmt.Errorf("the stack %s has answers (%s) but is not in %s, and the region it was deployed to is not remembered: "+
				"pass -region with its region (AWS_REGION, else us-east-1, before AWS_DEFAULT_REGION was read), or -region %s to create it there",
				o.stack, state, o.region, o.region)
		}
	}
	// The first run is guided: every question, defaults shown.
	guided := o.guided || (len(answers) == 0 && !o.yes)
	p := prompter{in: bufio.NewReader(in), out: out, interactive: !o.yes}
	if err := ask(ctx, p, tpl, answers, guided, o.guided); err != nil {
		return err
	}
	if err := saveAnswers(state, answers); err != nil {
		return err
	}
	// The stack's region goes with its answers: a later run without
	// -region goes back there (a region remembered for a stack that was
	// never created, or is gone, yields to another -region: settleRegion).
	if err := rememberRegion(o); err != nil {
		return err
	}
	fmt.Fprintf(out, "Answers saved in %s.\n", state)

	if answers["GatewayJwtAuthorizer"] == "true" {
		if err := checkGatewayIssuer(ctx, r, out, answers["TokenIssuer"], answers["JwksUrl"]); err != nil {
			return err
		}
	}
	if err := checkFunctionKeys(ctx, r, out, answers["JwksUrl"], answers["GatewayJwtAuthorizer"] == "true"); err != nil {
		return err
	}

	if err := checkARNRegions(answers, o.region); err != nil {
		return err
	}
	if err := checkDueShards(withDefaults(tpl, answers)); err != nil {
		return err
	}
	if err := checkSecureStrings(ctx, r, python, o, out, withDefaults(tpl, answers)); err != nil {
		return err
	}
	account, err := accountConcurrency(ctx, r, python, o)
	if err != nil {
		return err
	}
	if err := fitConcurrency(ctx, p, tpl, answers, account); err != nil {
		return err
	}
	if err := saveAnswers(state, answers); err != nil {
		return err
	}
	// Read before anything is built: a stack CloudFormation will not
	// update is reported now, not after the build and the upload.
	st, err := readStack(ctx, r, python, o)
	if err != nil {
		return err
	}
	if err := st.deployable(o); err != nil {
		return err
	}
	// This run creates the stack: CloudFormation runs no PreTraffic hook
	// for what it creates, so the deploy checks the endpoint itself.
	creates := st.Status == "" || st.Status == "REVIEW_IN_PROGRESS"
	if err := checkStage(ctx, r, python, o, out, withDefaults(tpl, answers)["Stage"], st.Stage); err != nil {
		return err
	}
	// What samconfig.toml sets for builds, stated: no cache (sam hashes
	// only the CodeUri folder, not internal/), the functions in parallel.
	if err := r.run(ctx, out, sam, "build", "--config-file", samConfig, "--no-cached", "--parallel", "--template-file", o.template, "--build-dir", o.buildDir); err != nil {
		return fmt.Errorf("sam build: %w", err)
	}
	saltFile := filepath.Join(o.stateDir, o.stack+".republished")
	salt, err := republishSalt(o, saltFile)
	if err != nil {
		return err
	}
	audienceIsTheEndpoint := answers["GatewayJwtAuthorizer"] == "true" && answers["JwtAudience"] == ""
	deploy := func(params map[string]string) error {
		if audienceIsTheEndpoint {
			// The authorizer has no fallback to ResourceUrl; the answer
			// left empty means it, read anew at every deploy.
			params["JwtAudience"] = params["ResourceUrl"]
		}
		revisions, err := functionRevisions(o.buildDir, tpl, params, salt)
		if err != nil {
			return err
		}
		return r.run(ctx, out, deployCommand(sam, samConfig, o, params, revisions)...)
	}
	params := withDefaults(tpl, answers)
	// Never an answer: every deploy passes it, or sam deploy would keep a
	// fix-forward's value for the deploys after it.
	params["RollbackAlarms"] = "All"
	if o.fixForward {
		params["RollbackAlarms"] = "NewVersionErrors"
		fmt.Fprintln(out, "Fixing forward: only the new version's own errors roll this deploy back; the other alarms still notify.")
	}
	if answers["ResourceUrl"] != "" {
		if err := deploy(params); err != nil {
			return fmt.Errorf("sam deploy: %w", err)
		}
		if err := rememberSalt(o, saltFile, salt); err != nil {
			return err
		}
		return checkServing(ctx, r, python, o, out, creates)
	}
	// No answer: the API's own URL, which only the stack knows. It is
	// read from the stack on every run and never remembered as an answer,
	// so a stack created anew gets its own.
	if st.Endpoint == "" {
		// No stack yet: a first deploy with a placeholder reveals the URL.
		params["ResourceUrl"] = placeholderResourceURL
		if err := deploy(params); err != nil {
			return fmt.Errorf("sam deploy: %w", err)
		}
		if st, err = readStack(ctx, r, python, o); err != nil {
			return err
		}
		if st.Endpoint == "" {
			return fmt.Errorf("the stack %s has no McpEndpointUrl output after its deploy (was its change set declined?)", o.stack)
		}
		fmt.Fprintf(out, "The endpoint is %s; deploying again with it as ResourceUrl (the token audience).\n", st.Endpoint)
	}
	params["ResourceUrl"] = st.Endpoint
	if st.ResourceURL == placeholderResourceURL {
		// The version on the alias answers with the placeholder audience
		// and refuses every real token (just created, or a second pass that
		// failed or was declined): nothing is gained by shifting away from
		// it gradually, and its refusals would set off the auth alarm that
		// rolls a canary back. The deployment type is not part of a version.
		fmt.Fprintln(out, "The stack still serves the placeholder audience: shifting to the endpoint all at once.")
		params["DeploymentType"] = "AllAtOnce"
	}
	if err := deploy(params); err != nil {
		return fmt.Errorf("sam deploy with ResourceUrl %s: %w", st.Endpoint, err)
	}
	if err := rememberSalt(o, saltFile, salt); err != nil {
		return err
	}
	return checkServing(ctx, r, python, o, out, creates)
}

// servingAttempts and servingRetryWait: how often, and how far apart, a
// new stack's endpoint is asked before its error status is taken as the
// answer (a function's first start reads the SecureStrings and the
// issuer's keys; an API just created may answer 404 for a moment).
var (
	servingAttempts  = 3
	servingRetryWait = 5 * time.Second
)

// checkServing, after a deploy that created the stack, GETs the protected
// resource metadata through the API: the MCP function answers it only once
// its whole start (configuration, SecureStrings, the issuer's keys)
// succeeded, and a first create runs no PreTraffic check that would have
// found out. An error status fails the deploy with where to look; an
// answer this machine can not get is reported only.
func checkServing(ctx context.Context, r runner, python string, o options, out io.Writer, created bool) error {
	if !created {
		return nil // an update's new versions passed their PreTraffic hooks
	}
	st, err := readStack(ctx, r, python, o)
	if err != nil {
		return err
	}
	if st.Endpoint == "" {
		return nil // the change set was declined: nothing was created
	}
	url := strings.TrimSuffix(st.Endpoint, "/mcp") + "/.well-known/oauth-protected-resource"
	var status int
	for attempt := 1; ; attempt++ {
		status, _, err = r.fetch(ctx, url)
		if err != nil {
			fmt.Fprintf(out, "Could not check from here that the new stack serves (%s: %v): the MCP function reads its SecureStrings and the issuer's keys when it starts.\n", url, err)
			return nil
		}
		if status == http.StatusOK {
			fmt.Fprintf(out, "The new stack serves: %s answered 200.\n", url)
			return nil
		}
		if attempt >= servingAttempts || (status != http.StatusNotFound && status < 500) {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(servingRetryWait):
		}
	}
	return fmt.Errorf("the stack %s was created, but %s answers HTTP %d: the MCP function does not start or serve, and a first create runs no PreTraffic check. "+
		"Its log group /aws/lambda/%s-mcp says why (aws logs tail /aws/lambda/%s-mcp --region %s); fix the cause and run make deploy again",
		o.stack, url, status, o.stack, o.stack, o.region)
}

// placeholderResourceURL stands in for ResourceUrl until the first deploy
// reveals the API's URL; no token is ever minted for it.
const placeholderResourceURL = "https://resource-url.pending.invalid/mcp"

// republishSalt is what makes -republish's versions unlike any before: a
// rotated SSM value is read by new instances only, and new versions send
// every call to one. Without -republish it is the last one deployed
// (rememberSalt), so the deploys after it name the versions as it did and
// publish nothing new.
func republishSalt(o options, path string) (string, error) {
	if o.republish {
		return time.Now().UTC().Format(time.RFC3339Nano), nil
	}
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read the last -republish: %w", err)
	}
	return strings.TrimSpace(string(raw)), nil
}

// rememberSalt keeps a -republish's salt once its deploy succeeded; a
// failed one is not remembered, and the next deploy names the versions as
// before it.
func rememberSalt(o options, path, salt string) error {
	if !o.republish {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("remember -republish: %w", err)
	}
	if err := os.WriteFile(path, []byte(salt+"\n"), 0o600); err != nil {
		return fmt.Errorf("remember -republish: %w", err)
	}
	return nil
}

// settleRegion picks the stack's region: the one it was deployed to,
// remembered with its answers (a run without -region goes back there),
// else -region, AWS_REGION, AWS_DEFAULT_REGION, us-east-1. A different
// -region is refused while the stack is still in the remembered one (the
// deploy would create a second stack of the same name); a destroy may
// name any region. remembered: the region came from the file.
func settleRegion(ctx context.Context, r runner, python string, o options, out io.Writer) (_ options, remembered bool, _ error) {
	raw, err := os.ReadFile(regionFile(o))
	if errors.Is(err, fs.ErrNotExist) {
		if !o.regionGiven {
			fmt.Fprintf(out, "Region %s, from %s (no -region given).\n", o.region, o.regionFrom)
		}
		return o, false, nil
	}
	if err != nil {
		return o, false, fmt.Errorf("read the stack's region: %w", err)
	}
	stored := strings.TrimSpace(string(raw))
	if !regionName.MatchString(stored) {
		return o, false, fmt.Errorf("%s: %q is not a region name (delete the file and pass -region)", regionFile(o), stored)
	}
	if !o.regionGiven || o.region == stored {
		if !o.regionGiven {
			fmt.Fprintf(out, "Region %s, where the stack was deployed (%s).\n", stored, regionFile(o))
		}
		o.region = stored
		return o, true, nil
	}
	if o.destroy {
		return o, false, nil
	}
	there, err := readStack(ctx, r, python, options{stack: o.stack, region: stored})
	if err != nil {
		return o, false, err
	}
	if there.Status != "" {
		return o, false, fmt.Errorf("the stack %s is in %s (%s); -region %s would create a second stack of that name: use another -stack, or make destroy ARGS=\"-stack %s -region %s\" first",
			o.stack, stored, regionFile(o), o.region, o.stack, stored)
	}
	fmt.Fprintf(out, "The stack %s is no longer in %s: deploying to %s.\n", o.stack, stored, o.region)
	if err := os.Remove(regionFile(o)); err != nil {
		return o, false, fmt.Errorf("forget the region: %w", err)
	}
	return o, false, nil
}

func regionFile(o options) string { return filepath.Join(o.stateDir, o.stack+".region") }

// rememberRegion keeps the region a deploy is about to create or update
// the stack in.
func rememberRegion(o options) error {
	if err := os.MkdirAll(o.stateDir, 0o700); err != nil {
		return fmt.Errorf("remember the region: %w", err)
	}
	if err := os.WriteFile(regionFile(o), []byte(o.region+"\n"), 0o600); err != nil {
		return fmt.Errorf("remember the region: %w", err)
	}
	return nil
}

// emptySamConfig is the configuration every sam command is given: empty.
// Without it sam reads the repository's samconfig.toml (a profile, a
// bucket set there for hand-run sam would send the deploy elsewhere than
// where the account was checked). An absolute path: sam reads a relative
// one against the template's folder.
func emptySamConfig(stateDir string) (string, error) {
	dir, err := filepath.Abs(stateDir)
	if err != nil {
		return "", fmt.Errorf("state folder: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("state folder: %w", err)
	}
	path := filepath.Join(dir, "samconfig.none.toml")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	return path, nil
}

// destroy deletes the stack, where it is: sam delete answers a stack that
// is not there with an error and exit status 0, and a declined
// confirmation with exit status 0 too, so the stack is looked up before
// and after. The region is forgotten once no stack is there.
func destroy(ctx context.Context, r runner, out io.Writer, o options, sam, python, samConfig string) error {
	st, err := readStack(ctx, r, python, o)
	if err != nil {
		return err
	}
	if st.Status == "" {
		return errors.Join(fmt.Errorf("no stack %s in %s (another -region?)", o.stack, o.region), forgetRegion(o))
	}
	cmd := []string{sam, "delete", "--config-file", samConfig, "--stack-name", o.stack, "--region", o.region}
	if o.yes {
		cmd = append(cmd, "--no-prompts")
	}
	fmt.Fprintf(out, "Deleting stack %s in %s, with its functions, API, alarms, dashboard, failure queue and log groups "+
		"(the audit records in them go too: export them first if they must be kept), and its artifacts in sam's bucket. "+
		"The operations table is retained (DeletionPolicy); delete it yourself when its records may go.\n", o.stack, o.region)
	if err := r.run(ctx, out, cmd...); err != nil {
		return err
	}
	if st, err = readStack(ctx, r, python, o); err != nil || st.Status != "" {
		return err // declined: the stack stays, and so does its region
	}
	return forgetRegion(o)
}

// forgetRegion removes the remembered region if it is o's: the stack is
// not there (any more).
func forgetRegion(o options) error {
	raw, err := os.ReadFile(regionFile(o))
	if errors.Is(err, fs.ErrNotExist) || (err == nil && strings.TrimSpace(string(raw)) != o.region) {
		return nil
	}
	if err == nil {
		err = os.Remove(regionFile(o))
	}
	if err != nil {
		return fmt.Errorf("forget the region: %w", err)
	}
	return nil
}
