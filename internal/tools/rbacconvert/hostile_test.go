package rbacconvert

import (
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/cedar-policy/cedar-go/types"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/testing/embeddedschema"
)

// slots are the places of an RBAC configuration outside text can take:
// subject names of every kind, binding and role names, namespaces,
// resourceNames, nonResourceURLs, apiGroups, resources and verbs.
var slots = []string{"user", "group", "sa-name", "sa-namespace", "crb-name", "rb-name", "clusterrole-name", "role-name",
	"namespace", "resource-name", "url", "api-group", "resource", "verb"}

// benign is the name a slot holds in the twin conversion: a name the
// schema does not know, found nowhere else in the output.
const benign = "bEnIgN"

// fixture is a small configuration with v in slot (every other slot
// holds a plain name): a ClusterRole bound cluster-wide and in a
// namespace, a Role bound in its namespace, and an unrelated binding.
func fixture(slot, v string) *Input {
	at := func(s, def string) string {
		if s == slot {
			return v
		}
		return def
	}
	cr := at("clusterrole-name", "reader")
	role := at("role-name", "team-role")
	ns := at("namespace", "team-b")
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods", "configmaps"}, ResourceNames: []string{at("resource-name", "cfg"), "web"}, Verbs: []string{"get", at("verb", "frob")}},
		{APIGroups: []string{at("api-group", "example.com")}, Resources: []string{at("resource", "widgets"), "widgets/status"}, Verbs: []string{"list"}},
		{NonResourceURLs: []string{"/" + at("url", "api") + "/x", "/healthz/*"}, Verbs: []string{"get"}},
	}
	subjects := []rbacv1.Subject{
		{Kind: rbacv1.UserKind, Name: at("user", "carol")},
		{Kind: rbacv1.GroupKind, Name: at("group", "devs")},
		{Kind: rbacv1.ServiceAccountKind, Namespace: at("sa-namespace", "ci"), Name: at("sa-name", "builder")},
		{Kind: rbacv1.UserKind, Name: "alice"},
	}
	return &Input{
		ClusterRoles: []rbacv1.ClusterRole{{ObjectMeta: metav1.ObjectMeta{Name: cr}, Rules: rules},
			{ObjectMeta: metav1.ObjectMeta{Name: "other"}, Rules: []rbacv1.PolicyRule{{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get"}}}}},
		Roles: []rbacv1.Role{{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: role}, Rules: rules[:2]}},
		ClusterRoleBindings: []rbacv1.ClusterRoleBinding{
			{ObjectMeta: metav1.ObjectMeta{Name: at("crb-name", "readers")}, RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: cr}, Subjects: subjects},
			{ObjectMeta: metav1.ObjectMeta{Name: "unrelated"}, RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "other"}, Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "dave"}}},
		},
		RoleBindings: []rbacv1.RoleBinding{
			{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: at("rb-name", "readers")}, RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: cr},
				Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "bob"}, {Kind: rbacv1.ServiceAccountKind, Name: "deployer"}}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "team"}, RoleRef: rbacv1.RoleRef{Kind: "Role", Name: role}, Subjects: subjects[:2]},
		},
	}
}

// hostilePieces are what hostile names are made of: the line breaks of
// every reader, quotes, backslashes, comment delimiters, NUL, invalid
// UTF-8, bidirectional controls and whole policies.
var hostilePieces = []string{
	"\n", "\r", "\r\n", "\u2028", "\u2029", "\u0085", `"`, `\`, `\"`, "*/", "/*", "//", "\x00", "\xff", "\xc3", "\xed\xa0\x80",
	"\n@id(\"p\") permit (principal, action, resource);\n", "\"; permit (principal, action, resource); //", ";", "}", ")",
	"ünï", "\u202e", "\t", " ", ":", "/", "*", "\v", "\f", "\ufeff", "@",
}

// hostileName draws a name of hostile pieces (after an "x", so that it is
// never empty nor one of RBAC's "*"), now and then a very long one.
func hostileName(r *rand.Rand) string {
	var b strings.Builder
	b.WriteString("x")
	for range 1 + r.IntN(5) {
		b.WriteString(hostilePieces[r.IntN(len(hostilePieces))])
	}
	if r.IntN(25) == 0 {
		b.WriteString(strings.Repeat("y", 20000))
	}
	return b.String()
}

// checkHostile converts the fixture with h in slot and with the benign
// name, and checks that h changed nothing but string contents: the
// conversion succeeds; with h valid UTF-8, every policy is the benign
// one with the benign name's text replaced by h's, quoted (the same
// syntax: h never left a string literal); with h not valid UTF-8, the
// policies naming it are skipped, with a warning that says why, and the
// others are the benign ones (in any order: bindings are written in the
// order of their names). ServiceAccount subjects whose name or
// namespace Kubernetes would not accept are Users to kcedar (so is a
// request's user of that name), the one change of type allowed.
func checkHostile(t *testing.T, s *schemagen.Schema, slot, h string) {
	t.Helper()
	if slot == "resource" {
		// RBAC reads a "/" in a rule's resource as the start of a
		// subresource: not the same rule as the benign one.
		h = strings.ReplaceAll(h, "/", "")
	}
	want := benignConversion(t, s, slot)
	got, err := Convert(s, fixture(slot, h))
	if err != nil {
		t.Fatalf("slot %s, name %q: %v", slot, h, err)
	}
	wantTexts, gotTexts := policyTexts(t, want.Policies), policyTexts(t, got.Policies)
	if len(gotTexts) != got.Count {
		t.Fatalf("slot %s, name %q: %d policies parsed, %d counted", slot, h, len(gotTexts), got.Count)
	}
	if !utf8.ValidString(h) {
		wantTexts = slices.DeleteFunc(wantTexts, func(w string) bool { return strings.Contains(w, benign) })
		if !slices.ContainsFunc(got.Warnings, func(w string) bool { return strings.Contains(w, "not valid UTF-8") }) {
			t.Errorf("slot %s, name %q: no warning on the skipped permits:\n%s", slot, h, strings.Join(got.Warnings, "\n"))
		}
	} else {
		quoted := string(types.String(h).MarshalCedar())
		for i, w := range wantTexts {
			wantTexts[i] = strings.ReplaceAll(w, benign, quoted[1:len(quoted)-1])
		}
	}
	if slot == "sa-name" || slot == "sa-namespace" || slot == "namespace" {
		// A ServiceAccount's username is a ServiceAccount only when its
		// namespace and name are valid (a RoleBinding's namespace is its
		// subjects' default): the twin's benign name is not, and the
		// hostile one may be.
		for _, texts := range [][]string{wantTexts, gotTexts} {
			for i, w := range texts {
				texts[i] = strings.ReplaceAll(w, `k8s::ServiceAccount::"`, `k8s::User::"`)
			}
		}
	}
	// Bindings are written in the order of their names: compare as sets.
	slices.Sort(wantTexts)
	slices.Sort(gotTexts)
	if len(gotTexts) != len(wantTexts) {
		t.Fatalf("slot %s, name %q: %d policies, want %d\n%s", slot, h, len(gotTexts), len(wantTexts), got.Policies)
	}
	for i := range gotTexts {
		if shape(gotTexts[i]) != shape(wantTexts[i]) {
			t.Fatalf("slot %s, name %q: policy %d has another syntax:\n%s\nwant the shape of\n%s", slot, h, i, gotTexts[i], wantTexts[i])
		}
		if gotTexts[i] != wantTexts[i] {
			t.Fatalf("slot %s, name %q: policy %d is\n%s\nwant\n%s", slot, h, i, gotTexts[i], wantTexts[i])
		}
	}
	for _, w := range got.Warnings {
		if strings.ContainsAny(w, "\n\r\u2028\u2029\u0085") || !utf8.ValidString(w) {
			t.Fatalf("slot %s, name %q: warning %q holds a line break or invalid UTF-8", slot, h, w)
		}
	}
}

// benignConversions are the fixture's conversions with the benign name,
// per slot.
var benignConversions sync.Map

// benignConversion is the fixture's conversion with the benign name in
// slot.
func benignConversion(t *testing.T, s *schemagen.Schema, slot string) *Result {
	t.Helper()
	if res, ok := benignConversions.Load(slot); ok {
		return res.(*Result)
	}
	res, err := Convert(s, fixture(slot, benign))
	if err != nil {
		t.Fatal(err)
	}
	benignConversions.Store(slot, res)
	return res
}

// policyTexts are the policies of text as cedar-go writes them.
func policyTexts(t *testing.T, text []byte) []string {
	t.Helper()
	ps, err := cedarlang.ParsePolicies("rbac.cedar", text)
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = string(p.Text())
	}
	return out
}

// shape is a policy's text as cedar-go writes it with every string
// literal replaced by "S".
func shape(text string) string {
	var b strings.Builder
	in := false
	for i := 0; i < len(text); i++ {
		switch c := text[i]; {
		case !in:
			b.WriteByte(c)
			in = c == '"'
		case c == '\\':
			i++
		case c == '"':
			b.WriteString(`S"`)
			in = false
		}
	}
	return b.String()
}

// TestHostileNamesStayStrings puts hostile names in every slot of an RBAC
// configuration: each stays the contents of string literals (or, not
// valid UTF-8, skips the permits that would need it, with a warning), and
// the rest of the conversion is the one a benign name gives.
func TestHostileNamesStayStrings(t *testing.T) {
	s := embeddedschema.Schema(t)
	r := rand.New(rand.NewPCG(9, 9))
	n := 25
	if testing.Short() {
		n = 10
	}
	for _, slot := range slots {
		for range n {
			checkHostile(t, s, slot, hostileName(r))
		}
	}
}

// The exploit of issue 42: a subject name that closes the `// subjects:`
// comment and opens a permit of everything. Kubernetes accepts any
// non-empty User subject name, newlines included.
const subjectExploit = "x\n@id(\"ns-viewers\") permit (principal, action, resource);\n"

func TestSubjectNameExploit(t *testing.T) {
	s := embeddedschema.Schema(t)
	in := &Input{
		ClusterRoles: []rbacv1.ClusterRole{{ObjectMeta: metav1.ObjectMeta{Name: "view-pods"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}}}},
		RoleBindings: []rbacv1.RoleBinding{{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "viewers"},
			RoleRef:  rbacv1.RoleRef{Kind: "ClusterRole", Name: "view-pods"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: subjectExploit}}}},
	}
	res, err := Convert(s, in)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := cedarlang.ParsePolicies("rbac.cedar", res.Policies)
	if err != nil {
		t.Fatalf("%v\n%s", err, res.Policies)
	}
	if len(ps) != 1 || ps[0].ID == "ns-viewers" || !strings.Contains(string(ps[0].Text()), `principal == k8s::User::"x\n@id`) {
		t.Fatalf("the subject name became policy text: %d policies\n%s", len(ps), res.Policies)
	}
}

// A name that would leave a comment unparseable (invalid UTF-8, NUL) beside
// a real subject: the real subject converts, the NUL stays a string, the
// invalid name is skipped with a warning. One namespace admin's binding
// does not block the migration of the cluster.
func TestUnparseableNameBesideARealSubject(t *testing.T) {
	s := embeddedschema.Schema(t)
	in := &Input{
		ClusterRoles: []rbacv1.ClusterRole{{ObjectMeta: metav1.ObjectMeta{Name: "view-pods"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}}}},
		RoleBindings: []rbacv1.RoleBinding{{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "viewers"},
			RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "view-pods"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "real-user"}, {Kind: rbacv1.UserKind, Name: "bad\xff"},
				{Kind: rbacv1.UserKind, Name: "nul\x00"}}}},
	}
	res, err := Convert(s, in)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := cedarlang.ParsePolicies("rbac.cedar", res.Policies)
	if err != nil {
		t.Fatalf("%v\n%s", err, res.Policies)
	}
	var principals []string
	for _, p := range ps {
		text := string(p.Text())
		principals = append(principals, text[strings.Index(text, "principal"):strings.Index(text, ",")])
	}
	if want := []string{`principal == k8s::User::"real-user"`, `principal == k8s::User::"nul\0"`}; !slices.Equal(principals, want) {
		t.Errorf("principals %q, want %q\n%s", principals, want, res.Policies)
	}
	if !slices.ContainsFunc(res.Warnings, func(w string) bool {
		return strings.Contains(w, `User/bad\xff`) && strings.Contains(w, "not valid UTF-8")
	}) {
		t.Errorf("no warning naming the skipped subject:\n%s", strings.Join(res.Warnings, "\n"))
	}
}

// Names with "/" (which Kubernetes refuses, but files may hold) can make
// two bindings' permit ids the same: the later one is skipped with a
// warning, never a duplicate id that would fail the whole file.
func TestCollidingIDsSkipTheLaterBinding(t *testing.T) {
	s := embeddedschema.Schema(t)
	rule := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}}
	in := &Input{
		Roles: []rbacv1.Role{{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "r"}, Rules: rule},
			{ObjectMeta: metav1.ObjectMeta{Namespace: "a/b", Name: "r"}, Rules: rule}},
		RoleBindings: []rbacv1.RoleBinding{
			{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "b/c"}, RoleRef: rbacv1.RoleRef{Kind: "Role", Name: "r"}, Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "u1"}}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: "a/b", Name: "c"}, RoleRef: rbacv1.RoleRef{Kind: "Role", Name: "r"}, Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "u2"}}},
		},
	}
	res, err := Convert(s, in)
	if err != nil {
		t.Fatal(err)
	}
	if res.Count != 1 || !strings.Contains(string(res.Policies), `"u1"`) {
		t.Errorf("%d policies:\n%s", res.Count, res.Policies)
	}
	if !slices.ContainsFunc(res.Warnings, func(w string) bool { return strings.Contains(w, "is already used") }) {
		t.Errorf("no warning on the skipped binding:\n%s", strings.Join(res.Warnings, "\n"))
	}
}

// FuzzConvertHostileName puts the fuzzed name in a slot of the fixture:
// checkHostile's properties hold for any name.
func FuzzConvertHostileName(f *testing.F) {
	for i, seed := range []string{subjectExploit, "x\r@id(\"p\") permit (principal, action, resource);", "x\u2028*/ /* //", "x\xff\x00\"\\"} {
		f.Add(uint8(i), seed)
	}
	// A valid namespace: its ServiceAccount subjects are ServiceAccounts.
	f.Add(uint8(slices.Index(slots, "namespace")), "")
	s := embeddedschema.Schema(f)
	f.Fuzz(func(t *testing.T, slot uint8, name string) {
		checkHostile(t, s, slots[int(slot)%len(slots)], "x"+name)
	})
}
