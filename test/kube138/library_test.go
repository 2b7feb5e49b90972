package kube138

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"

	"github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/tools/offline"
)

// libraryTestFiles are the decision test files the tests replay: the
// policy library's (policies/library, kep5681 first) and this module's
// testdata/kep, the KEP draft's examples written against kcedar's schema.
func libraryTestFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repoRoot, "policies/library/*/*_test.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no library test files: %v", err)
	}
	slices.SortStableFunc(files, func(a, b string) int {
		first := func(f string) bool { return filepath.Base(filepath.Dir(f)) == "kep5681" }
		switch {
		case first(a) && !first(b):
			return -1
		case first(b) && !first(a):
			return 1
		}
		return strings.Compare(a, b)
	})
	kep, err := filepath.Glob("testdata/kep/*_test.yaml")
	if err != nil || len(kep) == 0 {
		t.Fatalf("no testdata/kep test files: %v", err)
	}
	return append(files, kep...)
}

// TestLibrary replays every case of the decision test files through
// kube-apiserver 1.38's code against `kcedar serve` on the file's policies:
// each must decide as `kcedar authorize` does, as the file expects, and
// every answer must pass upstream's validation (harness.check).
func TestLibrary(t *testing.T) {
	enableConditionalAuthorization(t)
	for _, file := range libraryTestFiles(t) {
		name := filepath.Base(filepath.Dir(file)) + "/" + filepath.Base(file)
		t.Run(name, func(t *testing.T) { replayTestFile(t, file) })
	}
}

func replayTestFile(t *testing.T, file string) {
	tf, paths := readTestFile(t, file)
	replayCases(t, newHarness(t, paths, "--bypass-control-plane=false"), file, tf)
}

// readTestFile parses a decision test file and resolves its policy paths.
func readTestFile(t *testing.T, file string) (*offline.TestFile, []string) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	tf, err := offline.ParseTestFile(data)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	paths, err := tf.PolicyPaths(file)
	if err != nil {
		t.Fatal(err)
	}
	return tf, paths
}

// replayCases checks every case of tf through h.
func replayCases(t *testing.T, h *harness, file string, tf *offline.TestFile) {
	t.Helper()
	ctx := context.Background()
	var failures, unexpected int
	for _, tc := range tf.Tests {
		c, err := libraryCase(h.oracle.schema, tf, tc)
		if err != nil {
			t.Errorf("%s: %s: %v", file, tc.Name, err)
			continue
		}
		if c.expect == nil {
			unexpected++
		}
		reportProblems(t, &failures, c, h.check(ctx, c))
	}
	summarize(t, failures, len(tf.Tests), h)
	if unexpected > 0 {
		t.Logf("%d cases depend on Namespace objects, which kcedar serve cannot know without a cluster: compared with kcedar authorize without them, not with the file", unexpected)
	}
}

// libraryCase is the request of a test case: its review (a request resolved
// as `kcedar test` resolves it, or the review given), its admission data,
// and the file's expectations unless they need Namespace objects.
func libraryCase(s *schemagen.Schema, tf *offline.TestFile, tc offline.TestCase) (requestCase, error) {
	c := requestCase{name: tc.Name}
	if tc.SAR != nil {
		c.spec = tc.SAR.Spec.SubjectAccessReviewSpec
	} else {
		r := *tc.Request
		if !r.Raw {
			if _, err := r.Resolve(s); err != nil {
				return c, err
			}
		}
		c.spec = *r.SAR()
	}
	if len(tc.Object) > 0 || len(tc.OldObject) > 0 || tc.Operation != "" {
		op := tc.Operation
		if op == "" && c.spec.ResourceAttributes != nil {
			op = offline.DefaultOperation(c.spec.ResourceAttributes.Verb, c.spec.ResourceAttributes.Subresource)
		}
		c.admission = &admissionData{operation: admission.Operation(op)}
		for _, o := range []struct {
			raw  json.RawMessage
			into *runtime.Object
		}{{tc.Object, &c.admission.object}, {tc.OldObject, &c.admission.oldObject}} {
			if raw := bytes.TrimSpace(o.raw); len(raw) > 0 && string(raw) != "null" {
				obj, err := decodeObject(raw)
				if err != nil {
					return c, fmt.Errorf("object: %w", err)
				}
				*o.into = obj
			}
		}
	}
	if len(tf.Namespaces) == 0 && len(tc.NamespaceObject) == 0 {
		c.expect = &tc
	}
	return c, nil
}

// reportProblems reports a case's problems (the first ten failing cases of
// a test in full), counting the case in failures if it has any.
func reportProblems(t *testing.T, failures *int, c requestCase, problems []string) {
	t.Helper()
	if len(problems) == 0 {
		return
	}
	*failures++
	if *failures > 10 {
		return
	}
	spec, _ := json.Marshal(c.spec)
	adm := "none"
	if a := c.admission; a != nil {
		obj, _ := json.Marshal(a.object)
		old, _ := json.Marshal(a.oldObject)
		adm = fmt.Sprintf("%s object=%s oldObject=%s", a.operation, obj, old)
	}
	t.Errorf("case %q:\n  review spec: %s\n  admission: %s\n  %s", c.name, spec, adm, strings.Join(problems, "\n  "))
}

// summarize reports the count of failing cases past the ten shown and logs
// what the cases reached.
func summarize(t *testing.T, failures, cases int, h *harness) {
	t.Helper()
	if failures > 10 {
		t.Errorf("%d of %d cases failed (the first 10 shown)", failures, cases)
	}
	t.Logf("%d cases: %v; reviews on the wire %d (%d conditional), callbacks %d", cases, h.stats, h.counts.reviews, h.counts.conditionalReviews, h.counts.callbacks)
	for _, e := range h.errors {
		t.Logf("answered 500 (an authorizer error with a decision other than Allow): %s", e)
	}
}
