package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// revisionSuffix: the template names each function's version with the
// parameter <Function>Revision (AutoPublishCodeSha256). Given a value, SAM
// names the version after it alone, so the value must change whenever the
// version would differ: the function's built code, its properties (and the
// Globals it takes), and the values of the parameters those use. Then new
// code, a template change or a new answer publishes a new version of each
// function it touches, and of no other; a deploy changing none publishes
// none.
const revisionSuffix = "Revision"

// notInVersion are function properties that configure how a version is
// deployed, not the version: a new deployment type or rollback alarm
// publishes nothing.
var notInVersion = map[string]bool{"DeploymentPreference": true, "AutoPublishCodeSha256": true}

// functionRevisions reads the template sam build wrote into buildDir and
// returns each function's revision parameter and value for a deploy with
// params. salt (empty unless -republish) makes every revision new.
func functionRevisions(buildDir string, declared map[string]parameter, params map[string]string, salt string) (map[string]string, error) {
	raw, err := os.ReadFile(filepath.Join(buildDir, "template.yaml"))
	if err != nil {
		return nil, fmt.Errorf("read the template sam build wrote: %w", err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil || len(doc.Content) != 1 {
		return nil, fmt.Errorf("parse the template sam build wrote: %v", err)
	}
	root := doc.Content[0]
	globals := without(mapping(mapping(root, "Globals"), "Function"), notInVersion)
	conditions := mapping(root, "Conditions")
	out := map[string]string{}
	for _, kv := range pairs(mapping(root, "Resources")) {
		id, res := kv[0].Value, kv[1]
		if t := mapping(res, "Type"); t == nil || t.Value != "AWS::Serverless::Function" {
			continue
		}
		name := id + revisionSuffix
		if _, ok := declared[name]; !ok {
			return nil, fmt.Errorf("template.yaml declares no parameter %s for %s: without it a change of parameter values alone would publish no version", name, id)
		}
		props := without(mapping(res, "Properties"), notInVersion)
		h := sha256.New()
		for _, part := range []struct {
			label string
			node  *yaml.Node
		}{{"globals", globals}, {"properties", props}} {
			b, err := yaml.Marshal(part.node)
			if err != nil {
				return nil, fmt.Errorf("%s: digest %s: %w", id, part.label, err)
			}
			fmt.Fprintf(h, "%s %d\n", part.label, len(b))
			h.Write(b)
		}
		code := mapping(props, "CodeUri")
		if code == nil || code.Kind != yaml.ScalarNode || code.Value == "" {
			return nil, fmt.Errorf("%s: the built template names no local CodeUri", id)
		}
		if err := digestTree(h, filepath.Join(buildDir, code.Value)); err != nil {
			return nil, fmt.Errorf("%s: %w", id, err)
		}
		used := map[string]bool{}
		collectReferences(globals, conditions, used, map[string]bool{})
		collectReferences(props, conditions, used, map[string]bool{})
		names := make([]string, 0, len(used))
		for n := range used {
			if _, ok := params[n]; ok && !strings.HasSuffix(n, revisionSuffix) {
				names = append(names, n)
			}
		}
		sort.Strings(names)
		for _, n := range names {
			fmt.Fprintf(h, "parameter %s=%q\n", n, params[n])
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

var subReference = regexp.MustCompile(`\$\{([^}!]+)\}`)

// collectReferences adds to used every name n refers to (Ref, the
// variables of Sub, the conditions of If and what those conditions refer
// to), in either the long (Ref:) or the short (!Ref) form.
func collectReferences(n *yaml.Node, conditions *yaml.Node, used, seenConditions map[string]bool) {
	if n == nil {
		return
	}
	condition := func(name string) {
		if seenConditions[name] {
			return
		}
		seenConditions[name] = true
		collectReferences(mapping(conditions, name), conditions, used, seenConditions)
	}
	fn, arg := n.Tag, n
	if n.Kind == yaml.MappingNode && len(n.Content) == 2 {
		if k := n.Content[0].Value; k == "Ref" || k == "Condition" || strings.HasPrefix(k, "Fn::") {
			fn, arg = k, n.Content[1]
		}
	}
	switch strings.TrimPrefix(strings.TrimPrefix(fn, "!"), "Fn::") {
	case "Ref":
		used[arg.Value] = true
	case "Condition":
		condition(arg.Value)
	case "If":
		if len(arg.Content) > 0 {
			condition(arg.Content[0].Value)
		}
	case "Sub":
		src := arg
		if arg.Kind == yaml.SequenceNode && len(arg.Content) > 0 {
			src = arg.Content[0]
		}
		for _, m := range subReference.FindAllStringSubmatch(src.Value, -1) {
			used[strings.SplitN(strings.TrimSpace(m[1]), ".", 2)[0]] = true
		}
	}
	for _, c := range n.Content {
		collectReferences(c, conditions, used, seenConditions)
	}
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
