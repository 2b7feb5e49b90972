package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/kcedar/kcedar/internal/tools/generate"
)

// writePolicyObjects writes one policy object per subject, as YAML
// documents, after the comment lines header: a NamespacedCedarPolicy in
// the namespace every policy of the subject is confined to, else a
// CedarPolicy.
func writePolicyObjects(w io.Writer, subjects []generate.SubjectPolicies, header string) error {
	if header != "" {
		for _, l := range strings.Split(strings.TrimRight(header, "\n"), "\n") {
			fmt.Fprintf(w, "#%s\n", strings.TrimPrefix(l, "//"))
		}
	}
	for i, s := range subjects {
		meta := map[string]any{
			"name":   generatedObjectName(s.Slug),
			"labels": map[string]string{"app.kubernetes.io/managed-by": "kcedar-generate"},
		}
		kind := "CedarPolicy"
		if s.Namespace != "" {
			kind, meta["namespace"] = "NamespacedCedarPolicy", s.Namespace
		}
		obj := map[string]any{"apiVersion": "kcedar.dev/v1alpha1", "kind": kind, "metadata": meta,
			"spec": map[string]any{"content": string(s.Text)}}
		data, err := yaml.Marshal(obj)
		if err != nil {
			return err
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
