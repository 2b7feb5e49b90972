package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
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
