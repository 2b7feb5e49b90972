package embed_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/union"

	"github.com/kcedar/kcedar/cedar"
	"github.com/kcedar/kcedar/residual"
	"github.com/kcedar/kcedar/schemagen"
)

// policies: an allow, a forbid, and an allow that depends on the object of a
// write (a condition, evaluated in admission).
const policies = `
@id("dev-reads") @reason("developers read pods in dev")
permit (principal in k8s::Group::"dev", action in [k8s::Action::"get", k8s::Action::"list"], resource is core::pods)
when { resource.namespace == "dev" };

@id("no-secrets-for-contractors")
forbid (principal in k8s::Group::"contractors", action, resource is core::secrets);

@id("n1-only") @reason("bob runs pods on node n1 only")
permit (principal == k8s::User::"bob", action == k8s::Action::"create", resource is core::pods)
when { resource has object && resource.object has v1 && resource.object.v1 has spec &&
       resource.object.v1.spec has nodeName && resource.object.v1.spec.nodeName == "n1" };
`

// keyring is the fixed key that signs and verifies conditions, shared by the
// in-process authorizer, the server and the standalone evaluator.
func keyring(t *testing.T) *residual.Keyring {
	t.Helper()
	k, err := residual.NewKeyring(residual.Key{ID: "embed", Secret: []byte("embed-test-secret-of-32-bytes-ok")})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// defaultSchema is schemagen.Default, built once for all tests.
var defaultSchema = sync.OnceValues(schemagen.Default)

func newSchema(t *testing.T) *schemagen.Schema {
	t.Helper()
	s, err := defaultSchema()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// newKcedar is the authorizer of policies, signing with keys.
func newKcedar(t *testing.T, keys *residual.Keyring) *cedar.Authorizer {
	t.Helper()
	a, err := cedar.New(cedar.StaticPolicies(cedar.PolicyFile{Name: "team.cedar", Text: []byte(policies)}), newSchema(t), cedar.Options{Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// masters allows the group system:masters and has no opinion otherwise, as
// kube-apiserver's privileged-groups authorizer does.
var masters = authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	if a.GetUser() != nil && slices.Contains(a.GetUser().GetGroups(), user.SystemPrivilegedGroup) {
		return authorizer.DecisionAllow, "system:masters", nil
	}
	return authorizer.DecisionNoOpinion, "", nil
})

// chains are kcedar then masters ("kcedarFirst") and masters then kcedar
// ("mastersFirst").
func chains(t *testing.T, kc authorizer.Authorizer) (kcedarFirst, mastersFirst authorizer.Authorizer) {
	t.Helper()
	k := union.NamedAuthorizer{AuthorizerName: "kcedar", Authorizer: kc}
	m := union.NamedAuthorizer{AuthorizerName: "masters", Authorizer: masters}
	var err error
	if kcedarFirst, err = union.New(k, m); err != nil {
		t.Fatal(err)
	}
	if mastersFirst, err = union.New(m, k); err != nil {
		t.Fatal(err)
	}
	return kcedarFirst, mastersFirst
}

var (
	jane  = &user.DefaultInfo{Name: "jane", Groups: []string{"dev", user.AllAuthenticated}}
	carl  = &user.DefaultInfo{Name: "carl", Groups: []string{"contractors", user.AllAuthenticated}}
	root  = &user.DefaultInfo{Name: "root", Groups: []string{"contractors", user.SystemPrivilegedGroup, user.AllAuthenticated}}
	admin = &user.DefaultInfo{Name: "admin", Groups: []string{user.SystemPrivilegedGroup, user.AllAuthenticated}}
	bob   = &user.DefaultInfo{Name: "bob", UID: "b0b", Groups: []string{user.AllAuthenticated}}
	alice = &user.DefaultInfo{Name: "alice", Groups: []string{user.AllAuthenticated}}
)

func resource(u user.Info, verb, res, namespace, name string) authorizer.AttributesRecord {
	return authorizer.AttributesRecord{User: u, Verb: verb, APIVersion: "v1", Resource: res, Namespace: namespace, Name: name, ResourceRequest: true}
}

// bobCreatesPod is the request that gets a conditional decision.
var bobCreatesPod = resource(bob, "create", "pods", "team", "")

// unconditionalCase is a request and its decision by kcedar alone and by
// each union.
type unconditionalCase struct {
	name                              string
	attrs                             authorizer.AttributesRecord
	kcedar, kcedarFirst, mastersFirst authorizer.Decision
}

var unconditionalCases = []unconditionalCase{
	{"dev lists pods in dev", resource(jane, "list", "pods", "dev", ""),
		authorizer.DecisionAllow, authorizer.DecisionAllow, authorizer.DecisionAllow},
	{"dev gets a pod in dev", resource(jane, "get", "pods", "dev", "web"),
		authorizer.DecisionAllow, authorizer.DecisionAllow, authorizer.DecisionAllow},
	{"dev lists pods in prod: nobody has an opinion", resource(jane, "list", "pods", "prod", ""),
		authorizer.DecisionNoOpinion, authorizer.DecisionNoOpinion, authorizer.DecisionNoOpinion},
	{"contractor gets a secret: forbid", resource(carl, "get", "secrets", "dev", "db"),
		authorizer.DecisionDeny, authorizer.DecisionDeny, authorizer.DecisionDeny},
	// The order matters: kcedar's Deny ends the chain before masters allows,
	// and masters' Allow ends it before kcedar denies.
	{"contractor in system:masters gets a secret: the first decides", resource(root, "get", "secrets", "dev", "db"),
		authorizer.DecisionDeny, authorizer.DecisionDeny, authorizer.DecisionAllow},
	{"system:masters lists pods in prod: kcedar has no opinion, masters allows", resource(admin, "list", "pods", "prod", ""),
		authorizer.DecisionNoOpinion, authorizer.DecisionAllow, authorizer.DecisionAllow},
	// Authorize folds a condition: allow conditions alone are NoOpinion.
	{"bob creates a pod, object unknown: folded", bobCreatesPod,
		authorizer.DecisionNoOpinion, authorizer.DecisionNoOpinion, authorizer.DecisionNoOpinion},
}

// TestUnion puts kcedar in k8s.io/apiserver's union authorizer beside
// another authorizer, in both orders.
func TestUnion(t *testing.T) {
	kc := newKcedar(t, keyring(t))
	kcedarFirst, mastersFirst := chains(t, kc)
	ctx := context.Background()
	for _, c := range unconditionalCases {
		t.Run(c.name, func(t *testing.T) {
			for _, a := range []struct {
				name string
				a    authorizer.Authorizer
				want authorizer.Decision
			}{{"kcedar", kc, c.kcedar}, {"kcedar, masters", kcedarFirst, c.kcedarFirst}, {"masters, kcedar", mastersFirst, c.mastersFirst}} {
				got, reason, err := a.a.Authorize(ctx, c.attrs)
				if got != a.want || err != nil {
					t.Errorf("%s: Authorize = %v, %q, %v; want %v, no error", a.name, got, reason, err, a.want)
				}
			}
			// A request with no condition is unconditional to a
			// conditions-aware caller too, with the same decision.
			if c.attrs.User == bobCreatesPod.User {
				return
			}
			d := kcedarFirst.ConditionsAwareAuthorize(ctx, c.attrs)
			if !d.IsUnconditional() || !d.PossibleDecisions().Has(c.kcedarFirst) {
				t.Errorf("union ConditionsAwareAuthorize = %v; want unconditional %v", d, c.kcedarFirst)
			}
		})
	}
}

// TestUnionReasons checks the reasons kcedar gives through the union.
func TestUnionReasons(t *testing.T) {
	kcedarFirst, _ := chains(t, newKcedar(t, keyring(t)))
	ctx := context.Background()
	for _, c := range []struct {
		attrs authorizer.AttributesRecord
		want  string
	}{
		{resource(jane, "list", "pods", "dev", ""), "kcedar: allowed by policy dev-reads (developers read pods in dev)"},
		{resource(carl, "get", "secrets", "dev", "db"), "kcedar: denied by policy no-secrets-for-contractors"},
	} {
		if _, reason, _ := kcedarFirst.Authorize(ctx, c.attrs); reason != c.want {
			t.Errorf("%s %s: reason %q, want %q", c.attrs.User.GetName(), c.attrs.Verb, reason, c.want)
		}
	}
}

// podCreate is the admission data of a pod's creation, as k8s.io/apiserver
// hands it to EvaluateConditions: the typed, versioned object.
type podCreate struct {
	pod  *corev1.Pod
	user user.Info
}

var _ authorizer.ConditionsData = podCreate{}

func (p podCreate) GetName() string      { return p.pod.Name }
func (p podCreate) GetNamespace() string { return p.pod.Namespace }
func (p podCreate) GetResource() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "", Version: "v1", Resource: "pods"}
}
func (p podCreate) GetSubresource() string { return "" }
func (p podCreate) GetOperation() authorizer.AdmissionOperation {
	return authorizer.AdmissionOperation("CREATE")
}
func (p podCreate) GetOperationOptions() runtime.Object { return &metav1.CreateOptions{} }
func (p podCreate) IsDryRun() bool                      { return false }
func (p podCreate) GetObject() runtime.Object           { return p.pod }
func (p podCreate) GetOldObject() runtime.Object        { return nil }
func (p podCreate) GetKind() schema.GroupVersionKind {
	return corev1.SchemeGroupVersion.WithKind("Pod")
}
func (p podCreate) GetUserInfo() user.Info { return p.user }

// pod is a pod in namespace team scheduled on node.
func pod(node string) *corev1.Pod {
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team"},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
	}
}

// admissionCase is bob's pod creation in admission and what the conditions
// decide.
type admissionCase struct {
	name string
	data podCreate
	want authorizer.Decision
}

// admissionCases: on n1 the condition holds; on n2 it does not; a condition
// issued for bob does not verify for alice's request.
var admissionCases = []admissionCase{
	{"on n1", podCreate{pod("n1"), bob}, authorizer.DecisionAllow},
	{"on n2", podCreate{pod("n2"), bob}, authorizer.DecisionNoOpinion},
	{"on n1 as another user", podCreate{pod("n1"), alice}, authorizer.DecisionNoOpinion},
}

// TestConditionsThroughUnion: the union returns a Union holding kcedar's
// ConditionsMap, and upstream's union EvaluateConditions hands it back to
// kcedar with the admission data.
func TestConditionsThroughUnion(t *testing.T) {
	kc := newKcedar(t, keyring(t))
	kcedarFirst, mastersFirst := chains(t, kc)
	ctx := context.Background()

	d := kcedarFirst.ConditionsAwareAuthorize(ctx, bobCreatesPod)
	if !d.IsUnion() {
		t.Fatalf("union ConditionsAwareAuthorize = %v; want a Union", d)
	}
	var names []string
	for name, sub := range d.UnionedDecisions() {
		names = append(names, name)
		switch name {
		case "kcedar":
			checkConditionsMap(t, sub)
		case "masters":
			if !sub.IsNoOpinion() {
				t.Errorf("masters in the union: %v, want NoOpinion", sub)
			}
		}
	}
	if !slices.Equal(names, []string{"kcedar", "masters"}) {
		t.Errorf("union members %v, want [kcedar masters]", names)
	}
	if got, want := d.PossibleDecisions(), []authorizer.Decision{authorizer.DecisionAllow, authorizer.DecisionNoOpinion}; !got.HasAll(want...) || got.Len() != len(want) {
		t.Errorf("possible decisions %v, want %v", got.UnsortedList(), want)
	}

	for _, c := range admissionCases {
		got, reason, err := kcedarFirst.EvaluateConditions(ctx, d, c.data)
		if got != c.want {
			t.Errorf("%s: union EvaluateConditions = %v, %q, %v; want %v", c.name, got, reason, err, c.want)
		}
	}

	// Masters first: admin is allowed outright; bob's union evaluates the
	// same with kcedar second.
	if d := mastersFirst.ConditionsAwareAuthorize(ctx, resource(admin, "create", "pods", "team", "")); !d.IsAllow() {
		t.Errorf("masters first, admin: %v, want Allow", d)
	}
	d = mastersFirst.ConditionsAwareAuthorize(ctx, bobCreatesPod)
	for _, c := range admissionCases {
		if got, reason, err := mastersFirst.EvaluateConditions(ctx, d, c.data); got != c.want {
			t.Errorf("masters first, %s: union EvaluateConditions = %v, %q, %v; want %v", c.name, got, reason, err, c.want)
		}
	}
}

// TestConditionsInProcess: kcedar alone, and package residual's evaluator
// (no policy set), evaluate kcedar's conditions the same.
func TestConditionsInProcess(t *testing.T) {
	keys := keyring(t)
	kc := newKcedar(t, keys)
	ev, err := residual.NewEvaluator(newSchema(t), keys, nil)
	if err != nil {
		t.Fatal(err)
	}
	other, err := residual.NewEvaluator(newSchema(t), otherKeyring(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	d := kc.ConditionsAwareAuthorize(ctx, bobCreatesPod)
	checkConditionsMap(t, d)
	for _, c := range admissionCases {
		got, reason, err := kc.EvaluateConditions(ctx, d, c.data)
		if got != c.want {
			t.Errorf("%s: kcedar EvaluateConditions = %v, %q, %v; want %v", c.name, got, reason, err, c.want)
		}
		if got2, reason2, err2 := ev.EvaluateConditions(ctx, d, c.data); got2 != got || reason2 != reason || !sameError(err2, err) {
			t.Errorf("%s: residual evaluator = %v, %q, %v; kcedar = %v, %q, %v", c.name, got2, reason2, err2, got, reason, err)
		}
		// Conditions signed with another key do not verify: they are
		// refused, never allowed.
		if got, reason, _ := other.EvaluateConditions(ctx, d, c.data); got == authorizer.DecisionAllow {
			t.Errorf("%s: evaluator of another key allowed (%q)", c.name, reason)
		}
	}
}

func otherKeyring(t *testing.T) *residual.Keyring {
	t.Helper()
	k, err := residual.NewKeyring(residual.Key{ID: "other", Secret: []byte("another-secret-of-at-least-32-by")})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func sameError(a, b error) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Error() == b.Error()
}

// checkConditionsMap checks d is kcedar's ConditionsMap for bob's pod
// creation: one allow condition, of policy n1-only, of kcedar's type.
func checkConditionsMap(t *testing.T, d authorizer.ConditionsAwareDecision) {
	t.Helper()
	if !d.IsConditionsMap() {
		t.Fatalf("kcedar's decision %v, want a ConditionsMap", d)
	}
	m := d.ConditionsMap()
	allow := slices.Collect(m.AllowConditions())
	if n := m.Length(); n != 1 || len(allow) != 1 {
		t.Fatalf("conditions map of %d conditions, %d allow; want one allow condition", n, len(allow))
	}
	c := allow[0]
	if c.GetType() != residual.ConditionType || c.GetCondition() == "" || c.GetID() == "" {
		t.Errorf("allow condition id %q type %q condition %q; want type %q and a condition", c.GetID(), c.GetType(), c.GetCondition(), residual.ConditionType)
	}
}

// TestRulesFor: dev's rule in dev is get and list of pods.
func TestRulesFor(t *testing.T) {
	var kc authorizer.RuleResolver = newKcedar(t, keyring(t))
	rules, nonResource, _, err := union.NewRuleResolvers(kc).RulesFor(context.Background(), jane, "dev")
	if err != nil {
		t.Fatal(err)
	}
	if len(nonResource) != 0 {
		t.Errorf("non-resource rules %v, want none", nonResource)
	}
	found := false
	for _, r := range rules {
		if slices.Contains(r.GetResources(), "pods") && slices.Contains(r.GetAPIGroups(), "") {
			found = true
			verbs := slices.Sorted(slices.Values(r.GetVerbs()))
			if !slices.Equal(verbs, []string{"get", "list"}) {
				t.Errorf("dev's pods rule verbs %v, want [get list]", verbs)
			}
		}
	}
	if !found {
		t.Errorf("no rule for pods in dev: %v", rules)
	}
	// In prod jane holds nothing.
	rules, _, _, err = kc.RulesFor(context.Background(), jane, "prod")
	if err != nil || len(rules) != 0 {
		t.Errorf("rules in prod: %v, %v; want none", rules, err)
	}
}
