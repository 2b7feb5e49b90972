package diff

import (
	"testing"
	"time"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/testing/embeddedschema"
	"github.com/kcedar/kcedar/internal/testing/policytest"
	"github.com/kcedar/kcedar/internal/testing/testgen"
	"github.com/kcedar/kcedar/internal/tools/generate"
	"github.com/kcedar/kcedar/internal/tools/rbacconvert"
)

// rbacAgainstGenerated is the pair an operator diffs before leaving RBAC:
// the RBAC of a real project (Kubernetes' own bootstrap roles and
// bindings, rbacconvert's real-world fixture), converted to Cedar; and the
// policies kcedar generate writes from a cluster's traffic (testgen's
// SubjectAccessReviews, a third of them forbidden), about a thousand.
func rbacAgainstGenerated(tb testing.TB) (s *schemagen.Schema, rbac, generated *cedarlang.PolicySet) {
	tb.Helper()
	s = embeddedschema.Schema(tb)
	in := &rbacconvert.Input{}
	if err := in.ReadPaths([]string{"../rbacconvert/testdata/bootstrap"}); err != nil {
		tb.Fatal(err)
	}
	conv, err := rbacconvert.Convert(s, in)
	if err != nil {
		tb.Fatal(err)
	}
	if rbac, err = cedarlang.NewPolicySet(conv.Parsed); err != nil {
		tb.Fatal(err)
	}
	g := generate.New(s, generate.Options{})
	var batch []generate.Input
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for i, spec := range testgen.SubjectAccessReviews(20261129, generatedFrom) {
		req, err := entities.RequestFromSAR(&spec)
		if err != nil {
			tb.Fatal(err)
		}
		batch = append(batch, generate.Input{Request: req, Allowed: i%3 != 0, Time: at.Add(time.Duration(i) * time.Second)})
	}
	g.Add(batch)
	res, err := g.Policies()
	if err != nil {
		tb.Fatal(err)
	}
	return s, rbac, policytest.Set(tb, string(res.Text))
}

// generatedFrom is the number of logged requests the generated policies
// come from.
const generatedFrom = 2500

// BenchmarkDiffRBACAgainstGenerated times kcedar diff of a converted RBAC
// against the policies generated from its traffic (rbacAgainstGenerated),
// each direction: go test ./internal/tools/diff -run '^$' -bench RBACAgainstGenerated -benchtime 1x
func BenchmarkDiffRBACAgainstGenerated(b *testing.B) {
	s, rbac, generated := rbacAgainstGenerated(b)
	var res *Result
	for b.Loop() {
		res = Compare(s, rbac, generated)
		if len(res.Regions) == 0 || len(res.Inexact) > 0 {
			b.Fatalf("%d regions, not decided exactly: %v", len(res.Regions), res.Inexact)
		}
	}
	b.ReportMetric(float64(rbac.Len()), "rbac-policies")
	b.ReportMetric(float64(generated.Len()), "generated-policies")
	b.ReportMetric(float64(len(res.Regions)), "regions")
	b.ReportMetric(float64(res.Decided), "decided")
}
