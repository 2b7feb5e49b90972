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

// writePolicyObjects writes one policy object per subject, named names[i],
// as YAML documents, after the comment lines header: a
// NamespacedCedarPolicy in the namespace every policy of the subject is
// confined to (when it is a valid namespace name), else a CedarPolicy.
// Each document is read back and checked to hold the subject's text, name
// and namespace.
func writePolicyObjects(w io.Writer, subjects []generate.SubjectPolicies, names []string, header string) error {
	if header != "" {
		for _, l := range strings.Split(strings.TrimRight(header, "\n"), "\n") {
			fmt.Fprintf(w, "#%s\n", cedarlex.Visible(strings.TrimPrefix(l, "//")))
		}
	}
	for i, s := range subjects {
		meta := map[string]any{"name": names[i], "labels": map[string]string{"app.kubernetes.io/managed-by": "kcedar-generate"}}
		kind, ns := policyobjects.KindCluster, ""
		if s.Namespace != "" && len(validation.IsDNS1123Label(s.Namespace)) == 0 {
			kind, ns = policyobjects.KindNamespaced, s.Namespace
			meta["namespace"] = ns
		}
		obj := map[string]any{"apiVersion": policyobjects.GroupVersion.String(), "kind": kind, "metadata": meta,
			"spec": map[string]any{"content": string(s.Text)}}
		data, err := yaml.Marshal(obj)
		if err != nil {
			return err
		}
		var back packedObject
		if err := yaml.Unmarshal(data, &back); err != nil || back.Spec.Content != string(s.Text) || back.Name != names[i] ||
			back.Namespace != ns || back.Kind != kind {
			return fmt.Errorf("policy object %s does not read back as written (a bug in kcedar generate; %v)", names[i], err)
		}
		if i > 0 || header != "" {
			fmt.Fprintln(w, "---")
		}
		if _, err := w.Write(data); err != nil {
			return err
		}
	}
	return nil
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
