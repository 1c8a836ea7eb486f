package app

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// lambdaEnvLimit is Lambda's limit on a function's environment variables,
// keys and values together: "The total size of all environment variables
// doesn't exceed 4 KB". A create or update over it fails, and rolls back.
// What Lambda measures is the variables as one JSON object: its refusal
// quotes the "String measured", {"NAME":"value",...}, so the braces, the
// quotes, the colons and the commas count too (jsonEnvSize).
const lambdaEnvLimit = 4096

// jsonEnvSize is the size of a JSON object of vars variables whose names
// and values are chars long in all: {"k":"v","k":"v"} adds 2 for the
// braces and, per variable, 4 quotes and a colon, and a comma between two.
func jsonEnvSize(vars, chars int) int {
	if vars == 0 {
		return 2
	}
	return 2 + chars + 5*vars + (vars - 1)
}

// Bounds of what CloudFormation substitutes that a parameter does not say:
// a stack name is at most 128 characters; a physical name or ARN of the
// resources the environment names is taken at 256.
var pseudoParameterBounds = map[string]int{
	"AWS::StackName": 128, "AWS::Region": 25, "AWS::AccountId": 12, "AWS::Partition": 10, "AWS::URLSuffix": 20,
}

const resourceNameBound = 256

// TestTemplateEveryFunctionsEnvironmentFitsLambdasLimitWhateverTheAnswers:
// every parameter that reaches a function's environment is bounded (its
// MaxLength, its longest allowed value, or a number), and with each at its
// bound the environment, encoded as Lambda measures it (jsonEnvSize),
// still fits Lambda's 4 KB, so no answer to make deploy can make the
// create or an update fail on it.
func TestTemplateEveryFunctionsEnvironmentFitsLambdasLimitWhateverTheAnswers(t *testing.T) {
	tpl := loadTemplate(t)
	for _, fn := range tpl.functions(t) {
		chars := 0
		for name, node := range fn.env {
			n, err := tpl.envBound(node)
			require.NoError(t, err, "%s %s", fn.id, name)
			chars += len(name) + n
		}
		total := jsonEnvSize(len(fn.env), chars)
		t.Logf("%s: environment at most %d bytes of %d", fn.id, total, lambdaEnvLimit)
		assert.LessOrEqual(t, total, lambdaEnvLimit, "%s: the environment may exceed Lambda's limit", fn.id)
	}
}

// envBound is the longest string n can resolve to.
func (tpl samTemplate) envBound(n *yamlNode) (int, error) {
	switch name, arg := intrinsic(n); name {
	case "":
		if n.Kind != yaml.ScalarNode {
			return 0, fmt.Errorf("a %v node in an environment variable", n.Kind)
		}
		return len(n.Value), nil
	case "Ref":
		return tpl.refBound(arg.Value)
	case "Fn::If":
		if len(arg.Content) != 3 {
			return 0, fmt.Errorf("Fn::If wants [condition, then, else], got %d items", len(arg.Content))
		}
		a, err := tpl.envBound((*yamlNode)(arg.Content[1]))
		if err != nil {
			return 0, err
		}
		b, err := tpl.envBound((*yamlNode)(arg.Content[2]))
		return max(a, b), err
	case "Fn::Sub":
		if arg.Kind != yaml.ScalarNode {
			return 0, fmt.Errorf("Fn::Sub with a variable map is not supported by this test")
		}
		total := len(subVariable.ReplaceAllString(arg.Value, ""))
		for _, m := range subVariable.FindAllStringSubmatch(arg.Value, -1) {
			if strings.Contains(m[1], ".") { // ${Resource.Attribute}
				total += resourceNameBound
				continue
			}
			b, err := tpl.refBound(m[1])
			if err != nil {
				return 0, err
			}
			total += b
		}
		return total, nil
	case "Fn::GetAtt":
		return resourceNameBound, nil
	default:
		return 0, fmt.Errorf("%s is not supported by this test's bound", name)
	}
}

func (tpl samTemplate) refBound(name string) (int, error) {
	if b, ok := pseudoParameterBounds[name]; ok {
		return b, nil
	}
	if name == "AWS::NoValue" {
		return 0, nil
	}
	if r := tpl.root.get("Resources", name); r != nil {
		// A table's Ref is its name: the one the template gives it, if any.
		if named := r.get("Properties", "TableName"); named != nil && r.get("Type").Value == "AWS::DynamoDB::Table" {
			return tpl.envBound(named)
		}
		return resourceNameBound, nil
	}
	p := tpl.root.get("Parameters", name)
	if p == nil {
		return 0, fmt.Errorf("Ref %s: no such parameter or resource", name)
	}
	if allowed := p.get("AllowedValues"); allowed != nil {
		longest := 0
		for _, a := range allowed.Content {
			longest = max(longest, len(a.Value))
		}
		return longest, nil
	}
	if p.get("Type").Value == "Number" {
		if m := p.get("MaxValue"); m != nil {
			return len(m.Value), nil
		}
		return 20, nil
	}
	m := p.get("MaxLength")
	if m == nil {
		return 0, fmt.Errorf("parameter %s reaches a function's environment without a MaxLength", name)
	}
	return strconv.Atoi(m.Value)
}

// What Lambda measures, as its refusal quotes it.
func TestJSONEnvSizeIsTheLengthOfTheVariablesAsOneJSONObject(t *testing.T) {
	assert.Equal(t, len(`{}`), jsonEnvSize(0, 0))
	assert.Equal(t, len(`{"A":"b"}`), jsonEnvSize(1, 2))
	assert.Equal(t, len(`{"A":"b","CD":"ef"}`), jsonEnvSize(2, 6))
}
