package policies_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/kcedar/kcedar/internal/cedarlang/lint"
	"github.com/kcedar/kcedar/internal/testing/embeddedschema"
	"github.com/kcedar/kcedar/internal/tools/offline"
)

// The policy library (policies/library) and the quickstart: every policy
// file validates clean (lint warnings included), and every decision test
// file (*_test.yaml, as `kcedar test policies/` runs them) passes.
func TestLibrary(t *testing.T) {
	s := embeddedschema.Schema(t)
	c, err := lint.NewChecker(s)
	if err != nil {
		t.Fatal(err)
	}
	files, err := lint.ReadPaths([]string{"library", "quickstart"})
	if err != nil {
		t.Fatal(err)
	}
	res := c.Check(files)
	for _, d := range res.Diagnostics {
		t.Errorf("%s", d)
	}
	if len(res.Policies) < 20 {
		t.Errorf("only %d example policies", len(res.Policies))
	}
	tests, err := offline.FindTestFiles([]string{"library"})
	if err != nil {
		t.Fatal(err)
	}
	if len(tests) < 5 {
		t.Fatalf("only %d decision test files", len(tests))
	}
	n := 0
	for _, f := range tests {
		results, err := offline.RunTestFile(f, c.Schema, c)
		var diags []lint.Diagnostic
		if inv := (*lint.InvalidPoliciesError)(nil); errors.As(err, &inv) {
			diags = inv.Diagnostics
		}
		if err != nil {
			var msgs []string
			for _, d := range diags {
				msgs = append(msgs, d.String())
			}
			t.Errorf("%s: %v\n%s", f, err, strings.Join(msgs, "\n"))
			continue
		}
		for _, r := range results {
			n++
			if !r.Passed {
				t.Errorf("%s: %s: %s", f, r.Name, strings.Join(r.Failures, "; "))
			}
		}
	}
	t.Logf("%d policies, %d decision tests in %d files", len(res.Policies), n, len(tests))
}
