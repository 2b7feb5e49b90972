package policyobjects

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand"
	"strings"
	"testing"

	cedarast "github.com/cedar-policy/cedar-go/ast"

	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/lib/cedarx/ast"
	"github.com/kcedar/kcedar/internal/store"
	"github.com/kcedar/kcedar/internal/testing/schematest"
)

var (
	principalScopes = []string{"principal", `principal == k8s::User::"alice"`, `principal in k8s::Group::"dev"`, "principal is k8s::ServiceAccount", "principal is k8s::Node"}
	actionScopes    = []string{"action", `action == k8s::Action::"get"`, `action in [k8s::Action::"create", k8s::Action::"delete", k8s::Action::"list"]`, `action in k8s::Action::"*"`, `action == k8s::Action::"impersonate"`}
	resourceScopes  = []string{"resource", "resource is core::pods", "resource is core::nodes", "resource is core::namespaces", "resource is k8s::NonResourceURL", "resource is k8s::Resource", "resource is core::secrets", "resource is core::serviceaccounts", "resource is core::users"}
	conditionBodies = []string{
		"true", "false", "1 == 1",
		"resource has namespace", "!(resource has namespace)", "resource has namespace || true",
		`resource has namespace && resource.namespace == "b"`,
		`resource has namespace && resource.namespace != "a"`,
		`resource.namespace == "b"`, // errors where there is no namespace
		`resource has name && resource.name == "x"`,
		`principal.username == "alice"`,
		`principal has namespace && resource has namespace && principal.namespace == resource.namespace`,
		"resource has object",
		`resource has path && resource.path == "/healthz"`,
		`resource has object && resource.object has metadata && resource.object.metadata has namespace && resource.object.metadata.namespace == "b"`,
		`resource has apiGroup && resource.apiGroup == "*"`,
	}
)

// randomPolicies writes 1-4 permits from the pieces above; the first text
// of all is the one that permits everything.
func randomPolicies(r *rand.Rand, i int) string {
	if i == 0 {
		return "permit(principal, action, resource);"
	}
	var b strings.Builder
	for n := 1 + r.Intn(4); n > 0; n-- {
		fmt.Fprintf(&b, "permit(%s, %s, %s)", principalScopes[r.Intn(len(principalScopes))], actionScopes[r.Intn(len(actionScopes))], resourceScopes[r.Intn(len(resourceScopes))])
		for c := r.Intn(3); c > 0; c-- {
			kw := "when"
			if r.Intn(3) == 0 {
				kw = "unless"
			}
			fmt.Fprintf(&b, " %s { %s }", kw, conditionBodies[r.Intn(len(conditionBodies))])
		}
		b.WriteString(";\n")
	}
	return b.String()
}

type target struct {
	resource                        bool
	group, res, sub, ns, name, path string
}

var (
	users = []entities.UserInfo{
		{Name: "alice", Groups: []string{"dev", "system:authenticated"}},
		{Name: "bob"},
		{Name: "system:serviceaccount:b:sa", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:b"}},
		{Name: "system:serviceaccount:a:sa", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:a"}},
		{Name: "system:node:n1", Groups: []string{"system:nodes"}},
	}
	verbs   = []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection", "impersonate", "*"}
	targets = func() []target {
		var out []target
		for _, ns := range []string{"a", "b", "kube-system", ""} {
			for _, name := range []string{"", "x", "a"} {
				out = append(out,
					target{resource: true, res: "pods", ns: ns, name: name},
					target{resource: true, res: "pods", sub: "exec", ns: ns, name: name},
					target{resource: true, res: "secrets", ns: ns, name: name},
					target{resource: true, res: "serviceaccounts", ns: ns, name: name},
					target{resource: true, group: "apps", res: "deployments", ns: ns, name: name},
					target{resource: true, group: "*", res: "*", ns: ns, name: name},
					target{resource: true, group: "example.com", res: "foos", ns: ns, name: name},
				)
			}
		}
		for _, name := range []string{"", "a", "x"} {
			out = append(out,
				target{resource: true, res: "nodes", name: name},
				target{resource: true, res: "namespaces", name: name},
				target{resource: true, res: "users", name: name},
				target{resource: true, group: "certificates.k8s.io", res: "certificatesigningrequests", name: name},
			)
		}
		for _, p := range []string{"/healthz", "/api", "/apis/a", "*"} {
			out = append(out, target{path: p})
		}
		return out
	}()
)

func (t target) request(u entities.UserInfo, verb string) *entities.Request {
	if !t.resource {
		return &entities.Request{User: u, Verb: verb, Path: t.path}
	}
	return &entities.Request{User: u, Verb: verb, ResourceRequest: true, APIGroup: t.group, Resource: t.res, Subresource: t.sub, Namespace: t.ns, Name: t.name}
}

// A NamespacedCedarPolicy confined to namespace "a" never allows a request
// outside a: not a known other namespace, not a cluster-scoped resource, not
// a non-resource URL, whatever its text (generated here, including
// `permit(principal, action, resource);`). A request across all namespaces
// is never allowed unconditionally; its conditions carry the guard. Inside
// a, the confined policies decide as the text alone does.
func TestNamespacedPoliciesNeverReachOutside(t *testing.T) {
	s := schematest.Schema()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	r := rand.New(rand.NewSource(1))
	texts := 60
	if testing.Short() {
		texts = 10
	}
	allowedInside := 0
	for i := 0; i < texts; i++ {
		text := randomPolicies(r, i)
		confinedStore := store.NewStore(nil, nil, quiet)
		confinedStore.SetSources([]store.Source{{Name: "NamespacedCedarPolicy/a/p", Namespace: "a", Data: []byte(text)}})
		plainStore := store.NewStore(nil, nil, quiet)
		plainStore.SetSources([]store.Source{{Name: "NamespacedCedarPolicy/a/p", Data: []byte(text)}})
		if err := confinedStore.Load(); err != nil {
			t.Fatalf("text %d: %v\n%s", i, err, text)
		}
		if err := plainStore.Load(); err != nil {
			t.Fatal(err)
		}
		confined := engine.NewEngine(s, confinedStore.Current(), engine.EngineOptions{})
		plain := engine.NewEngine(s, plainStore.Current(), engine.EngineOptions{})
		for _, tg := range targets {
			for _, u := range users {
				for _, verb := range verbs {
					req := tg.request(u, verb)
					o := confined.Authorize(context.Background(), req)
					folded := confined.Authorize(context.Background(), req).FailureDecision()
					switch {
					case tg.resource && tg.ns == "a":
						p := plain.Authorize(context.Background(), req)
						if o.Type() != p.Type() || o.IsConditional() != p.IsConditional() || len(o.AllowConditions()) != len(p.AllowConditions()) {
							t.Fatalf("inside a, the guard changed the decision of %s: confined %v conditional=%v allow=%d, text alone %v conditional=%v allow=%d\n%s", req, o.Type(), o.IsConditional(), len(o.AllowConditions()), p.Type(), p.IsConditional(), len(p.AllowConditions()), text)
						}
						if o.IsAllowed() {
							allowedInside++
						}
					case tg.resource && tg.ns == "" && folded.IsAllowed():
						t.Fatalf("across namespaces, %s was allowed:\n%s", req, text)
					case tg.resource && tg.ns == "":
						for _, a := range o.AllowConditions() {
							cond := string((*cedarast.Policy)(ast.Permit().When(ast.NewNode(a.Expr))).MarshalCedar())
							if !strings.Contains(cond, `resource.namespace == "a"`) {
								t.Fatalf("a condition for %s lost the namespace guard: %s\n%s", req, cond, text)
							}
						}
					default:
						if o.IsAllowed() || len(o.AllowConditions()) > 0 || folded.IsAllowed() {
							t.Fatalf("outside a, %s: %v with %d allow conditions from:\n%s", req, o.Type(), len(o.AllowConditions()), text)
						}
					}
				}
			}
		}
	}
	if allowedInside == 0 {
		t.Fatal("no request inside a was allowed: the generator tests nothing")
	}
	t.Logf("%d texts, %d requests each; %d allowed inside a", texts, len(targets)*len(users)*len(verbs), allowedInside)
}
