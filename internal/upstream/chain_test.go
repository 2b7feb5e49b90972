package upstream_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/union"

	"github.com/kcedar/kcedar/cedar"
	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/conditions"
	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/testing/embeddedschema"
	"github.com/kcedar/kcedar/internal/testing/testgen"
	"github.com/kcedar/kcedar/internal/tools/rbacconvert"
	"github.com/kcedar/kcedar/internal/upstream"
	publicschema "github.com/kcedar/kcedar/schemagen"
)

// The chain the offline tools answer for is kube-apiserver's: over
// generated cases (RBAC configurations converted by rbacconvert, kcedar
// policy sets with forbids, namespace, name, user and object conditions,
// requests from the RBAC generator and writes with objects), Chain's answer
// equals that of k8s.io/apiserver's union authorizer over kcedar's public
// authorizer (cedar.New) and one over the converted RBAC, in each mode:
// without conditions (Authorize), with conditional authorization
// (ConditionsAwareAuthorize, then EvaluateConditions against the objects),
// and with admission enforcement (a conditional allow on a write answered
// Allow).
func TestChainIsTheUnionAuthorizer(t *testing.T) {
	sets, perSet := 16, 60
	if testing.Short() {
		sets = 8
	}
	ctx := context.Background()
	stats := map[string]int{}
	for seed := uint64(1); seed <= uint64(sets); seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		h := newChainHarness(t, seed, kcedarPolicies(rng, 4+rng.IntN(8)))
		for i, spec := range chainRequests(rng, seed, perSet) {
			req, err := entities.RequestFromSAR(&spec)
			if err != nil {
				continue
			}
			attrs := attributesOf(&spec)
			what := fmt.Sprintf("set %d request %d %s", seed, i, req)
			h.checkNone(ctx, t, what, req, attrs, stats)
			h.checkConditionsReview(ctx, t, what, req, attrs, rng, stats)
			if written(spec.ResourceAttributes) {
				h.checkAdmissionEnforcement(ctx, t, what, req, attrs, stats)
			}
		}
	}
	t.Logf("%v", stats)
	for _, k := range []string{"none Allow by kcedar", "none Allow by rbac", "none Deny", "none NoOpinion", "conditional", "admitted Allow by kcedar", "admitted Allow by rbac", "admitted Deny", "enforced"} {
		if stats[k] < sets/4 {
			t.Errorf("only %d %q: the generator is too weak", stats[k], k)
		}
	}
}

// chainHarness is one generated case: the chain's engines and the union
// authorizers of the same policies.
type chainHarness struct {
	chain           func(upstream.ServeMode) *upstream.Chain
	union, enforced authorizer.Authorizer
	// rbacFirst is the union with RBAC before kcedar.
	rbacFirst authorizer.Authorizer
}

// newChainHarness converts a generated RBAC configuration and builds both
// sides over it and the kcedar policies.
func newChainHarness(t *testing.T, seed uint64, kcedarText string) *chainHarness {
	t.Helper()
	objs := testgen.RBACConfig(seed, 8, 14)
	// A grant on the kcedar policies' resources, so RBAC often decides
	// after kcedar: writers in team-a.
	objs.ClusterRoles = append(objs.ClusterRoles, rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "chain-writer"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: kcedarResources, Verbs: kcedarVerbs}}})
	objs.RoleBindings = append(objs.RoleBindings, rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "chain-writers"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "chain-writer"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "dev"}, {Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "bob"}}})
	res, err := rbacconvert.Convert(embeddedschema.Schema(t), &rbacconvert.Input{Roles: objs.Roles, ClusterRoles: objs.ClusterRoles, RoleBindings: objs.RoleBindings, ClusterRoleBindings: objs.ClusterRoleBindings})
	if err != nil {
		t.Fatal(err)
	}
	public, err := publicschema.Default()
	if err != nil {
		t.Fatal(err)
	}
	kc, err := cedar.New(cedar.StaticPolicies(cedar.PolicyFile{Name: "kcedar.cedar", Text: []byte(kcedarText)}), public, cedar.Options{})
	if err != nil {
		t.Fatalf("%v\n%s", err, kcedarText)
	}
	rb, err := cedar.New(cedar.StaticPolicies(cedar.PolicyFile{Name: "rbac.cedar", Text: res.Policies}), public, cedar.Options{})
	if err != nil {
		t.Fatal(err)
	}
	u, err := union.New(union.NamedAuthorizer{AuthorizerName: "kcedar", Authorizer: kc}, union.NamedAuthorizer{AuthorizerName: "rbac", Authorizer: unconditional{rb}})
	if err != nil {
		t.Fatal(err)
	}
	ue, err := union.New(union.NamedAuthorizer{AuthorizerName: "kcedar", Authorizer: enforcedAllow{kc}}, union.NamedAuthorizer{AuthorizerName: "rbac", Authorizer: unconditional{rb}})
	if err != nil {
		t.Fatal(err)
	}
	rf, err := union.New(union.NamedAuthorizer{AuthorizerName: "rbac", Authorizer: unconditional{rb}}, union.NamedAuthorizer{AuthorizerName: "kcedar", Authorizer: kc})
	if err != nil {
		t.Fatal(err)
	}
	kEngine := conditions.New(engineOf(t, "kcedar.cedar", []byte(kcedarText)), conditions.NewCodec(conditions.RandomKeyring()))
	rEngine := engineOf(t, "rbac.cedar", res.Policies)
	return &chainHarness{union: u, enforced: ue, rbacFirst: rf, chain: func(m upstream.ServeMode) *upstream.Chain {
		return &upstream.Chain{Kcedar: kEngine, RBAC: rEngine, Mode: m}
	}}
}

// engineOf is the engine of the policies in text, as the tools build it.
func engineOf(t *testing.T, name string, text []byte) *engine.Engine {
	t.Helper()
	ps, err := cedarlang.ParsePolicies(name, text)
	if err != nil {
		t.Fatal(err)
	}
	set, err := cedarlang.NewPolicySet(ps)
	if err != nil {
		t.Fatal(err)
	}
	return engine.NewEngine(embeddedschema.Schema(t), set, engine.EngineOptions{})
}

// checkNone: without conditional authorization, the chain answers as the
// union's Authorize, and names the authorizer that decided.
func (h *chainHarness) checkNone(ctx context.Context, t *testing.T, what string, req *entities.Request, attrs authorizer.Attributes, stats map[string]int) {
	t.Helper()
	want, _, _ := h.union.Authorize(ctx, attrs)
	got := h.chain(upstream.ServeModeNone).Authorize(ctx, req)
	if got.Type().String() != decisionName(want) {
		t.Fatalf("%s: mode none: chain %s (by %q), union %s", what, got.Type(), got.By, decisionName(want))
	}
	wantFirst, _, _ := h.rbacFirst.Authorize(ctx, attrs)
	first := h.chain(upstream.ServeModeNone)
	first.RBACFirst = true
	if got := first.Authorize(ctx, req); got.Type().String() != decisionName(wantFirst) {
		t.Fatalf("%s: mode none, RBAC first: chain %s (by %q), union %s", what, got.Type(), got.By, decisionName(wantFirst))
	}
	key := "none " + got.Type().String()
	if got.Type() == engine.DecisionAllow {
		key += " by " + got.By
	}
	stats[key]++
}

// checkConditionsReview: with conditional authorization, the chain's answer
// has the union's type and possible decisions, and once admission has the
// objects it evaluates to what the union's EvaluateConditions gives.
func (h *chainHarness) checkConditionsReview(ctx context.Context, t *testing.T, what string, req *entities.Request, attrs authorizer.Attributes, rng *rand.Rand, stats map[string]int) {
	t.Helper()
	want := h.union.ConditionsAwareAuthorize(ctx, attrs)
	c := h.chain(upstream.ServeModeConditionsReview)
	got := c.Authorize(ctx, req)
	back, err := upstream.FromWire(&got.Answer)
	if err != nil {
		t.Fatalf("%s: the chain's answer does not read back: %v", what, err)
	}
	if back.String() != want.String() && !samePossible(back, want) || back.IsUnconditional() != want.IsUnconditional() {
		t.Fatalf("%s: conditions-review: chain %s, union %s", what, back, want)
	}
	if want.IsUnconditional() {
		if got.By == upstream.ChainKcedar && back.Reason() != want.Reason() {
			t.Fatalf("%s: conditions-review: the chain's reason %q, the union's %q", what, back.Reason(), want.Reason())
		}
		return
	}
	stats["conditional"]++
	op := conditions.DefaultOperation(req.Verb, req.Subresource)
	if op == "" {
		return
	}
	adm := objectsFor(rng, op, req)
	wantD, _, _ := h.union.EvaluateConditions(ctx, want, conditionsData{req: req, adm: adm})
	gotD, by := c.Admitted(ctx, got, req, adm)
	if gotD.Type().String() != decisionName(wantD) {
		t.Fatalf("%s: admitted with %s: chain %s (by %q), union %s", what, adm.Object, gotD.Type(), by, decisionName(wantD))
	}
	key := "admitted " + gotD.Type().String()
	if gotD.IsAllowed() {
		key += " by " + by
	}
	stats[key]++
}

// checkAdmissionEnforcement: under admission enforcement the chain answers
// as the union over kcedar answering Allow for a conditional allow.
func (h *chainHarness) checkAdmissionEnforcement(ctx context.Context, t *testing.T, what string, req *entities.Request, attrs authorizer.Attributes, stats map[string]int) {
	t.Helper()
	want, _, _ := h.enforced.Authorize(ctx, attrs)
	got := h.chain(upstream.ServeModeAdmissionEnforcement).Authorize(ctx, req)
	if got.Type().String() != decisionName(want) {
		t.Fatalf("%s: admission-enforcement: chain %s (by %q), union %s", what, got.Type(), got.By, decisionName(want))
	}
	if got.Kcedar.Enforced {
		stats["enforced"]++
	}
}

// samePossible reports whether two conditional decisions may come to the
// same decisions (their conditions are signed by different keys).
func samePossible(a, b authorizer.ConditionsAwareDecision) bool {
	pa, pb := a.PossibleDecisions().UnsortedList(), b.PossibleDecisions().UnsortedList()
	slices.Sort(pa)
	slices.Sort(pb)
	return slices.Equal(pa, pb) && a.IsUnion() == b.IsUnion() && a.IsConditionsMap() == b.IsConditionsMap()
}

func decisionName(d authorizer.Decision) string {
	switch d {
	case authorizer.DecisionAllow:
		return "Allow"
	case authorizer.DecisionDeny:
		return "Deny"
	}
	return "NoOpinion"
}

// enforcedAllow is kcedar serve --admission-enforcement as an authorizer:
// a conditional decision with allow conditions on a write kcedar's
// admission webhook sees is an Allow; anything else is folded.
type enforcedAllow struct{ *cedar.Authorizer }

func (a enforcedAllow) Authorize(ctx context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	d := a.ConditionsAwareAuthorize(ctx, attrs)
	if d.IsConditionsMap() && d.PossibleDecisions().Has(authorizer.DecisionAllow) && writeVerbs[attrs.GetVerb()] && attrs.GetSubresource() == "" {
		return authorizer.DecisionAllow, "enforced in admission", nil
	}
	return a.Authorizer.Authorize(ctx, attrs)
}

// unconditional is RBAC as an authorizer: it never answers with
// conditions (its converted policies leave some on an open name or
// namespace, which RBAC reads as not matching).
type unconditional struct{ *cedar.Authorizer }

func (a unconditional) ConditionsAwareAuthorize(ctx context.Context, attrs authorizer.Attributes) authorizer.ConditionsAwareDecision {
	return authorizer.ConditionsAwareDecisionFromParts(a.Authorize(ctx, attrs))
}

var writeVerbs = map[string]bool{"create": true, "update": true, "patch": true, "delete": true, "deletecollection": true}

// written reports whether ra is a write of a resource the generated kcedar
// policies type, which kcedar's admission webhook sees.
func written(ra *authorizationv1.ResourceAttributes) bool {
	return ra != nil && writeVerbs[ra.Verb] && ra.Subresource == "" && ra.Group == "" && slices.Contains(kcedarResources, ra.Resource)
}

var (
	kcedarResources = []string{"pods", "configmaps", "secrets"}
	kcedarUsers     = []string{"alice", "bob", "carol", "system:serviceaccount:team-a:builder"}
	kcedarGroups    = []string{"dev", "ops", "qa", "system:authenticated"}
	kcedarVerbs     = []string{"get", "list", "create", "update", "patch", "delete", "deletecollection"}
	kcedarNS        = []string{"team-a", "team-a", "team-b", ""}
)

// kcedarPolicies draws n permits and forbids over the RBAC generator's
// users, groups and namespaces: conditions on the namespace, the name, the
// user, and the object of a write (its labels) or the stored object.
func kcedarPolicies(rng *rand.Rand, n int) string {
	principals := []string{"principal", `principal == k8s::User::"alice"`, `principal in k8s::Group::"dev"`, `principal in k8s::Group::"ops"`, "principal is k8s::ServiceAccount"}
	actions := []string{"action", `action == k8s::Action::"get"`, `action in [k8s::Action::"create", k8s::Action::"update"]`, `action in [k8s::Action::"get", k8s::Action::"list", k8s::Action::"delete"]`, `action == k8s::Action::"create"`}
	leaves := []string{
		`resource.namespace == "team-a"`, `resource.namespace like "team-*"`, `resource.name like "w*"`, `principal.username == "bob"`,
		`resource has object && resource.object.metadata has labels && resource.object.metadata.labels.hasTag("team")`,
		`resource has object && resource.object.metadata has labels && resource.object.metadata.labels.hasTag("team") && resource.object.metadata.labels.getTag("team") == "a"`,
		`resource has oldObject && resource.oldObject.metadata has labels && resource.oldObject.metadata.labels.hasTag("protected")`,
	}
	var b strings.Builder
	for i := range n {
		effect := "permit"
		if rng.IntN(3) == 0 {
			effect = "forbid"
		}
		fmt.Fprintf(&b, "@id(\"k%d\")\n%s (%s, %s, resource is core::%s)", i, effect, pick(rng, principals), pick(rng, actions), pick(rng, kcedarResources))
		for range rng.IntN(3) {
			clause := "when"
			if rng.IntN(4) == 0 {
				clause = "unless"
			}
			fmt.Fprintf(&b, "\n%s { %s }", clause, pick(rng, leaves))
		}
		b.WriteString(";\n")
	}
	return b.String()
}

// chainRequests draws n requests: half from the RBAC generator (every verb,
// resource and subject it knows), half on the kcedar policies' resources.
func chainRequests(rng *rand.Rand, seed uint64, n int) []authorizationv1.SubjectAccessReviewSpec {
	out := testgen.SubjectAccessReviews(seed, n/2)
	for len(out) < n {
		spec := authorizationv1.SubjectAccessReviewSpec{User: pick(rng, kcedarUsers)}
		for _, g := range kcedarGroups {
			if rng.IntN(2) == 0 {
				spec.Groups = append(spec.Groups, g)
			}
		}
		ra := &authorizationv1.ResourceAttributes{Verb: pick(rng, append(kcedarVerbs, "create", "update", "delete")), Version: "v1", Resource: pick(rng, kcedarResources), Namespace: pick(rng, kcedarNS)}
		if ra.Verb != "create" && ra.Verb != "list" && ra.Verb != "deletecollection" && rng.IntN(4) > 0 {
			ra.Name = pick(rng, []string{"web", "db", "worker"})
		}
		spec.ResourceAttributes = ra
		out = append(out, spec)
	}
	return out
}

func pick[T any](rng *rand.Rand, xs []T) T { return xs[rng.IntN(len(xs))] }

// objectsFor draws the objects admission sees for op on req: a new object
// for CREATE and UPDATE, a stored one for UPDATE and DELETE, with or
// without the labels the policies read.
func objectsFor(rng *rand.Rand, op string, req *entities.Request) *conditions.Admission {
	object := func() []byte {
		labels := pick(rng, []string{``, `"labels":{"team":"a"},`, `"labels":{"team":"b"},`, `"labels":{"protected":"yes"},`})
		return []byte(fmt.Sprintf(`{"apiVersion":"v1","kind":"%s","metadata":{%s"name":"web","namespace":%q}}`, kindOf(req.Resource), labels, req.Namespace))
	}
	adm := &conditions.Admission{Operation: op}
	if op == "CREATE" || op == "UPDATE" {
		adm.Object = object()
	}
	if op == "UPDATE" || op == "DELETE" {
		adm.OldObject = object()
	}
	return adm
}

func kindOf(resource string) string {
	return map[string]string{"pods": "Pod", "configmaps": "ConfigMap", "secrets": "Secret"}[resource]
}

// attributesOf is the authorizer attributes of a review, as the API server
// would ask the union.
func attributesOf(spec *authorizationv1.SubjectAccessReviewSpec) authorizer.Attributes {
	a := authorizer.AttributesRecord{User: &user.DefaultInfo{Name: spec.User, Groups: spec.Groups}}
	if nr := spec.NonResourceAttributes; nr != nil {
		a.Verb, a.Path = nr.Verb, nr.Path
		return a
	}
	ra := spec.ResourceAttributes
	a.ResourceRequest = true
	a.Verb, a.Namespace, a.APIGroup, a.APIVersion, a.Resource, a.Subresource, a.Name = ra.Verb, ra.Namespace, ra.Group, ra.Version, ra.Resource, ra.Subresource, ra.Name
	return a
}

// conditionsData is the admission data of req with the objects of adm, as
// the union's EvaluateConditions takes it.
type conditionsData struct {
	req *entities.Request
	adm *conditions.Admission
}

func (d conditionsData) GetName() string      { return d.req.Name }
func (d conditionsData) GetNamespace() string { return d.req.Namespace }
func (d conditionsData) GetResource() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: d.req.APIGroup, Version: "v1", Resource: d.req.Resource}
}
func (d conditionsData) GetSubresource() string { return d.req.Subresource }
func (d conditionsData) GetOperation() authorizer.AdmissionOperation {
	return authorizer.AdmissionOperation(d.adm.Operation)
}
func (d conditionsData) GetOperationOptions() runtime.Object { return nil }
func (d conditionsData) IsDryRun() bool                      { return false }
func (d conditionsData) GetObject() runtime.Object           { return unstructuredOf(d.adm.Object) }
func (d conditionsData) GetOldObject() runtime.Object        { return unstructuredOf(d.adm.OldObject) }
func (d conditionsData) GetKind() schema.GroupVersionKind {
	return schema.GroupVersionKind{Version: "v1", Kind: kindOf(d.req.Resource)}
}
func (d conditionsData) GetUserInfo() user.Info {
	return &user.DefaultInfo{Name: d.req.User.Name, Groups: d.req.User.Groups}
}

func unstructuredOf(data []byte) runtime.Object {
	if data == nil {
		return nil
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(data); err != nil {
		panic(err)
	}
	return u
}

// Under admission enforcement kcedar answers Allow for a conditional allow
// on a write, and its admission webhook then rejects the request unless the
// conditions allow it, whoever allowed it at authorization.
func TestChainAdmittedUnderAdmissionEnforcement(t *testing.T) {
	ctx := context.Background()
	kcedar := engineOf(t, "kcedar.cedar", []byte(`@id("labelled") permit (principal == k8s::User::"alice", action == k8s::Action::"create", resource is core::configmaps)
when { resource has object && resource.object.metadata has labels && resource.object.metadata.labels.hasTag("team") };`))
	c := &upstream.Chain{Kcedar: conditions.New(kcedar, conditions.NewCodec(conditions.RandomKeyring())), Mode: upstream.ServeModeAdmissionEnforcement}
	req := &entities.Request{User: entities.UserInfo{Name: "alice", Groups: []string{"system:authenticated"}}, ResourceRequest: true,
		Verb: "create", APIVersion: "v1", Resource: "configmaps", Namespace: "dev"}
	a := c.Authorize(ctx, req)
	if a.Type() != engine.DecisionAllow || !a.Kcedar.Enforced || a.By != upstream.ChainKcedar {
		t.Fatalf("authorization: %s by %q (enforced %v)", a.Type(), a.By, a.Kcedar.Enforced)
	}
	for labels, want := range map[string]engine.DecisionType{`"labels":{"team":"a"},`: engine.DecisionAllow, ``: engine.DecisionDeny} {
		obj := []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{` + labels + `"name":"c","namespace":"dev"}}`)
		d, by := c.Admitted(ctx, a, req, &conditions.Admission{Operation: "CREATE", Object: obj})
		if d.Type() != want || by != upstream.ChainKcedar {
			t.Errorf("admitted with %s: %s by %q, want %s by kcedar", obj, d.Type(), by, want)
		}
	}
	c.Mode = upstream.ServeModeNone
	if a := c.Authorize(ctx, req); a.Type() != engine.DecisionNoOpinion || a.Kcedar.Enforced {
		t.Errorf("without conditional authorization: %s (enforced %v)", a.Type(), a.Kcedar.Enforced)
	}
}
