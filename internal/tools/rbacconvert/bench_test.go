package rbacconvert

import (
	"context"
	"testing"

	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/testing/embeddedschema"
	"github.com/kcedar/kcedar/internal/testing/testgen"
)

// benchWorkload is the realistic RBAC workload: the bootstrap roles and
// bindings plus a generated configuration (50 roles, 100 bindings), converted,
// and generated SubjectAccessReviews.
func benchWorkload(b *testing.B) (*engine.Engine, []*entities.Request) {
	b.Helper()
	s := embeddedschema.Schema(b)
	in := readInput(b, "testdata/bootstrap")
	gen := testgen.RBACConfig(20261121, 50, 100)
	in.Roles = append(in.Roles, gen.Roles...)
	in.ClusterRoles = append(in.ClusterRoles, gen.ClusterRoles...)
	in.RoleBindings = append(in.RoleBindings, gen.RoleBindings...)
	in.ClusterRoleBindings = append(in.ClusterRoleBindings, gen.ClusterRoleBindings...)
	res, err := Convert(s, in)
	if err != nil {
		b.Fatal(err)
	}
	authz := compile(b, s, res)
	specs := testgen.SubjectAccessReviews(20261121, 4096)
	reqs := make([]*entities.Request, len(specs))
	for i := range specs {
		if reqs[i], err = entities.RequestFromSAR(&specs[i]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(authz.Policies().Len()), "policies")
	return authz, reqs
}

// BenchmarkAuthorizeConverted decides generated requests over the converted
// bootstrap + generated RBAC, without a cache (every decision computed):
// "all" is every generated request, "concrete" leaves out the ones with a "*"
// verb, group, resource or subresource (kube-apiserver never sends those for
// its own requests; each "*" verb is decided for all 19 verbs).
func BenchmarkAuthorizeConverted(b *testing.B) {
	authz, reqs := benchWorkload(b)
	var concrete []*entities.Request
	for _, r := range reqs {
		if r.Verb != "*" && r.APIGroup != "*" && r.Resource != "*" && r.Subresource != "*" {
			concrete = append(concrete, r)
		}
	}
	for _, bc := range []struct {
		name string
		reqs []*entities.Request
	}{{"all", reqs}, {"concrete", concrete}} {
		b.Run(bc.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				authz.Authorize(context.Background(), bc.reqs[i%len(bc.reqs)]).FailureDecision()
			}
		})
	}
}

// BenchmarkAuthorizeConvertedCached is the same with the server's outcome
// cache (as kcedar serve runs it).
func BenchmarkAuthorizeConvertedCached(b *testing.B) {
	authz, reqs := benchWorkload(b)
	authz = engine.NewEngine(authz.Schema(), authz.Policies(), engine.EngineOptions{CacheSize: engine.DefaultCacheSize})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		authz.Authorize(context.Background(), reqs[i%len(reqs)]).FailureDecision()
	}
}

// BenchmarkConvert measures the conversion of the same input.
func BenchmarkConvert(b *testing.B) {
	s := embeddedschema.Schema(b)
	in := readInput(b, "testdata/bootstrap")
	gen := testgen.RBACConfig(20261121, 50, 100)
	in.Roles = append(in.Roles, gen.Roles...)
	in.ClusterRoles = append(in.ClusterRoles, gen.ClusterRoles...)
	in.RoleBindings = append(in.RoleBindings, gen.RoleBindings...)
	in.ClusterRoleBindings = append(in.ClusterRoleBindings, gen.ClusterRoleBindings...)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := Convert(s, in); err != nil {
			b.Fatal(err)
		}
	}
}
