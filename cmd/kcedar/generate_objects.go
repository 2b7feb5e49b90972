package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/kcedar/kcedar/internal/cluster/policyobjects"
	"github.com/kcedar/kcedar/internal/lib/cedarlex"
	"github.com/kcedar/kcedar/internal/tools/generate"
)

// writePolicyObjects writes the policy objects of each subject, named
// names[i], as YAML documents, after the comment lines header: per part
// of the subject's policies, a NamespacedCedarPolicy in the namespace that
// bounds them, and a CedarPolicy for those no namespace bounds. Each
// document is read back and checked to hold the part's text, name and
// namespace.
func writePolicyObjects(w io.Writer, subjects []generate.SubjectPolicies, names []string, header string) error {
	if header != "" {
		for _, l := range strings.Split(strings.TrimRight(header, "\n"), "\n") {
			fmt.Fprintf(w, "#%s\n", cedarlex.Visible(strings.TrimPrefix(l, "//")))
		}
	}
	first := header == ""
	for i, s := range subjects {
		for _, part := range s.Parts {
			data, err := policyObject(names[i], part)
			if err != nil {
				return err
			}
			if !first {
				fmt.Fprintln(w, "---")
			}
			first = false
			if _, err := w.Write(data); err != nil {
				return err
			}
		}
	}
	return nil
}

// policyObject is the YAML of one part's policy object named name: a
// NamespacedCedarPolicy in the part's namespace, or a CedarPolicy for the
// part of no namespace. It is read back and checked.
func policyObject(name string, part generate.Part) ([]byte, error) {
	meta := map[string]any{"name": name, "labels": map[string]string{"app.kubernetes.io/managed-by": "kcedar-generate"}}
	kind := policyobjects.KindCluster
	if part.Namespace != "" {
		if errs := validation.IsDNS1123Label(part.Namespace); len(errs) > 0 {
			return nil, fmt.Errorf("policy object %s: namespace %s: %s (a bug in kcedar generate)", name, cedarlex.Shorten(part.Namespace), errs[0])
		}
		kind = policyobjects.KindNamespaced
		meta["namespace"] = part.Namespace
	}
	obj := map[string]any{"apiVersion": policyobjects.GroupVersion.String(), "kind": kind, "metadata": meta,
		"spec": map[string]any{"content": string(part.Text)}}
	data, err := yaml.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var back packedObject
	if err := yaml.Unmarshal(data, &back); err != nil || back.Spec.Content != string(part.Text) || back.Name != name ||
		back.Namespace != part.Namespace || back.Kind != kind {
		return nil, fmt.Errorf("policy object %s does not read back as written (a bug in kcedar generate; %v)", name, err)
	}
	return data, nil
}

// generatedObjectNames are the subjects' object (and file) names:
// generatedObjectName of each slug, and -2, -3, ... after a name another
// subject has (a username can be another's slug with its hash).
func generatedObjectNames(subjects []generate.SubjectPolicies) []string {
	names := make([]string, len(subjects))
	used := map[string]bool{}
	for i, s := range subjects {
		name := generatedObjectName(s.Slug)
		for n := 2; used[name]; n++ {
			name = generatedObjectName(s.Slug) + "-" + strconv.Itoa(n)
		}
		names[i], used[name] = name, true
	}
	return names
}

// generatedObjectName is a CedarPolicy name for a subject slug: generated-<slug>
// in lower case with every other character a dash, and a short hash of the
// slug when that changed it (two subjects never share a name).
func generatedObjectName(slug string) string {
	name := "generated-" + fileSlug(slug)
	if "generated-"+slug != name || len(name) > 200 {
		sum := sha256.Sum256([]byte(slug))
		name = strings.TrimRight(name[:min(len(name), 200)], "-.") + "-" + hex.EncodeToString(sum[:4])
	}
	return name
}

// fileSlug is a slug usable as a file or object name: lower-case letters,
// digits, dots and dashes.
func fileSlug(slug string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(slug) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '.', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	return strings.Trim(b.String(), "-.")
}
