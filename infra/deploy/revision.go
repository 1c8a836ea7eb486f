package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// revisionSuffix: the template names each function's version with the
// parameter <Function>Revision (AutoPublishCodeSha256). Given a value, SAM
// names the version after it alone, so the value must change whenever the
// version would differ: the function's built code, its properties (and the
// Globals it takes), what those refer to (the conditions they use, the
// definitions of the resources they name) and the values of the parameters
// they use. Then new code, a template change or a new answer publishes a
// new version of each function it touches, and of no other; a deploy
// changing none publishes none.
const revisionSuffix = "Revision"

// notInVersion are function properties that are not part of a version:
// how it is deployed (traffic shifting, rollback alarms), what invokes it
// (event sources, the alias's async settings), the function's reserved
// concurrency and tags. A new deployment type, schedule or reservation
// publishes nothing.
var notInVersion = map[string]bool{
	"DeploymentPreference": true, "AutoPublishCodeSha256": true,
	"Events": true, "EventInvokeConfig": true, "ProvisionedConcurrencyConfig": true,
	"ReservedConcurrentExecutions": true, "Tags": true,
}

// functionRevisions reads the template sam build wrote into buildDir and
// returns each function's revision parameter and value for a deploy with
// params. salt (empty unless -republish) makes every revision new.
func functionRevisions(buildDir string, declared map[string]parameter, params map[string]string, salt string) (map[string]string, error) {
	raw, err := os.ReadFile(filepath.Join(buildDir, "template.yaml"))
	if err != nil {
		return nil, fmt.Errorf("read the template sam build wrote: %w", err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("parse the template sam build wrote: %w", err)
	}
	if len(doc.Content) != 1 {
		return nil, fmt.Errorf("the template sam build wrote is not one YAML document")
	}
	root := doc.Content[0]
	globals := without(mapping(mapping(root, "Globals"), "Function"), notInVersion)
	conditions := mapping(root, "Conditions")
	resources := mapping(root, "Resources")
	out := map[string]string{}
	for _, kv := range pairs(resources) {
		id, res := kv[0].Value, kv[1]
		if t := mapping(res, "Type"); t == nil || t.Value != "AWS::Serverless::Function" {
			continue
		}
		if mapping(mapping(res, "Properties"), "DeploymentPreference") == nil {
			// No alias routes to its versions (a CodeDeploy hook is invoked
			// by name): which version a deploy publishes serves nothing.
			continue
		}
		name := id + revisionSuffix
		if _, ok := declared[name]; !ok {
			return nil, fmt.Errorf("template.yaml declares no parameter %s for %s: without it a change of parameter values alone would publish no version", name, id)
		}
		props := without(mapping(res, "Properties"), notInVersion)
		h := sha256.New()
		if err := digestNode(h, "globals", globals); err != nil {
			return nil, fmt.Errorf("%s: %w", id, err)
		}
		if err := digestNode(h, "properties", props); err != nil {
			return nil, fmt.Errorf("%s: %w", id, err)
		}
		code := mapping(props, "CodeUri")
		if code == nil || code.Kind != yaml.ScalarNode || code.Value == "" {
			return nil, fmt.Errorf("%s: the built template names no local CodeUri", id)
		}
		if err := digestTree(h, filepath.Join(buildDir, code.Value)); err != nil {
			return nil, fmt.Errorf("%s: %w", id, err)
		}
		refs := references{names: map[string]bool{}, conditions: map[string]bool{}}
		for _, n := range []*yaml.Node{globals, props} {
			if err := refs.collect(n, conditions); err != nil {
				return nil, fmt.Errorf("%s: %w", id, err)
			}
		}
		// The conditions it uses, as written: an edited condition changes
		// what CloudFormation sets on the function.
		for _, c := range slices.Sorted(maps.Keys(refs.conditions)) {
			if err := digestNode(h, "condition "+c, mapping(conditions, c)); err != nil {
				return nil, fmt.Errorf("%s: %w", id, err)
			}
		}
		for _, n := range slices.Sorted(maps.Keys(refs.names)) {
			if v, ok := params[n]; ok && !strings.HasSuffix(n, revisionSuffix) {
				fmt.Fprintf(h, "parameter %s=%q\n", n, v)
				continue
			}
			// A resource it names (its role, log group, table), as
			// written: a definition that replaces the resource gives it a
			// new ARN or name, which a version keeps (an old version would
			// run with a deleted role). Not followed further: a parameter
			// the resource uses does not reach the function.
			if r := mapping(resources, n); r != nil && n != id {
				if err := digestNode(h, "resource "+n, r); err != nil {
					return nil, fmt.Errorf("%s: %w", id, err)
				}
			}
		}
		fmt.Fprintf(h, "salt %q\n", salt)
		out[name] = hex.EncodeToString(h.Sum(nil))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("the template sam build wrote has no AWS::Serverless::Function")
	}
	return out, nil
}

// digestTree writes every regular file under dir (its path and content,
// in path order) into h: what sam deploy will upload for the function.
func digestTree(h io.Writer, dir string) error {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read what sam build produced: %w", err)
	}
	if len(files) == 0 {
		return fmt.Errorf("sam build produced nothing in %s", dir)
	}
	sort.Strings(files)
	for _, p := range files {
		raw, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("read what sam build produced: %w", err)
		}
		rel, _ := filepath.Rel(dir, p)
		fmt.Fprintf(h, "file %s %d\n", filepath.ToSlash(rel), len(raw))
		h.Write(raw)
	}
	return nil
}

// digestNode writes n, as YAML, into h under label.
func digestNode(h io.Writer, label string, n *yaml.Node) error {
	b, err := yaml.Marshal(n)
	if err != nil {
		return fmt.Errorf("digest %s: %w", label, err)
	}
	fmt.Fprintf(h, "%s %d\n", label, len(b))
	_, err = h.Write(b)
	return err
}

var subReference = regexp.MustCompile(`\$\{([^}!]+)\}`)

// references are what a function's properties refer to: names (parameters,
// resources, pseudo parameters) and conditions.
type references struct{ names, conditions map[string]bool }

// collect adds what n refers to (Ref, GetAtt, the variables of Sub, the
// conditions of If and what those refer to), in either the long (Ref:) or
// the short (!Ref) form. A value the template cannot show (a mapping, an
// export of another stack, a dynamic reference) is refused: a revision
// could not follow it.
func (r references) collect(n *yaml.Node, conditions *yaml.Node) error {
	if n == nil {
		return nil
	}
	if n.Kind == yaml.ScalarNode && strings.Contains(n.Value, "{{resolve:") {
		return fmt.Errorf("a dynamic reference (%s) in a function's properties: a revision can not follow its value", n.Value)
	}
	fn, arg := n.Tag, n
	if n.Kind == yaml.MappingNode && len(n.Content) == 2 {
		if k := n.Content[0].Value; k == "Ref" || k == "Condition" || strings.HasPrefix(k, "Fn::") {
			fn, arg = k, n.Content[1]
		}
	}
	switch strings.TrimPrefix(strings.TrimPrefix(fn, "!"), "Fn::") {
	case "Ref":
		r.names[arg.Value] = true
	case "GetAtt":
		if arg.Kind == yaml.ScalarNode {
			r.names[strings.SplitN(arg.Value, ".", 2)[0]] = true
		} else if len(arg.Content) > 0 {
			r.names[arg.Content[0].Value] = true
		}
	case "Condition":
		if err := r.condition(arg.Value, conditions); err != nil {
			return err
		}
	case "If":
		if len(arg.Content) > 0 {
			if err := r.condition(arg.Content[0].Value, conditions); err != nil {
				return err
			}
		}
	case "Sub":
		src := arg
		if arg.Kind == yaml.SequenceNode && len(arg.Content) > 0 {
			src = arg.Content[0]
		}
		for _, m := range subReference.FindAllStringSubmatch(src.Value, -1) {
			r.names[strings.SplitN(strings.TrimSpace(m[1]), ".", 2)[0]] = true
		}
	case "FindInMap", "ImportValue":
		return fmt.Errorf("Fn::%s in a function's properties: a revision can not follow its value", strings.TrimPrefix(strings.TrimPrefix(fn, "!"), "Fn::"))
	}
	for _, c := range n.Content {
		if err := r.collect(c, conditions); err != nil {
			return err
		}
	}
	return nil
}

func (r references) condition(name string, conditions *yaml.Node) error {
	if r.conditions[name] {
		return nil
	}
	r.conditions[name] = true
	return r.collect(mapping(conditions, name), conditions)
}

// mapping is the value under key in a mapping node; nil if there is none.
func mapping(n *yaml.Node, key string) *yaml.Node {
	for _, kv := range pairs(n) {
		if kv[0].Value == key {
			return kv[1]
		}
	}
	return nil
}

func pairs(n *yaml.Node) [][2]*yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	out := make([][2]*yaml.Node, 0, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		out = append(out, [2]*yaml.Node{n.Content[i], n.Content[i+1]})
	}
	return out
}

// without is a copy of mapping n without the given keys.
func without(n *yaml.Node, drop map[string]bool) *yaml.Node {
	if n == nil {
		return nil
	}
	cp := *n
	cp.Content = nil
	for _, kv := range pairs(n) {
		if !drop[kv[0].Value] {
			cp.Content = append(cp.Content, kv[0], kv[1])
		}
	}
	return &cp
}
