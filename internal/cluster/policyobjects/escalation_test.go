package policyobjects

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cedar-policy/cedar-go/types"
	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/testing/promtest"
	"github.com/kcedar/kcedar/internal/testing/schematest"
	"github.com/kcedar/kcedar/internal/testing/testgen"
	"github.com/kcedar/kcedar/internal/tools/offline"
)

// rbacReviewer answers SubjectAccessReviews with the reference RBAC
// authorizer over a writer's roles.
type rbacReviewer struct {
	rbac *testgen.RBACObjects
}

func (r *rbacReviewer) Allowed(_ context.Context, spec authorizationv1.SubjectAccessReviewSpec) (bool, error) {
	req := &entities.Request{User: entities.UserInfo{Name: spec.User, Groups: spec.Groups}}
	if ra := spec.ResourceAttributes; ra != nil {
		req.ResourceRequest = true
		req.Verb, req.APIGroup, req.Resource, req.Subresource, req.Namespace, req.Name = ra.Verb, ra.Group, ra.Resource, ra.Subresource, ra.Namespace, ra.Name
	} else {
		req.Verb, req.Path = spec.NonResourceAttributes.Verb, spec.NonResourceAttributes.Path
	}
	ok, _ := r.rbac.Allows(req)
	return ok, nil
}

// The universe the property test decides: the resources, verbs, names and
// namespaces its policies and roles are drawn from.
type universeResource struct {
	entityType           types.EntityType
	group, resource, sub string
	namespaced           bool
}

var (
	uResources = []universeResource{
		{"core::pods", "", "pods", "", true},
		{"core::secrets", "", "secrets", "", true},
		{"core::configmaps", "", "configmaps", "", true},
		{"core::pods_exec", "", "pods", "exec", true},
		{"apps::deployments", "apps", "deployments", "", true},
	}
	uVerbs      = []string{"get", "list", "create", "delete"}
	uNames      = []string{"web", "db"}
	uNamespaces = []string{"team-a", "team-b"}
	writer      = authenticationv1.UserInfo{Username: "lead", Groups: []string{"leads", "system:authenticated"}}
)

// genRole draws the writer's rights: rules in team-a, and sometimes a
// cluster-wide rule, escalate on the policy kinds, or "*" verbs.
func genRole(rng *rand.Rand) *testgen.RBACObjects {
	o := &testgen.RBACObjects{}
	rule := func() rbacv1.PolicyRule {
		var r rbacv1.PolicyRule
		for _, v := range uVerbs {
			if rng.Intn(2) == 0 {
				r.Verbs = append(r.Verbs, v)
			}
		}
		if rng.Intn(8) == 0 {
			r.Verbs = []string{"*"}
		}
		res := uResources[rng.Intn(len(uResources))]
		r.APIGroups = []string{res.group}
		name := res.resource
		if res.sub != "" {
			name += "/" + res.sub
		}
		r.Resources = []string{name}
		if rng.Intn(4) == 0 {
			r.ResourceNames = []string{uNames[rng.Intn(len(uNames))]}
		}
		return r
	}
	role := rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "lead", Namespace: "team-a"}}
	for i := rng.Intn(5); i >= 0; i-- {
		role.Rules = append(role.Rules, rule())
	}
	if rng.Intn(10) == 0 {
		role.Rules = append(role.Rules, rbacv1.PolicyRule{Verbs: []string{"escalate"}, APIGroups: []string{Group}, Resources: []string{ResourceNamespaced}})
	}
	subjects := []rbacv1.Subject{{Kind: rbacv1.GroupKind, Name: "leads"}}
	o.Roles = append(o.Roles, role)
	o.RoleBindings = append(o.RoleBindings, rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "lead", Namespace: "team-a"}, Subjects: subjects, RoleRef: rbacv1.RoleRef{Kind: "Role", Name: "lead"}})
	if rng.Intn(3) == 0 {
		cr := rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "lead-wide"}, Rules: []rbacv1.PolicyRule{rule()}}
		o.ClusterRoles = append(o.ClusterRoles, cr)
		o.ClusterRoleBindings = append(o.ClusterRoleBindings, rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "lead-wide"}, Subjects: subjects, RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "lead-wide"}})
	}
	return o
}

// genPolicy draws a permit (or, when forbids, a forbid) whose reach is exact: scope verbs,
// `is` types (or a disjunction of them), and sometimes a pinned name.
func genPolicy(rng *rand.Rand, id int, forbids bool) string {
	effect := "permit"
	if forbids && rng.Intn(3) == 0 {
		effect = "forbid"
	}
	principal := []string{"principal", `principal in k8s::Group::"devs"`, `principal == k8s::User::"bob"`}[rng.Intn(3)]
	var action string
	switch rng.Intn(4) {
	case 0:
		action = "action"
	case 1:
		action = fmt.Sprintf(`action == k8s::Action::"%s"`, uVerbs[rng.Intn(len(uVerbs))])
	default:
		a, b := uVerbs[rng.Intn(len(uVerbs))], uVerbs[rng.Intn(len(uVerbs))]
		action = fmt.Sprintf(`action in [k8s::Action::"%s", k8s::Action::"%s"]`, a, b)
	}
	r1, r2 := uResources[rng.Intn(len(uResources))], uResources[rng.Intn(len(uResources))]
	resource := "resource is " + string(r1.entityType)
	var conds []string
	if rng.Intn(4) == 0 {
		resource = "resource"
		conds = append(conds, fmt.Sprintf("(resource is %s || resource is %s)", r1.entityType, r2.entityType))
	}
	if rng.Intn(3) == 0 {
		conds = append(conds, fmt.Sprintf(`resource has name && resource.name == "%s"`, uNames[rng.Intn(len(uNames))]))
	}
	annotations := fmt.Sprintf("@id(\"p%d\")\n", id)
	if rng.Intn(6) == 0 {
		annotations += "@enforcement(\"audit\")\n"
	}
	src := fmt.Sprintf("%s%s (%s, %s, %s)", annotations, effect, principal, action, resource)
	if len(conds) > 0 {
		src += " when { " + strings.Join(conds, " && ") + " }"
	}
	return src + ";\n"
}

// genWrite draws an object's old content (nil for a create) and new
// content (nil for a delete): an edit adds, drops, replaces or re-annotates
// policies.
func genWrite(rng *rand.Rand, forbids bool) (old, new []string) {
	id := 0
	next := func() string { id++; return genPolicy(rng, id, forbids) }
	if rng.Intn(4) > 0 {
		for i := rng.Intn(4); i >= 0; i-- {
			old = append(old, next())
		}
	}
	if old != nil && rng.Intn(6) == 0 {
		return old, nil
	}
	new = slices.Clone(old)
	for i := rng.Intn(3); i >= 0; i-- {
		switch k := rng.Intn(4); {
		case k == 0 || len(new) == 0:
			new = append(new, next())
		case k == 1:
			j := rng.Intn(len(new))
			new = slices.Delete(new, j, j+1)
		case k == 2:
			new[rng.Intn(len(new))] = next()
		default:
			j := rng.Intn(len(new))
			if strings.Contains(new[j], "audit") {
				new[j] = strings.Replace(new[j], "@enforcement(\"audit\")\n", "", 1)
			} else {
				new[j] = "@enforcement(\"audit\")\n" + new[j]
			}
		}
	}
	if new == nil {
		new = []string{}
	}
	return old, new
}

func parseAll(t *testing.T, srcs []string) []*cedarlang.Policy {
	t.Helper()
	if srcs == nil {
		return nil
	}
	ps, err := cedarlang.ParsePolicies("obj", []byte(strings.Join(srcs, "")))
	if err != nil {
		t.Fatalf("%v\n%s", err, strings.Join(srcs, ""))
	}
	return ps
}

// universe lists every request the test decides: each principal, verb
// ("*" too), resource, name ("" too) and namespace ("" too: every
// namespace).
func universe() []*entities.Request {
	var out []*entities.Request
	users := []entities.UserInfo{{Name: "bob", Groups: []string{"devs"}}, {Name: "carol"}}
	for _, u := range users {
		for _, v := range append(slices.Clone(uVerbs), "*") {
			for _, r := range uResources {
				for _, n := range append([]string{""}, uNames...) {
					for _, ns := range append([]string{""}, uNamespaces...) {
						out = append(out, &entities.Request{User: u, Verb: v, ResourceRequest: true, APIGroup: r.group, Resource: r.resource, Subresource: r.sub, Namespace: ns, Name: n})
					}
				}
			}
		}
	}
	return out
}

// reaches is the requests of the universe that p, served alone from an
// object of kind in ns, decides with its own effect: what an added permit
// grants, or what a removed forbid gives back.
func reaches(t *testing.T, s *schemagen.Schema, p *cedarlang.Policy, kind, ns string, reqs []*entities.Request) []*entities.Request {
	t.Helper()
	ps := []*cedarlang.Policy{p}
	if p.Effect == types.Forbid {
		// A forbid decides only where something else would allow.
		everyone, err := cedarlang.ParsePolicies("everyone", []byte(`@id("everyone") permit(principal, action, resource);`))
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, everyone...)
	}
	if kind == KindNamespaced {
		var err error
		if ps, err = cedarlang.ConfineToNamespace(ps, ns, "obj/"); err != nil {
			t.Fatal(err)
		}
	}
	set, err := cedarlang.NewPolicySet(ps)
	if err != nil {
		t.Fatal(err)
	}
	d := offline.NewDecider(s, set)
	want := "Allow"
	if p.Effect == types.Forbid {
		want = "Deny"
	}
	var out []*entities.Request
	for _, r := range reqs {
		// A conditional decision grants too: under admission enforcement
		// it is an Allow whose conditions admission checks later. An open
		// namespace is left out: admission checks the request's own, and
		// the universe has each namespace (an open name stays: a create's
		// name is open when it is authorized).
		if got := d.Decide(r, nil).Decision; got == want || got == "Conditional" && r.Namespace != "" {
			out = append(out, r)
		}
	}
	return out
}

// genObjectWrite draws a write of a policy object as the webhook gets it:
// content as genWrite draws it, and sometimes owner references added, kept
// or dropped with the content unchanged.
func genObjectWrite(rng *rand.Rand, forbids bool) (op admissionv1.Operation, old, new []string, oldOwners, newOwners int) {
	old, new = genWrite(rng, forbids)
	switch {
	case new == nil:
		return admissionv1.Delete, old, nil, rng.Intn(2), 0
	case old == nil:
		return admissionv1.Create, nil, new, 0, rng.Intn(2)
	}
	oldOwners = rng.Intn(2)
	if rng.Intn(2) == 0 {
		new = slices.Clone(old) // a metadata-only update
	}
	return admissionv1.Update, old, new, oldOwners, oldOwners + rng.Intn(2) - rng.Intn(2)*oldOwners
}

// policyObjectRaw is an object of kind holding srcs, with n owner references.
func policyObjectRaw(kind, ns string, srcs []string, n int) runtime.RawExtension {
	meta := map[string]any{"name": "obj"}
	if ns != "" {
		meta["namespace"] = ns
	}
	var owners []any
	for i := 0; i < n; i++ {
		owners = append(owners, map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "name": fmt.Sprintf("owner-%d", i), "uid": fmt.Sprintf("uid-%d", i)})
	}
	if owners != nil {
		meta["ownerReferences"] = owners
	}
	raw, _ := json.Marshal(map[string]any{"apiVersion": GroupVersion.String(), "kind": kind, "metadata": meta, "spec": map[string]any{"content": strings.Join(srcs, "")}})
	return runtime.RawExtension{Raw: raw}
}

// TestEscalationPropertyMetadata draws writes through the admission webhook,
// owner references included, and checks that an accepted write that adds
// an owner reference (so that the garbage collector may delete the object)
// came from a writer who could delete the object: delete on it, and every
// request an enforced forbid of its content blocks. Content is checked as
// in TestEscalationProperty.
func TestEscalationPropertyMetadata(t *testing.T) {
	s := schematest.Schema()
	rng := rand.New(rand.NewSource(31))
	reqs := universe()
	counts := map[string]int{}
	for i := 0; i < 200; i++ {
		rbac := genRole(rng)
		if rng.Intn(2) == 0 {
			rbac.ClusterRoles = append(rbac.ClusterRoles, rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "deleter"},
				Rules: []rbacv1.PolicyRule{{Verbs: []string{"delete"}, APIGroups: []string{Group}, Resources: []string{ResourceCluster, ResourceNamespaced}}}})
			rbac.ClusterRoleBindings = append(rbac.ClusterRoleBindings, rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "deleter"},
				Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, Name: "leads"}}, RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "deleter"}})
		}
		rev := &rbacReviewer{rbac: rbac}
		kind, ns := KindCluster, ""
		if rng.Intn(4) == 0 {
			kind, ns = KindNamespaced, "team-a"
		}
		op, oldSrc, newSrc, oldOwners, newOwners := genObjectWrite(rng, kind == KindCluster)
		req := &admissionv1.AdmissionRequest{UID: "u", Kind: metav1.GroupVersionKind{Group: Group, Version: Version, Kind: kind},
			Namespace: ns, Name: "obj", Operation: op, UserInfo: writer}
		if oldSrc != nil {
			req.OldObject = policyObjectRaw(kind, ns, oldSrc, oldOwners)
		}
		if newSrc != nil {
			req.Object = policyObjectRaw(kind, ns, newSrc, newOwners)
		}
		h := &AdmissionHandler{Checker: testChecker(t), Logger: quietLogger(), Escalation: &EscalationCheck{Reviewer: rev}}
		resp := h.Review(context.Background(), req)
		if !resp.Allowed && strings.Contains(resp.Result.Message, "invalid Cedar policies") {
			counts["invalid"]++
			continue
		}
		w := write{kind: kind, namespace: ns, name: "obj", old: parseAll(t, oldSrc), new: parseAll(t, newSrc)}
		beyond := writeBeyond(t, s, rbac, w, reqs)
		if newOwners > oldOwners || op == admissionv1.Create && newOwners > 0 {
			deleteSpec := userSpec(writer)
			deleteSpec.ResourceAttributes = &authorizationv1.ResourceAttributes{Verb: "delete", Group: Group, Resource: w.resource(), Namespace: ns, Name: "obj"}
			if ok, _ := rev.Allowed(context.Background(), deleteSpec); !ok {
				beyond = append(beyond, "delete of the object")
			}
			beyond = append(beyond, writeBeyond(t, s, rbac, write{kind: kind, namespace: ns, name: "obj", old: w.new}, reqs)...)
		}
		content := fmt.Sprintf("%s owners %d -> %d\nold:\n%s\nnew:\n%s\nroles: %+v", op, oldOwners, newOwners, strings.Join(oldSrc, ""), strings.Join(newSrc, ""), rbac)
		switch {
		case resp.Allowed && len(beyond) > 0 && !holdsEscalate(rev, w) && !slices.Contains(beyond, "delete of the object"):
			t.Fatalf("case %d: accepted, but the write takes %v\n%s", i, beyond, content)
		case resp.Allowed && slices.Contains(beyond, "delete of the object"):
			t.Fatalf("case %d: accepted an owner reference from a writer who may not delete the object\n%s", i, content)
		case !resp.Allowed && len(beyond) == 0:
			t.Fatalf("case %d: refused, but the write takes nothing beyond the writer's rights: %s\n%s", i, resp.Result.Message, content)
		}
		counts[fmt.Sprintf("%s allowed=%v owners-added=%v", op, resp.Allowed, newOwners > oldOwners)]++
	}
	t.Logf("%v", counts)
	for _, k := range []string{"UPDATE allowed=true owners-added=true", "UPDATE allowed=false owners-added=true", "UPDATE allowed=true owners-added=false"} {
		if counts[k] < 5 {
			t.Fatalf("%v: the generator must draw %q", counts, k)
		}
	}
}

func holdsEscalate(rev *rbacReviewer, w write) bool {
	ok, _ := rev.Allowed(context.Background(), (&EscalationCheck{}).escalateSpec(writer, w))
	return ok
}

// writeBeyond is what w gives (its added or changed enforced permits, its
// removed or changed enforced forbids) that RBAC does not allow the writer,
// over the universe reqs.
func writeBeyond(t *testing.T, s *schemagen.Schema, rbac *testgen.RBACObjects, w write, reqs []*entities.Request) []string {
	t.Helper()
	var beyond []string
	given := append(added(w.new, w.old, types.Permit), added(w.old, w.new, types.Forbid)...)
	for _, p := range given {
		for _, r := range reaches(t, s, p, w.kind, w.namespace, reqs) {
			asWriter := *r
			asWriter.User = entities.UserInfo{Name: writer.Username, Groups: writer.Groups}
			if ok, _ := rbac.Allows(&asWriter); !ok {
				beyond = append(beyond, fmt.Sprintf("%s gives %s %s/%s %q in %q", p.ID, r.Verb, r.Resource, r.Subresource, r.Name, r.Namespace))
			}
		}
	}
	return beyond
}

// TestEscalationProperty draws writers' RBAC, policy objects and edits,
// checks each write, and compares with what the write's policies, served
// alone, decide over a finite universe of requests:
//   - an accepted write takes nothing beyond the writer's rights: every
//     request an added or changed enforced permit grants, or a removed or
//     changed enforced forbid gave back, is one RBAC allows the writer;
//   - a refused write would have: one of those requests is one RBAC does
//     not allow the writer (unless the writer holds escalate, which is
//     never refused).
func TestEscalationProperty(t *testing.T) {
	s := schematest.Schema()
	rng := rand.New(rand.NewSource(21))
	reqs := universe()
	var accepted, refused int
	for i := 0; i < 150; i++ {
		rbac := genRole(rng)
		rev := &rbacReviewer{rbac: rbac}
		check := &EscalationCheck{Reviewer: rev}
		kind, ns := KindNamespaced, "team-a"
		if rng.Intn(3) == 0 {
			kind, ns = KindCluster, "" // namespaced objects hold only permits
		}
		oldSrc, newSrc := genWrite(rng, kind == KindCluster)
		w := write{kind: kind, namespace: ns, name: "obj", old: parseAll(t, oldSrc), new: parseAll(t, newSrc)}
		refusal := check.Check(context.Background(), writer, w, s)
		escalate, _ := rev.Allowed(context.Background(), check.escalateSpec(writer, w))
		var beyond []string
		given := append(added(w.new, w.old, types.Permit), added(w.old, w.new, types.Forbid)...)
		for _, p := range given {
			for _, r := range reaches(t, s, p, kind, ns, reqs) {
				asWriter := *r
				asWriter.User = entities.UserInfo{Name: writer.Username, Groups: writer.Groups}
				if ok, _ := rbac.Allows(&asWriter); !ok {
					beyond = append(beyond, fmt.Sprintf("%s gives %s %s/%s %q in %q", p.ID, r.Verb, r.Resource, r.Subresource, r.Name, r.Namespace))
				}
			}
		}
		content := fmt.Sprintf("old:\n%s\nnew:\n%s\nroles: %+v", strings.Join(oldSrc, ""), strings.Join(newSrc, ""), rbac)
		switch {
		case refusal == nil && len(beyond) > 0 && !escalate:
			t.Fatalf("case %d: accepted, but the write takes %v\n%s", i, beyond, content)
		case refusal != nil && escalate:
			t.Fatalf("case %d: refused though the writer holds escalate: %s\n%s", i, refusal.Message, content)
		case refusal != nil && len(beyond) == 0:
			t.Fatalf("case %d: refused, but the write takes nothing beyond the writer's rights: %s\n%s", i, refusal.Message, content)
		case refusal != nil:
			refused++
		default:
			accepted++
		}
	}
	t.Logf("%d accepted, %d refused", accepted, refused)
	if accepted < 20 || refused < 20 {
		t.Fatalf("%d accepted and %d refused: the generator must draw both", accepted, refused)
	}
}

// fixedReviewer allows exactly the SubjectAccessReviews allow accepts, and
// records them.
type fixedReviewer struct {
	allow func(authorizationv1.SubjectAccessReviewSpec) bool
	err   error
	mu    sync.Mutex
	seen  []string
}

func (f *fixedReviewer) Allowed(_ context.Context, spec authorizationv1.SubjectAccessReviewSpec) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if spec.Extra[entities.UnconditionalOnlyExtra] == nil {
		f.seen = append(f.seen, "without "+entities.UnconditionalOnlyExtra)
	}
	if ra := spec.ResourceAttributes; ra != nil {
		seen := strings.Join([]string{ra.Verb, ra.Group, ra.Resource, ra.Subresource, ra.Namespace, ra.Name}, "|")
		if fs := ra.FieldSelector; fs != nil {
			for _, r := range fs.Requirements {
				seen += fmt.Sprintf("|%s=%s", r.Key, strings.Join(r.Values, ","))
			}
		}
		f.seen = append(f.seen, seen)
	} else {
		f.seen = append(f.seen, "nonresource|"+spec.NonResourceAttributes.Verb+"|"+spec.NonResourceAttributes.Path)
	}
	if f.err != nil {
		return false, f.err
	}
	return f.allow(spec), nil
}

func denyAll(authorizationv1.SubjectAccessReviewSpec) bool { return false }

func TestEscalationCases(t *testing.T) {
	s := schematest.Schema()
	ps := func(src string) []*cedarlang.Policy { return parseAll(t, []string{src}) }
	secrets := `@id("grant-secrets") permit(principal, action == k8s::Action::"get", resource is core::secrets);`
	for _, tc := range []struct {
		name     string
		w        write
		rev      *fixedReviewer
		refused  string // substring of the refusal, "" for accepted
		wantSARs []string
	}{
		{name: "a new permit is checked in its namespace",
			w:        write{kind: KindNamespaced, namespace: "team-a", name: "o", new: ps(secrets)},
			rev:      &fixedReviewer{allow: denyAll},
			refused:  `permit "grant-secrets" (line 1) grants get core secrets in team-a`,
			wantSARs: []string{"escalate|kcedar.dev|namespacedcedarpolicies||team-a|o", "get||secrets||team-a|"}},
		{name: "an id change is not access",
			w:   write{kind: KindNamespaced, namespace: "team-a", name: "o", old: ps(secrets), new: ps(strings.Replace(secrets, "grant-secrets", "renamed", 1))},
			rev: &fixedReviewer{allow: denyAll}},
		{name: "an audit permit grants nothing",
			w:   write{kind: KindNamespaced, namespace: "team-a", name: "o", new: ps(`@enforcement("audit") ` + secrets)},
			rev: &fixedReviewer{allow: denyAll}},
		{name: "audit to enforce counts as adding",
			w:       write{kind: KindNamespaced, namespace: "team-a", name: "o", old: ps(`@enforcement("audit") ` + secrets), new: ps(secrets)},
			rev:     &fixedReviewer{allow: denyAll},
			refused: "grant-secrets"},
		{name: "escalate bypasses",
			w: write{kind: KindNamespaced, namespace: "team-a", name: "o", new: ps(secrets)},
			rev: &fixedReviewer{allow: func(s authorizationv1.SubjectAccessReviewSpec) bool {
				return s.ResourceAttributes.Verb == "escalate"
			}}},
		{name: "a cluster-wide grant is checked in every namespace, a pinned name by name",
			w:        write{kind: KindCluster, name: "o", new: ps(`@id("n") permit(principal, action == k8s::Action::"get", resource is core::pods) when { resource.name == "web" };`)},
			rev:      &fixedReviewer{allow: denyAll},
			refused:  `grants get core pods named web in every namespace`,
			wantSARs: []string{"escalate|kcedar.dev|cedarpolicies|||o", "get||pods|||web"}},
		{name: "every type and verb needs *",
			w:        write{kind: KindCluster, name: "o", new: ps(`@id("all") permit(principal, action, resource);`)},
			rev:      &fixedReviewer{allow: denyAll},
			refused:  "grants every verb on every resource in every namespace",
			wantSARs: []string{"escalate|kcedar.dev|cedarpolicies|||o", "*|*|*|||", "nonresource|*|*"}},
		{name: "k8s::Resource needs *",
			w:        write{kind: KindCluster, name: "o", new: ps(`@id("generic") permit(principal, action == k8s::Action::"get", resource is k8s::Resource);`)},
			rev:      &fixedReviewer{allow: denyAll},
			wantSARs: []string{"escalate|kcedar.dev|cedarpolicies|||o", "get|*|*|||"},
			refused:  "generic"},
		{name: "a non-resource URL by its path",
			w:        write{kind: KindCluster, name: "o", new: ps(`@id("metrics") permit(principal, action == k8s::Action::"get", resource is k8s::NonResourceURL) when { resource.path == "/metrics" };`)},
			rev:      &fixedReviewer{allow: denyAll},
			refused:  "non-resource URL /metrics",
			wantSARs: []string{"escalate|kcedar.dev|cedarpolicies|||o", "nonresource|get|/metrics"}},
		{name: "deleting a forbid gives back what it blocked",
			w:       write{kind: KindCluster, name: "o", old: ps(`@id("no-delete") forbid(principal, action == k8s::Action::"delete", resource is core::pods);`)},
			rev:     &fixedReviewer{allow: denyAll},
			refused: `removing forbid "no-delete" (line 1) gives back delete core pods in every namespace`},
		{name: "adding an unless to a forbid narrows it",
			w:       write{kind: KindCluster, name: "o", old: ps(`@id("f") forbid(principal, action == k8s::Action::"delete", resource is core::pods);`), new: ps(`@id("f") forbid(principal, action == k8s::Action::"delete", resource is core::pods) unless { principal in k8s::Group::"admins" };`)},
			rev:     &fixedReviewer{allow: denyAll},
			refused: `removing forbid "f"`},
		{name: "names as authorization sees them: none on a create or a deletecollection, a list's by its field selector, a subresource's parent's (pods/exec)",
			w: write{kind: KindNamespaced, namespace: "team-a", name: "o", new: ps(`@id("named") permit(principal, action in [k8s::Action::"create", k8s::Action::"deletecollection", k8s::Action::"list", k8s::Action::"get"], resource is core::configmaps) when { resource.name == "app-config" };
@id("exec") permit(principal, action == k8s::Action::"create", resource is core::pods_exec) when { resource.name == "web" };`)},
			rev:     &fixedReviewer{allow: namedOnly},
			refused: `permit "named" (line 1) grants create core configmaps in team-a; permit "named" (line 1) grants deletecollection core configmaps in team-a`,
			wantSARs: []string{"escalate|kcedar.dev|namespacedcedarpolicies||team-a|o", "create||configmaps||team-a|", "deletecollection||configmaps||team-a|",
				"list||configmaps||team-a|app-config|metadata.name=app-config", "get||configmaps||team-a|app-config", "create||pods|exec|team-a|web"}},
		{name: "every verb on a name needs the unnamed create and deletecollection it grants",
			w:        write{kind: KindNamespaced, namespace: "team-a", name: "o", new: ps(`@id("all-on-name") permit(principal, action, resource is core::configmaps) when { resource.name == "app-config" };`)},
			rev:      &fixedReviewer{allow: namedOnly},
			refused:  `grants create core configmaps in team-a`,
			wantSARs: []string{"escalate|kcedar.dev|namespacedcedarpolicies||team-a|o", "*||configmaps||team-a|app-config", "create||configmaps||team-a|", "deletecollection||configmaps||team-a|"}},
		{name: "a failing check refuses",
			w:       write{kind: KindNamespaced, namespace: "team-a", name: "o", new: ps(secrets)},
			rev:     &fixedReviewer{err: fmt.Errorf("connection refused")},
			refused: "checking your own rights failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := (&EscalationCheck{Reviewer: tc.rev}).Check(context.Background(), writer, tc.w, s)
			switch {
			case tc.refused == "" && r != nil:
				t.Fatalf("refused: %s", r.Message)
			case tc.refused != "" && r == nil:
				t.Fatal("accepted")
			case tc.refused != "" && !strings.Contains(r.Message, tc.refused):
				t.Fatalf("refusal %q does not say %q", r.Message, tc.refused)
			}
			if tc.wantSARs == nil {
				return
			}
			slices.Sort(tc.rev.seen[1:]) // the escalate check first, then the rest in parallel
			slices.Sort(tc.wantSARs[1:])
			if !slices.Equal(tc.rev.seen, tc.wantSARs) {
				t.Fatalf("checks %q, want %q", tc.rev.seen, tc.wantSARs)
			}
		})
	}
}

// More than MaxEscalationChecks checks refuse the write without sending
// them, and at most 10 missing permissions are listed.
func TestEscalationBounds(t *testing.T) {
	s := schematest.Schema()
	var src []string
	for i := 0; i < 130; i++ {
		src = append(src, fmt.Sprintf(`@id("p%d") permit(principal, action in [k8s::Action::"get", k8s::Action::"list"], resource is core::pods) when { resource.name == "n%d" };`+"\n", i, i))
	}
	rev := &fixedReviewer{allow: denyAll}
	r := (&EscalationCheck{Reviewer: rev}).Check(context.Background(), writer, write{kind: KindNamespaced, namespace: "team-a", name: "o", new: parseAll(t, src)}, s)
	if r == nil || r.Reason != "too-many-checks" || len(rev.seen) != 1 {
		t.Fatalf("%+v after %d checks", r, len(rev.seen))
	}
	// One policy reaching thousands of names and every verb: refused without
	// listing them all.
	var names []string
	for i := 0; i < 5000; i++ {
		names = append(names, fmt.Sprintf(`"n%d"`, i))
	}
	wide := fmt.Sprintf(`@id("wide") permit(principal, action, resource) when { (resource is core::pods || resource is core::secrets) && [%s].contains(resource.name) };`, strings.Join(names, ","))
	rev = &fixedReviewer{allow: denyAll}
	r = (&EscalationCheck{Reviewer: rev}).Check(context.Background(), writer, write{kind: KindCluster, name: "o", new: parseAll(t, []string{wide})}, s)
	if r == nil || r.Reason != "too-many-checks" {
		t.Fatalf("wide: %+v", r)
	}
	rev = &fixedReviewer{allow: denyAll}
	r = (&EscalationCheck{Reviewer: rev}).Check(context.Background(), writer, write{kind: KindNamespaced, namespace: "team-a", name: "o", new: parseAll(t, src[:20])}, s)
	if r == nil || strings.Count(r.Message, "grants ") != 10 || !strings.Contains(r.Message, "and 30 more") {
		t.Fatalf("%+v", r)
	}
}

// The webhook checks creates, updates whose content changes, and deletes,
// and counts its refusals by reason.
func TestAdmissionEscalation(t *testing.T) {
	var logged []RefusedWrite
	h := &AdmissionHandler{Checker: testChecker(t), Logger: quietLogger(), Escalation: &EscalationCheck{Reviewer: &fixedReviewer{allow: denyAll}},
		OnRefused: func(r RefusedWrite) { logged = append(logged, r) }}
	obj := func(content string) runtime.RawExtension {
		raw, _ := json.Marshal(map[string]any{"apiVersion": GroupVersion.String(), "kind": KindCluster, "metadata": map[string]any{"name": "o", "labels": map[string]any{"x": content[:1]}}, "spec": map[string]any{"content": content}})
		return runtime.RawExtension{Raw: raw}
	}
	forbid := `@id("no-delete") forbid(principal, action == k8s::Action::"delete", resource is core::pods);`
	grant := `@id("grant") permit(principal, action == k8s::Action::"get", resource is core::pods);`
	req := func(op admissionv1.Operation, old, new string) *admissionv1.AdmissionRequest {
		r := &admissionv1.AdmissionRequest{UID: "u", Kind: metav1.GroupVersionKind{Group: Group, Version: Version, Kind: KindCluster}, Name: "o", Operation: op, UserInfo: writer}
		if old != "" {
			r.OldObject = obj(old)
		}
		if new != "" {
			r.Object = obj(new)
		}
		return r
	}
	for _, tc := range []struct {
		name    string
		req     *admissionv1.AdmissionRequest
		allowed bool
	}{
		{"create a grant", req(admissionv1.Create, "", grant), false},
		{"create a forbid", req(admissionv1.Create, "", forbid), true},
		{"update to a grant", req(admissionv1.Update, forbid, grant), false},
		{"update that leaves the content", req(admissionv1.Update, grant, grant), true},
		{"delete a forbid", req(admissionv1.Delete, forbid, ""), false},
		{"delete a grant", req(admissionv1.Delete, grant, ""), true},
	} {
		if r := h.Review(context.Background(), tc.req); r.Allowed != tc.allowed {
			t.Errorf("%s: allowed %v (%v), want %v", tc.name, r.Allowed, r.Result, tc.allowed)
		}
	}
	if len(logged) != 3 || logged[0].Reason != "escalation" || logged[0].User.Username != writer.Username || !strings.Contains(logged[2].Message, "removing forbid") {
		t.Errorf("the decision log was told of %+v, want the 3 refusals", logged)
	}
	reg := prometheus.NewPedanticRegistry()
	if err := h.RegisterMetrics(reg); err != nil {
		t.Fatal(err)
	}
	for _, op := range []string{"CREATE", "UPDATE", "DELETE"} {
		got := promtest.Value(t, reg, "kcedar_policy_write_refusals_total", map[string]string{"operation": op, "reason": "escalation"})
		if got != 1 {
			t.Errorf("escalation refusals of %s: %v, want 1", op, got)
		}
	}
}

// namedOnly allows what an RBAC rule listing resourceNames allows: a named
// request (never escalate).
func namedOnly(s authorizationv1.SubjectAccessReviewSpec) bool {
	return s.ResourceAttributes.Name != "" && s.ResourceAttributes.Verb != "escalate"
}

// An owner reference lets the garbage collector delete the object, so
// adding one (on a create or an update, whatever the content does) needs
// what deleting the object needs; keeping, dropping or relabelling does
// not.
func TestAdmissionOwnerReferences(t *testing.T) {
	forbid := []string{`@id("no-secrets") forbid(principal, action, resource is core::secrets);`}
	mayDelete := func(s authorizationv1.SubjectAccessReviewSpec) bool {
		return s.ResourceAttributes.Verb == "delete" && s.ResourceAttributes.Group == Group
	}
	holdsAll := func(authorizationv1.SubjectAccessReviewSpec) bool { return true }
	req := func(op admissionv1.Operation, oldOwners, newOwners int) *admissionv1.AdmissionRequest {
		r := &admissionv1.AdmissionRequest{UID: "u", Kind: metav1.GroupVersionKind{Group: Group, Version: Version, Kind: KindCluster}, Name: "obj", Operation: op, UserInfo: writer,
			Object: policyObjectRaw(KindCluster, "", forbid, newOwners)}
		if op == admissionv1.Update {
			r.OldObject = policyObjectRaw(KindCluster, "", forbid, oldOwners)
		}
		return r
	}
	for _, tc := range []struct {
		name    string
		req     *admissionv1.AdmissionRequest
		allow   func(authorizationv1.SubjectAccessReviewSpec) bool
		refused string
	}{
		{"an owner added by a writer who may not delete", req(admissionv1.Update, 0, 1), denyAll, "you may not delete CedarPolicy/obj"},
		{"an owner added by a writer who may delete but not what the forbid blocks", req(admissionv1.Update, 0, 1), mayDelete, `removing forbid "no-secrets"`},
		{"an owner added by a writer who holds it all", req(admissionv1.Update, 0, 1), holdsAll, ""},
		{"a create with an owner", req(admissionv1.Create, 0, 1), denyAll, "lets the garbage collector delete CedarPolicy/obj"},
		{"owners kept", req(admissionv1.Update, 1, 1), denyAll, ""},
		{"an owner dropped", req(admissionv1.Update, 1, 0), denyAll, ""},
		{"a create without owners", req(admissionv1.Create, 0, 0), denyAll, ""},
	} {
		rev := &fixedReviewer{allow: tc.allow}
		h := &AdmissionHandler{Checker: testChecker(t), Logger: quietLogger(), Escalation: &EscalationCheck{Reviewer: rev}}
		resp := h.Review(context.Background(), tc.req)
		switch {
		case tc.refused == "" && !resp.Allowed:
			t.Errorf("%s: refused: %s", tc.name, resp.Result.Message)
		case tc.refused != "" && resp.Allowed:
			t.Errorf("%s: accepted", tc.name)
		case tc.refused != "" && !strings.Contains(resp.Result.Message, tc.refused):
			t.Errorf("%s: the refusal %q does not say %q", tc.name, resp.Result.Message, tc.refused)
		}
		if slices.Contains(rev.seen, "without "+entities.UnconditionalOnlyExtra) {
			t.Errorf("%s: a check asked without %s", tc.name, entities.UnconditionalOnlyExtra)
		}
	}
}

// A grant of the verbs of constrained impersonation is checked like any
// other: the writer needs impersonate:<mode> on the authentication.k8s.io
// identity it grants, impersonate-on:<mode>:<verb> on the resource; a grant of
// a mode's whole group needs every verb ("*") on what it reaches.
func TestEscalationImpersonation(t *testing.T) {
	s := schematest.Schema()
	s.AddImpersonation()
	ps := func(src string) []*cedarlang.Policy { return parseAll(t, []string{src}) }
	for _, tc := range []struct {
		name, src, refused string
		wantSARs           []string
	}{
		{name: "identity", src: `@id("as-foo") permit(principal, action == k8s::Action::"impersonate:arbitrary-node", resource is io::k8s::authentication::nodes) when { resource.name == "foo" };`,
			refused:  `grants impersonate:arbitrary-node nodes.authentication.k8s.io named foo`,
			wantSARs: []string{"escalate|kcedar.dev|cedarpolicies|||o", "impersonate:arbitrary-node|authentication.k8s.io|nodes|||foo"}},
		{name: "request", src: `@id("get-pods") permit(principal, action == k8s::Action::"impersonate-on:arbitrary-node:get", resource is core::pods);`,
			refused:  `grants impersonate-on:arbitrary-node:get core pods`,
			wantSARs: []string{"escalate|kcedar.dev|cedarpolicies|||o", "impersonate-on:arbitrary-node:get||pods|||"}},
		{name: "group", src: `@id("any") permit(principal, action in k8s::Action::"impersonate-on:user-info:*", resource is core::pods);`,
			refused:  `grants every verb on core pods`,
			wantSARs: []string{"escalate|kcedar.dev|cedarpolicies|||o", "*||pods|||"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rev := &fixedReviewer{allow: denyAll}
			r := (&EscalationCheck{Reviewer: rev}).Check(context.Background(), writer, write{kind: KindCluster, name: "o", new: ps(tc.src)}, s)
			if r == nil || !strings.Contains(r.Message, tc.refused) {
				t.Fatalf("refusal %v, want one saying %q", r, tc.refused)
			}
			slices.Sort(rev.seen[1:])
			slices.Sort(tc.wantSARs[1:])
			if !slices.Equal(rev.seen, tc.wantSARs) {
				t.Fatalf("checks %q, want %q", rev.seen, tc.wantSARs)
			}
		})
	}
}
