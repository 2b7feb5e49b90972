package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kcedar/kcedar/internal/cedarlang"
)

// rbac convert counts the warnings on Kubernetes' bootstrap roles in one
// line (-v lists them) and lists those on the user's own roles.
func TestRBACConvertBootstrapWarnings(t *testing.T) {
	const fixtures = "../../internal/tools/rbacconvert/testdata/"
	for name, tc := range map[string]struct {
		o                      rbacConvertOptions
		user, bootstrap, notes int
	}{
		"stock":   {o: rbacConvertOptions{files: []string{fixtures + "bootstrap"}}, bootstrap: 0, notes: 1},
		"verbose": {o: rbacConvertOptions{files: []string{fixtures + "bootstrap"}, verbose: true}, bootstrap: 22, notes: 1},
		"skip":    {o: rbacConvertOptions{files: []string{fixtures + "bootstrap"}, noBoot: true}},
		"mixed":   {o: rbacConvertOptions{files: []string{fixtures + "bootstrap", fixtures + "features.yaml"}}, user: -1, notes: 1},
	} {
		t.Run(name, func(t *testing.T) {
			o := tc.o
			o.out = filepath.Join(t.TempDir(), "rbac.cedar")
			var stderr bytes.Buffer
			if err := o.Run(context.Background(), &bytes.Buffer{}, &stderr); err != nil {
				t.Fatal(err)
			}
			text := stderr.String()
			user := strings.Count(text, "warning: ")
			if tc.user >= 0 && user != tc.user || tc.user < 0 && user == 0 {
				t.Errorf("%d warnings on the user's roles:\n%s", user, text)
			}
			if n := strings.Count(text, "warning (bootstrap role): "); n != tc.bootstrap {
				t.Errorf("%d bootstrap warnings listed, want %d:\n%s", n, tc.bootstrap, text)
			}
			if n := strings.Count(text, "note: 22 warnings on Kubernetes' bootstrap roles"); n != tc.notes {
				t.Errorf("%d summary lines, want %d:\n%s", n, tc.notes, text)
			}
		})
	}
}

// The exploit of issue 42 through the command: a RoleBinding (as YAML)
// whose User subject's name holds a newline and a permit of everything,
// beside a subject named with a carriage return and U+2028. The output is
// the subjects' own permits only, and kcedar validate reads it so.
func TestRBACConvertHostileSubjects(t *testing.T) {
	dir := t.TempDir()
	in := writeFile(t, dir, "rbac.yaml", `apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: "viewers\n// /*", namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view-pods}
subjects:
- {kind: User, apiGroup: rbac.authorization.k8s.io, name: "x\n@id(\"ns-viewers\") permit (principal, action, resource);\n"}
- {kind: User, apiGroup: rbac.authorization.k8s.io, name: "y\r@id(\"cr\") permit (principal, action, resource);\u2028*/"}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: view-pods}
rules:
- {apiGroups: [""], resources: [pods], verbs: [get]}
`)
	out := filepath.Join(dir, "rbac.cedar")
	if text, code := run(t, newRBACConvertCmd(), "-f", in, "--file", out); code != 0 {
		t.Fatalf("rbac convert: %d %s", code, text)
	}
	if text, code := run(t, newValidateCmd(), out); code != 0 || !strings.Contains(text, "1 file, 2 policies") {
		t.Errorf("validate: %d %s", code, text)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := cedarlang.ParsePolicies("rbac.cedar", data)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if !strings.HasPrefix(p.ID, "rbac/RoleBinding/team-a/viewers\n") || !strings.Contains(string(p.Text()), `principal == k8s::User::"`) {
			t.Errorf("policy %q:\n%s", p.ID, p.Text())
		}
	}
	if strings.ContainsAny(string(data), "\r\u2028") {
		t.Errorf("a line break other than \\n in the output:\n%q", data)
	}
}
