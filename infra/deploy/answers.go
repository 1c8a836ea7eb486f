package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

var (
	stackName  = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9-]{0,52}$`)
	regionName = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]$`)
)

// parameter is one template parameter's constraints.
type parameter struct {
	Type           string   `yaml:"Type"`
	Default        *string  `yaml:"Default"`
	AllowedPattern string   `yaml:"AllowedPattern"`
	AllowedValues  []string `yaml:"AllowedValues"`
	MaxLength      *int     `yaml:"MaxLength"`
	MinValue       *float64 `yaml:"MinValue"`
	MaxValue       *float64 `yaml:"MaxValue"`
	Description    string   `yaml:"Description"`
}

// loadParameters reads the template's Parameters (its own rules are the
// answers' rules: one source of truth).
func loadParameters(path string) (map[string]parameter, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read template: %w", err)
	}
	var doc struct {
		Parameters map[string]parameter `yaml:"Parameters"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	if len(doc.Parameters) == 0 {
		return nil, fmt.Errorf("%s declares no parameters", path)
	}
	return doc.Parameters, nil
}

// emptyIsAnAnswer are parameters whose empty answer means something other
// than the empty value: no ResourceUrl means "the API's own URL", which
// the deploy reads from the stack (or finds with a first deploy).
var emptyIsAnAnswer = map[string]bool{"ResourceUrl": true}

// validate checks v as CloudFormation would, and that sam deploy can pass
// it: its --parameter-overrides parser takes a quoted value but turns \"
// into " and keeps any other backslash, and it reads ParameterKey= inside
// a value as the start of another parameter.
func (p parameter) validate(name, v string) error {
	if v == "" && emptyIsAnAnswer[name] {
		return nil
	}
	if strings.ContainsAny(v, `"\`) {
		return fmt.Errorf("%s=%q: quotes and backslashes can not be passed to sam deploy", name, v)
	}
	if strings.Contains(strings.ToLower(v), "parameterkey=") || strings.Contains(strings.ToLower(v), "parametervalue=") {
		return fmt.Errorf("%s=%q: sam deploy would read ParameterKey=/ParameterValue= in a value as another parameter", name, v)
	}
	if p.MaxLength != nil && len(v) > *p.MaxLength {
		return fmt.Errorf("%s: at most %d characters, got %d", name, *p.MaxLength, len(v))
	}
	if p.AllowedPattern != "" {
		re, err := regexp.Compile(p.AllowedPattern)
		if err != nil {
			return fmt.Errorf("%s: template pattern: %w", name, err)
		}
		if !re.MatchString(v) {
			return fmt.Errorf("%s=%q does not match %s", name, v, p.AllowedPattern)
		}
	}
	if len(p.AllowedValues) > 0 && !slices.Contains(p.AllowedValues, v) {
		return fmt.Errorf("%s=%q: one of %s", name, v, strings.Join(p.AllowedValues, ", "))
	}
	if p.Type == "Number" {
		n, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return fmt.Errorf("%s=%q: want a number", name, v)
		}
		if p.MinValue != nil && n < *p.MinValue {
			return fmt.Errorf("%s=%s: the least is %g", name, v, *p.MinValue)
		}
		if p.MaxValue != nil && n > *p.MaxValue {
			return fmt.Errorf("%s=%s: the most is %g", name, v, *p.MaxValue)
		}
	}
	return nil
}

// checkARNRegions refuses an alarm topic or KMS key ARN of another region
// than the stack's: CloudWatch refuses the alarm action while the stack is
// created, and KMS the decrypt at the functions' cold start.
func checkARNRegions(answers map[string]string, region string) error {
	for _, k := range []string{"AlarmTopicArn", "DownstreamApiKeyKmsKeyArn"} {
		arn := answers[k]
		if arn == "" {
			continue
		}
		parts := strings.SplitN(arn, ":", 5)
		if len(parts) < 5 || parts[0] != "arn" {
			return fmt.Errorf("%s=%q: not an ARN", k, arn)
		}
		if parts[3] != region {
			return fmt.Errorf("%s=%q is in %s, the stack in %s: use one of %s (make deploy ARGS=-guided), or deploy with -region %s", k, arn, parts[3], region, region, parts[3])
		}
	}
	return nil
}

// checkDueShards refuses a DueShardsSwept between 1 and DueShards-1: the
// functions refuse to start with it (a sweep must read at least every
// shard the writers use), and CloudFormation's Rules compare no numbers, so
// the template can not refuse it. params: answers with the template's
// defaults.
func checkDueShards(params map[string]string) error {
	shards, err := strconv.Atoi(params["DueShards"])
	if err != nil {
		return fmt.Errorf("DueShards=%q: want an integer", params["DueShards"])
	}
	swept, err := strconv.Atoi(params["DueShardsSwept"])
	if err != nil {
		return fmt.Errorf("DueShardsSwept=%q: want an integer", params["DueShardsSwept"])
	}
	if swept != 0 && swept < shards {
		return fmt.Errorf("DueShardsSwept=%d is below DueShards=%d: the functions would refuse to start (the sweep reads at least every shard written to); "+
			"set it to 0 (= DueShards) or to %d or more (make deploy ARGS=-guided, or the answers file)", swept, shards, shards)
	}
	return nil
}

// question is one answer the guided deploy asks for.
type question struct {
	param, prompt string
	required      bool
}

// questions: what the template cannot default, then what a deployer
// usually sets. ResourceUrl may stay empty (the first deploy finds it).
var questions = []question{
	{"Stage", "Environment name", false},
	{"TokenIssuer", "Token issuer (the tokens' iss claim, https://...)", true},
	{"JwksUrl", "JWKS URL of that issuer (https://...)", true},
	{"ResourceUrl", "MCP endpoint URL if you have a custom domain (empty: use the API's URL, found by a first deploy)", false},
	{"RiskApiUrl", "Risk API base URL (https://...)", true},
	{"ReleaseApiUrl", "Release API base URL (https://...)", true},
	{"RiskApiKeyParameterName", "SSM SecureString name holding the Risk API key", false},
	{"ReleaseApiKeyParameterName", "SSM SecureString name holding the Release API key", false},
	{"TaskIdKeyParameterName", "SSM SecureString name holding the MCP Tasks id key, 32+ bytes (empty: Tasks off)", false},
	{"DownstreamApiKeyKmsKeyArn", "KMS key ARN of those SecureStrings (empty: aws/ssm)", false},
	{"DeployGrants", "Deploy grants (team=svc,svc;team2=svc)", false},
	{"AlarmTopicArn", "SNS topic ARN for alarms (empty: none)", false},
	{"GatewayJwtAuthorizer", "Let API Gateway verify tokens (true/false; true needs an RSA-signing issuer)", false},
}

// ask fills answers: every missing required one, and in guided mode every
// question (the current answer or the template default is the default;
// "-" clears an optional answer); with reservations (-guided) the reserved
// concurrencies too.
func ask(ctx context.Context, p prompter, params map[string]parameter, answers map[string]string, guided, reservations bool) error {
	qs := slices.Clone(questions)
	if answers["GatewayJwtAuthorizer"] == "true" || guided {
		qs = append(qs, question{"JwtAudience", "Audience the JWT authorizer requires (empty: the ResourceUrl, or without one the endpoint URL read from the stack, at each deploy)", false},
			question{"GatewayRequiredScope", "OAuth scope the JWT authorizer requires on /mcp", false})
	}
	if reservations {
		// Asked by -guided, after a limit increase (the deploy writes 0 when
		// the account had no headroom); their defaults are not written down.
		qs = append(qs, question{"McpReservedConcurrency", "Reserved concurrency of the MCP function (0: none)", false},
			question{"ReconcilerReservedConcurrency", "Reserved concurrency of the reconciler (0: none)", false})
	}
	for _, q := range qs {
		par, ok := params[q.param]
		if !ok {
			return fmt.Errorf("template.yaml has no parameter %s", q.param)
		}
		current, have := answers[q.param]
		if have && !guided {
			if err := par.validate(q.param, current); err != nil {
				return fmt.Errorf("remembered answer: %w (run make deploy ARGS=-guided)", err)
			}
			continue
		}
		def := current
		if !have && par.Default != nil {
			def = *par.Default
		}
		if !guided && !q.required {
			if def != "" || par.Default != nil {
				answers[q.param] = def
				continue
			}
		}
		// "-" clears an optional answer: to none, or for a number (where
		// none is no value) to the template's default, not written down.
		backToDefault := par.Type == "Number" && par.Default != nil && *par.Default != ""
		for {
			prompt := q.prompt
			switch {
			case !q.required && def != "" && par.validate(q.param, "") == nil:
				prompt += " (" + clearAnswer + " for none)"
			case backToDefault && def != *par.Default:
				prompt += " (" + clearAnswer + " for the template's " + *par.Default + ")"
			}
			v, err := p.ask(ctx, prompt, def)
			if err != nil {
				return fmt.Errorf("%s: %w", q.param, err)
			}
			if v == clearAnswer && backToDefault {
				delete(answers, q.param)
				break
			}
			if v == clearAnswer {
				v = ""
			}
			if v == "" && q.required {
				if !p.interactive {
					return fmt.Errorf("%s is required: run make deploy once interactively, or put it in the answers file", q.param)
				}
				fmt.Fprintln(p.out, "  required")
				continue
			}
			if err := par.validate(q.param, v); err != nil {
				if !p.interactive {
					return err
				}
				fmt.Fprintln(p.out, " ", err)
				continue
			}
			answers[q.param] = v
			if backToDefault && v == *par.Default {
				delete(answers, q.param) // the default follows the template
			}
			break
		}
	}
	// Answers no question asked (reservations, or put in the file by hand)
	// meet the same rules.
	for k, v := range answers {
		par, ok := params[k]
		if !ok {
			return fmt.Errorf("answers file: template.yaml has no parameter %s", k)
		}
		if err := par.validate(k, v); err != nil {
			return fmt.Errorf("answers file: %w", err)
		}
	}
	if answers["GatewayJwtAuthorizer"] == "true" && answers["GatewayRequiredScope"] == "" {
		return errors.New("GatewayJwtAuthorizer=true needs GatewayRequiredScope (run with -guided)")
	}
	return nil
}

// clearAnswer, typed at a question, empties an optional answer (an empty
// line keeps the one shown).
const clearAnswer = "-"

// prompter asks one question on in/out; not interactive (-yes) it answers
// every question with its default.
type prompter struct {
	in          *bufio.Reader
	out         io.Writer
	interactive bool
}

// ask waits for one line, or for ctx to end: Ctrl-C is caught for the
// whole run (sam needs it to clean up), so a question blocked in a read
// would swallow it. The line is read only while a question waits, never
// ahead: sam's own confirmation reads the same stdin later.
func (p prompter) ask(ctx context.Context, prompt, def string) (string, error) {
	if !p.interactive {
		return def, nil
	}
	fmt.Fprintf(p.out, "%s [%s]: ", prompt, def)
	type answer struct {
		line string
		err  error
	}
	read := make(chan answer, 1)
	go func() {
		line, err := p.in.ReadString('\n')
		read <- answer{line, err}
	}()
	var a answer
	select {
	case <-ctx.Done():
		fmt.Fprintln(p.out)
		return "", fmt.Errorf("no answer: %w", ctx.Err())
	case a = <-read:
	}
	if a.err != nil && (a.err != io.EOF || a.line == "") {
		return "", fmt.Errorf("no answer on stdin: %w", a.err)
	}
	if v := strings.TrimSpace(a.line); v != "" {
		return v, nil
	}
	return def, nil
}

func (p prompter) confirm(ctx context.Context, prompt string) (bool, error) {
	if !p.interactive {
		return false, nil
	}
	v, err := p.ask(ctx, prompt+" (yes/no)", "no")
	return v == "yes" || v == "y", err
}

func loadAnswers(path string) (map[string]string, error) {
	answers := map[string]string{}
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return answers, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read answers: %w", err)
	}
	if err := json.Unmarshal(raw, &answers); err != nil {
		return nil, fmt.Errorf("answers file %s: %w", path, err)
	}
	return answers, nil
}

func saveAnswers(path string, answers map[string]string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("save answers: %w", err)
	}
	raw, err := json.MarshalIndent(answers, "", "  ")
	if err != nil {
		return fmt.Errorf("save answers: %w", err)
	}
	if err := os.WriteFile(path, append(raw, '\n'), 0o600); err != nil {
		return fmt.Errorf("save answers: %w", err)
	}
	return nil
}

// withDefaults is every parameter a deploy passes: the answers, and the
// template default of every other parameter that has one. On an update
// sam deploy keeps the previous value of a parameter it is not given, so
// a value set once by other means (samconfig.toml, a console update, the
// first deploy's AllAtOnce) would otherwise outlive every later deploy:
// what is deployed is the template and the answers, nothing older.
func withDefaults(params map[string]parameter, answers map[string]string) map[string]string {
	out := make(map[string]string, len(params))
	for k, p := range params {
		if p.Default != nil {
			out[k] = *p.Default
		}
	}
	for k, v := range answers {
		out[k] = v
	}
	return out
}

// parameterOverrides renders answers for sam deploy, sorted so the command
// line is stable. Every answer is passed, quoted (sam's parser cuts an
// unquoted value at a space), empty ones too: on an update sam deploy
// keeps the previous value of a parameter it is not given, so leaving out
// an answer just cleared would keep what it cleared.
func parameterOverrides(answers map[string]string) []string {
	out := make([]string, 0, len(answers))
	for _, k := range slices.Sorted(maps.Keys(answers)) {
		out = append(out, k+`="`+answers[k]+`"`)
	}
	return out
}

// deployCommand deploys the built template with params, each function's
// revision (functionRevisions) in place of any answer for it.
func deployCommand(sam, samConfig string, o options, params, revisions map[string]string) []string {
	params = maps.Clone(params)
	maps.Copy(params, revisions)
	overrides := parameterOverrides(params)
	cmd := []string{sam, "deploy", "--config-file", samConfig, "--template-file", filepath.Join(o.buildDir, "template.yaml"),
		"--stack-name", o.stack, "--region", o.region,
		"--capabilities", "CAPABILITY_IAM", "--resolve-s3", "--s3-prefix", o.stack,
		// A failed first create deletes the stack rather than leave it in
		// ROLLBACK_COMPLETE, which refuses every later deploy; a failed
		// update rolls back as always.
		"--on-failure", "DELETE",
		"--no-fail-on-empty-changeset", "--tags", "app=intentgate stage=" + params["Stage"]}
	if o.yes {
		cmd = append(cmd, "--no-confirm-changeset")
	} else {
		cmd = append(cmd, "--confirm-changeset")
	}
	cmd = append(cmd, "--parameter-overrides")
	return append(cmd, overrides...)
}
