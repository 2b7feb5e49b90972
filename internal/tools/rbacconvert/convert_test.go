package rbacconvert

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/cedarlang/lint"
	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/testing/embeddedschema"
	"github.com/kcedar/kcedar/internal/testing/testgen"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func readInput(t testing.TB, paths ...string) *Input {
	t.Helper()
	in := &Input{}
	if err := in.ReadPaths(paths); err != nil {
		t.Fatal(err)
	}
	return in
}

// compile parses and validates converted policies and builds an authorizer.
func compile(t testing.TB, s *schemagen.Schema, res *Result) *engine.Engine {
	t.Helper()
	ps, err := cedarlang.ParsePolicies("rbac.cedar", res.Policies)
	if err != nil {
		t.Fatalf("parsing: %v", err)
	}
	if len(ps) != res.Count {
		t.Fatalf("parsed %d policies, Convert counted %d", len(ps), res.Count)
	}
	v, err := cedarlang.NewSchemaValidator(s)
	if err != nil {
		t.Fatal(err)
	}
	if errs := v.Validate(ps); len(errs) > 0 {
		for i, e := range errs {
			if i == 10 {
				break
			}
			t.Errorf("validation: %v", e)
		}
		t.FailNow()
	}
	set, err := cedarlang.NewPolicySet(ps)
	if err != nil {
		t.Fatal(err)
	}
	return engine.NewEngine(s, set, engine.EngineOptions{})
}

// TestGolden converts each testdata/*.yaml file and testdata/* directory and
// compares with testdata/<name>.cedar (and .warnings); -update rewrites them.
func TestGolden(t *testing.T) {
	s := embeddedschema.Schema(t)
	entries, err := os.ReadDir("testdata")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() && filepath.Ext(name) != ".yaml" {
			continue
		}
		n++
		base := strings.TrimSuffix(name, ".yaml")
		t.Run(base, func(t *testing.T) {
			in := readInput(t, filepath.Join("testdata", name))
			res, err := Convert(s, in)
			if err != nil {
				t.Fatal(err)
			}
			compile(t, s, res)
			warnings := []byte(strings.Join(res.Warnings, "\n") + "\n")
			for file, got := range map[string][]byte{base + ".cedar": res.Policies, base + ".warnings": warnings} {
				path := filepath.Join("testdata", file)
				if *update {
					if err := os.WriteFile(path, got, 0o644); err != nil {
						t.Fatal(err)
					}
					continue
				}
				want, err := os.ReadFile(path)
				if err != nil {
					t.Fatalf("%v (run go test ./internal/tools/rbacconvert -update)", err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("%s differs from the conversion (run go test ./internal/tools/rbacconvert -update and review the diff)\n%s", path, firstDiff(want, got))
				}
			}
		})
	}
	if n == 0 {
		t.Fatal("no golden inputs")
	}
}

func firstDiff(want, got []byte) string {
	wl, gl := strings.Split(string(want), "\n"), strings.Split(string(got), "\n")
	for i := 0; i < len(wl) || i < len(gl); i++ {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			return "line " + strconv.Itoa(i+1) + ":\n  want: " + w + "\n  got:  " + g
		}
	}
	return ""
}

func TestFeatureWarnings(t *testing.T) {
	s := embeddedschema.Schema(t)
	res, err := Convert(s, readInput(t, "testdata/features.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(res.Warnings, "\n")
	for _, want := range []string{
		`RoleBinding/dev/missing-role: Role/dev/does-not-exist not found`,
		`ClusterRoleBinding/gone: ClusterRole/no-such-role not found`,
		`ServiceAccount subject "no-namespace" has no namespace`,
		`skipping v1 ConfigMap (not RBAC)`,
		// Verbs and resources the schema does not know: converted, and worth a look.
		`verb "frobnicate" is not a verb the schema declares`,
		`resource "frobs" is not in the schema for group "", "apps"`,
	} {
		if !strings.Contains(all, want) {
			t.Errorf("no warning %q in:\n%s", want, all)
		}
	}
	// Literal "*" subresources and "" in resourceNames convert exactly.
	// kcedar's non-resource "*" also stands for the impersonate-on verbs, so a
	// rule listing every HTTP verb no longer allows it, as in RBAC.
	for _, unwanted := range []string{`pods/*`, `*/*`, `resourceNames`, `ClusterRole/urls rule 4: lists every verb`} {
		if strings.Contains(all, unwanted) {
			t.Errorf("warning about %q in:\n%s", unwanted, all)
		}
	}
	for _, want := range []string{
		`context.verb == "frobnicate"`,
		`resource.resource == "pods" && resource has subresource && resource.subresource == "*"`,
		`resource has subresource && resource.subresource == "*"`,
		`!resource.named`,
	} {
		if !bytes.Contains(res.Policies, []byte(want)) {
			t.Errorf("no %q in the converted policies", want)
		}
	}
}

// TestDeterministic: the output does not depend on the order of the input.
func TestDeterministic(t *testing.T) {
	s := embeddedschema.Schema(t)
	in := readInput(t, "testdata/bootstrap", "testdata/features.yaml")
	gen := testgen.RBACConfig(7, 50, 100)
	in.Roles = append(in.Roles, gen.Roles...)
	in.ClusterRoles = append(in.ClusterRoles, gen.ClusterRoles...)
	in.RoleBindings = append(in.RoleBindings, gen.RoleBindings...)
	in.ClusterRoleBindings = append(in.ClusterRoleBindings, gen.ClusterRoleBindings...)
	a, err := Convert(s, in)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	r.Shuffle(len(in.Roles), func(i, j int) { in.Roles[i], in.Roles[j] = in.Roles[j], in.Roles[i] })
	r.Shuffle(len(in.ClusterRoles), func(i, j int) { in.ClusterRoles[i], in.ClusterRoles[j] = in.ClusterRoles[j], in.ClusterRoles[i] })
	r.Shuffle(len(in.RoleBindings), func(i, j int) { in.RoleBindings[i], in.RoleBindings[j] = in.RoleBindings[j], in.RoleBindings[i] })
	r.Shuffle(len(in.ClusterRoleBindings), func(i, j int) {
		in.ClusterRoleBindings[i], in.ClusterRoleBindings[j] = in.ClusterRoleBindings[j], in.ClusterRoleBindings[i]
	})
	b, err := Convert(s, in)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Policies, b.Policies) || strings.Join(a.Warnings, "\n") != strings.Join(b.Warnings, "\n") {
		t.Fatal("the conversion depends on the input order")
	}
}

// TestOfflineParity decides generated requests over the bootstrap roles plus a
// generated configuration with the converted policies and with the reference
// RBAC authorizer (testgen.RBACObjects.Allows), which the e2e test checks against a real apiserver:
// every answer must agree.
func TestOfflineParity(t *testing.T) {
	s := embeddedschema.Schema(t)
	for _, seed := range []uint64{1, 2, 3} {
		in := readInput(t, "testdata/bootstrap")
		gen := testgen.RBACConfig(seed, 50, 100)
		in.Roles = append(in.Roles, gen.Roles...)
		in.ClusterRoles = append(in.ClusterRoles, gen.ClusterRoles...)
		in.RoleBindings = append(in.RoleBindings, gen.RoleBindings...)
		in.ClusterRoleBindings = append(in.ClusterRoleBindings, gen.ClusterRoleBindings...)
		res, err := Convert(s, in)
		if err != nil {
			t.Fatal(err)
		}
		authz := compile(t, s, res)
		n := 3000
		if testing.Short() {
			n = 1000
		}
		specs := testgen.SubjectAccessReviews(seed, n)
		noEmpty := reference(in).WithoutEmptyNames()
		var allowed, customVerb, starSub, bad int
		var nsCluster, slash, emptyName int // allowed by RBAC through the corners
		for i := range specs {
			req, err := entities.RequestFromSAR(&specs[i])
			if err != nil {
				t.Fatal(err)
			}
			out := authz.Authorize(context.Background(), req).FailureDecision()
			got := out.IsAllowed()
			want, why := reference(in).Allows(req)
			if want {
				allowed++
				switch {
				case req.Verb != entities.Wildcard && !slices.Contains(s.Verbs, req.Verb):
					customVerb++
				case req.ResourceRequest && req.Subresource == entities.Wildcard:
					starSub++
				}
				if tg := entities.ResolveTarget(s, req); tg.Resource != nil && !tg.Resource.Namespaced && req.Namespace != "" {
					nsCluster++
				}
				if strings.Contains(req.Resource, "/") {
					slash++
				}
				if ok, _ := noEmpty.Allows(req); !ok {
					emptyName++
				}
			}
			if got != want {
				bad++
				if bad <= 20 {
					var ids []string
					for _, p := range out.Policies() {
						ids = append(ids, p.ID)
					}
					t.Errorf("seed %d: %s: kcedar %s by %v, RBAC allowed=%v by %v", seed, req, out.Type(), ids, want, why)
				}
			}
		}
		t.Logf("seed %d: %d policies; %d requests, %d allowed by RBAC (%d with a custom verb, %d with the subresource \"*\", %d namespaced for a cluster-scoped resource, %d with \"/\" in the resource, %d only by \"\" in resourceNames), %d disagreements",
			seed, res.Count, len(specs), allowed, customVerb, starSub, nsCluster, slash, emptyName, bad)
		if customVerb == 0 || starSub == 0 || nsCluster == 0 || slash == 0 || emptyName == 0 {
			t.Errorf("seed %d: the generated requests allowed by RBAC miss a corner (custom verb, \"*\" subresource, namespace on a cluster-scoped resource, \"/\" in the resource, \"\" in resourceNames)", seed)
		}
	}
}

func TestReadJSONAndBootstrapFilter(t *testing.T) {
	in := &Input{}
	js := `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRoleBindingList","items":[
	  {"metadata":{"name":"mine"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"view"},
	   "subjects":[{"kind":"User","apiGroup":"rbac.authorization.k8s.io","name":"alice"}]},
	  {"metadata":{"name":"system:basic-user","labels":{"kubernetes.io/bootstrapping":"rbac-defaults"}},
	   "roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"system:basic-user"},
	   "subjects":[{"kind":"Group","apiGroup":"rbac.authorization.k8s.io","name":"system:authenticated"}]}]}`
	if err := in.Read("x.json", strings.NewReader(js)); err != nil {
		t.Fatal(err)
	}
	if len(in.ClusterRoleBindings) != 2 || in.ClusterRoleBindings[0].Name != "mine" {
		t.Fatalf("read %+v", in.ClusterRoleBindings)
	}
	in.DropBootstrapBindings()
	if len(in.ClusterRoleBindings) != 1 || in.ClusterRoleBindings[0].Name != "mine" {
		t.Fatalf("after DropBootstrapBindings: %+v", in.ClusterRoleBindings)
	}
	if err := in.Read("bad.yaml", strings.NewReader("kind: [")); err == nil {
		t.Fatal("no error for bad YAML")
	}
}

// TestEdgePatterns compares kcedar with the reference RBAC authorizer on odd rule
// resources and every combination of request attributes around them.
func TestEdgePatterns(t *testing.T) {
	s := embeddedschema.Schema(t)
	resources := [][]string{{"pods/"}, {"/pods"}, {"*/"}, {"pods/exec/x"}, {"*/exec"}, {"pods", "pods/log"},
		{"userextras", "userextras/scopes"}, {"*/scopes"}, {"widgets/status"}, {"namespaces"}, {"*"}, {"nodes"},
		{"pods/*"}, {"*/*"}, {"userextras/*"}, {"namespaces/*", "nodes/*"}, {"widgets/*", "pods/exec"}}
	groups := [][]string{{""}, {"*"}, {"example.com"}, {"authentication.k8s.io"}, {"", "example.com"}}
	verbs := [][]string{{"get", "use"}, {"get", "frobnicate"}, {"frobnicate", "custom"}}
	in := &Input{}
	i := 0
	for _, res := range resources {
		for _, g := range groups {
			for _, names := range [][]string{nil, {"x"}, {""}, {"", "x"}} {
				name := "edge-" + strconv.Itoa(i)
				vs := verbs[i%len(verbs)]
				i++
				in.ClusterRoles = append(in.ClusterRoles, rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name},
					Rules: []rbacv1.PolicyRule{{APIGroups: g, Resources: res, ResourceNames: names, Verbs: vs}}})
				subj := []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: name}}
				in.ClusterRoleBindings = append(in.ClusterRoleBindings, rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
					RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: name}, Subjects: subj})
				in.RoleBindings = append(in.RoleBindings, rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
					RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: name}, Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: name + "-ns"}}})
			}
		}
	}
	res, err := Convert(s, in)
	if err != nil {
		t.Fatal(err)
	}
	authz := compile(t, s, res)
	// Each user is the subject of one binding: deciding over that binding and
	// its role alone is RBAC's answer, and quick.
	ref := map[string]*testgen.RBACObjects{}
	for j := range in.ClusterRoles {
		for _, u := range []struct {
			crb bool
			rb  int
		}{{crb: true}, {rb: j}} {
			one := &Input{ClusterRoles: in.ClusterRoles[j : j+1]}
			user := in.ClusterRoles[j].Name
			if u.crb {
				one.ClusterRoleBindings = in.ClusterRoleBindings[j : j+1]
			} else {
				one.RoleBindings = in.RoleBindings[j : j+1]
				user += "-ns"
			}
			ref[user] = reference(one)
		}
	}
	checked, allowed := 0, 0
	r := rand.New(rand.NewPCG(3, 4))
	groupVals := []string{"", "*", "example.com", "authentication.k8s.io", "apps"}
	resVals := []string{"pods", "pods/", "", "*", "*/", "widgets", "userextras", "namespaces", "nodes", "pods/exec", "pods/exec/x", "*/exec", "userextras/scopes"}
	subVals := []string{"", "exec", "exec/x", "log", "scopes", "status", "*", "pods"}
	n := 50000
	if testing.Short() {
		n = 5000
	}
	for checked < n {
		k := r.IntN(i)
		user := "edge-" + strconv.Itoa(k)
		if r.IntN(2) == 0 {
			user += "-ns"
		}
		req := &entities.Request{User: entities.UserInfo{Name: user}, Verb: pick(r, []string{"get", "use", "frobnicate", "custom", "other", "*"}), ResourceRequest: true,
			APIGroup: pick(r, groupVals), Resource: pick(r, resVals), Subresource: pick(r, subVals),
			Namespace: pick(r, []string{"", "ns", "other"}), Name: pick(r, []string{"", "x", "ns"})}
		if rule := in.ClusterRoles[k].Rules[0]; r.IntN(2) == 0 {
			// Aim at the rule: one of its groups and resources.
			req.APIGroup = pick(r, rule.APIGroups)
			req.Resource, req.Subresource, _ = strings.Cut(pick(r, rule.Resources), "/")
			if r.IntN(4) == 0 {
				// The whole entry as the resource ("pods/exec", no subresource).
				req.Resource, req.Subresource = pick(r, rule.Resources), ""
			}
		}
		// Every request is checked: namespaced requests for cluster-scoped
		// resources, "" in resourceNames and "/" in a request's resource
		// included.
		checked++
		got := authz.Authorize(context.Background(), req).FailureDecision().IsAllowed()
		want, why := ref[user].Allows(req)
		if want {
			allowed++
		}
		if got != want {
			t.Errorf("%s: kcedar allowed=%v, RBAC %v %v", req, got, want, why)
		}
	}
	t.Logf("%d requests, %d allowed by RBAC", checked, allowed)
}

// TestOutputLintClean: what Convert writes passes `kcedar validate
// --strict-warnings` (no errors, no lint warnings) on the fixtures and on
// generated configurations.
func TestOutputLintClean(t *testing.T) {
	s := embeddedschema.Schema(t)
	checker, err := lint.NewChecker(s)
	if err != nil {
		t.Fatal(err)
	}
	inputs := map[string]*Input{"fixtures": readInput(t, "testdata/bootstrap", "testdata/features.yaml")}
	for _, seed := range []uint64{1, 2} {
		g := testgen.RBACConfig(seed, 50, 100)
		inputs[fmt.Sprintf("generated-%d", seed)] = &Input{Roles: g.Roles, ClusterRoles: g.ClusterRoles, RoleBindings: g.RoleBindings, ClusterRoleBindings: g.ClusterRoleBindings}
	}
	for name, in := range inputs {
		res, err := Convert(s, in)
		if err != nil {
			t.Fatal(err)
		}
		out := checker.Check([]lint.File{{Name: name + ".cedar", Data: res.Policies}})
		if len(out.Diagnostics) > 0 || len(out.Policies) != res.Count {
			t.Errorf("%s: %d policies of %d, %d findings; first: %v", name, len(out.Policies), res.Count, len(out.Diagnostics), first(out.Diagnostics))
		}
	}
}

func first[T any](s []T) any {
	if len(s) == 0 {
		return nil
	}
	return s[0]
}

// reference is in for the reference RBAC authorizer (testgen.RBACObjects.Allows).
func reference(in *Input) *testgen.RBACObjects {
	return &testgen.RBACObjects{Roles: in.Roles, ClusterRoles: in.ClusterRoles, RoleBindings: in.RoleBindings, ClusterRoleBindings: in.ClusterRoleBindings}
}

func pick[T any](r *rand.Rand, s []T) T { return s[r.IntN(len(s))] }
