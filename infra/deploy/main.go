// Command deploy is `make deploy` and `make destroy`: a one-command SAM
// deployment of template.yaml to a real AWS account.
//
//	go run ./infra/deploy [-stack intentgate-dev] [-region us-east-1] [-guided] [-yes] [-republish]
//	go run ./infra/deploy -destroy [-stack ...] [-yes]
//
// The first run (or -guided) asks for what the template cannot default:
// the token issuer and its JWKS URL, the providers' URLs, the SSM names of
// their API keys, and remembers the answers in .deploy/<stack>.json (git
// ignores it), so later runs ask nothing. Every answer is checked against
// the template parameter's own AllowedPattern before anything is deployed.
// Before deploying it checks the account's Lambda concurrency: reserved
// concurrency must leave Lambda its 100 unreserved executions. Without a
// ResourceUrl (no custom domain yet) it deploys once with a placeholder,
// reads the McpEndpointUrl output and deploys again with it; later runs
// read the endpoint from the stack again. Every deploy
// names each function's version after its built code, its properties and
// the parameter values they use (<Function>Revision), so a change of
// answers alone reaches the alias, and only of the functions it touches.
//
// AWS is reached only through the tools virtualenv (sam, and boto3 for the
// account checks); credentials come from the usual AWS environment.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, execRunner{}); err != nil {
		fmt.Fprintln(os.Stderr, "deploy:", err)
		os.Exit(1)
	}
}

// options are the command line.
type options struct {
	stack, region, venv, template, stateDir, buildDir string
	guided, yes, destroy, republish                   bool
}

func parseArgs(args []string) (options, error) {
	fs := flag.NewFlagSet("deploy", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var o options
	fs.StringVar(&o.stack, "stack", "intentgate-dev", "CloudFormation stack name")
	fs.StringVar(&o.region, "region", envOr("AWS_REGION", "us-east-1"), "AWS region")
	fs.StringVar(&o.venv, "venv", ".venv-tools", "virtualenv holding sam and boto3")
	fs.StringVar(&o.template, "template", "template.yaml", "SAM template")
	fs.StringVar(&o.stateDir, "state", ".deploy", "where answers are remembered")
	fs.StringVar(&o.buildDir, "build-dir", ".aws-sam/build", "where sam build puts the functions and the template it deploys")
	fs.BoolVar(&o.guided, "guided", false, "ask every question again (answers so far are the defaults)")
	fs.BoolVar(&o.yes, "yes", false, "no confirmation prompts (CI); fails instead of asking")
	fs.BoolVar(&o.destroy, "destroy", false, "delete the stack (the operations table is retained)")
	fs.BoolVar(&o.republish, "republish", false, "publish new versions even of unchanged code and answers (new instances read the SSM parameters again)")
	if err := fs.Parse(args); err != nil {
		return options{}, fmt.Errorf("%w (flags: -stack, -region, -guided, -yes, -destroy, -republish, -venv, -template, -state, -build-dir)", err)
	}
	if fs.NArg() > 0 {
		return options{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
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

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func run(ctx context.Context, args []string, in io.Reader, out io.Writer, r runner) error {
	o, err := parseArgs(args)
	if err != nil {
		return err
	}
	sam := filepath.Join(o.venv, "bin", "sam")
	if o.destroy {
		cmd := []string{sam, "delete", "--stack-name", o.stack, "--region", o.region}
		if o.yes {
			cmd = append(cmd, "--no-prompts")
		}
		fmt.Fprintf(out, "Deleting stack %s in %s. The operations table is retained (DeletionPolicy); delete it yourself when its records may go.\n", o.stack, o.region)
		return r.run(ctx, out, cmd...)
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
	// The first run is guided: every question, defaults shown.
	guided := o.guided || (len(answers) == 0 && !o.yes)
	p := prompter{in: bufio.NewReader(in), out: out, interactive: !o.yes}
	if err := ask(p, tpl, answers, guided); err != nil {
		return err
	}
	if err := saveAnswers(state, answers); err != nil {
		return err
	}
	fmt.Fprintf(out, "Answers saved in %s.\n", state)

	if answers["GatewayJwtAuthorizer"] == "true" {
		if err := checkGatewayIssuer(ctx, r, out, answers["TokenIssuer"], answers["JwksUrl"]); err != nil {
			return err
		}
	}

	python := filepath.Join(o.venv, "bin", "python")
	account, err := accountConcurrency(ctx, r, python, o)
	if err != nil {
		return err
	}
	if err := fitConcurrency(p, answers, account); err != nil {
		return err
	}
	if err := saveAnswers(state, answers); err != nil {
		return err
	}
	if err := r.run(ctx, out, sam, "build", "--template-file", o.template, "--build-dir", o.buildDir); err != nil {
		return fmt.Errorf("sam build: %w", err)
	}
	saltFile := filepath.Join(o.stateDir, o.stack+".republished")
	salt, err := republishSalt(o, saltFile)
	if err != nil {
		return err
	}
	deploy := func(params map[string]string) error {
		revisions, err := functionRevisions(o.buildDir, tpl, params, salt)
		if err != nil {
			return err
		}
		return r.run(ctx, out, deployCommand(sam, o, params, revisions)...)
	}
	params := withDefaults(tpl, answers)
	if answers["ResourceUrl"] != "" {
		if err := deploy(params); err != nil {
			return fmt.Errorf("sam deploy: %w", err)
		}
		return rememberSalt(o, saltFile, salt)
	}
	// No answer: the API's own URL, which only the stack knows. It is
	// read from the stack on every run and never remembered as an answer,
	// so a stack created anew gets its own.
	st, err := readStack(ctx, r, python, o)
	if err != nil {
		return err
	}
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
	return rememberSalt(o, saltFile, salt)
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
