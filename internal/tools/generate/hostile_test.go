package generate

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/cedar-policy/cedar-go/types"
	authnv1 "k8s.io/api/authentication/v1"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/testing/embeddedschema"
)

// eventSlots are the places of an audit event outside text can take: in
// the URL (object names, namespaces, non-resource paths, resources, API
// groups: percent-decoded, so any byte) and in the user (usernames,
// groups, extra: JSON, so valid UTF-8).
var eventSlots = []string{"name", "namespace", "path", "resource", "api-group", "user", "group", "extra"}

// urlSlots are the slots in the URL.
var urlSlots = []string{"name", "namespace", "path", "resource", "api-group"}

// benign is the text a slot holds in the twin log: found nowhere else.
const benign = "bEnIgN"

// hostileLog is a small log with v in slot (every other slot plain):
// allowed reads of a configmap by name, of pods in a namespace, of a
// non-resource path and of a resource the schema does not type; a user,
// a group subject's member and a user with extra; a forbidden request
// and an unrelated user.
func hostileLog(t *testing.T, slot, v string) ([]byte, Options) {
	at := func(s, def string) string {
		if s != slot {
			return def
		}
		if slices.Contains(urlSlots, s) {
			return url.PathEscape(v)
		}
		return v
	}
	carol := person("carol", at("group", "devs"))
	extra := person("erin")
	extra.Extra = map[string]authnv1.ExtraValue{at("extra", "scopes"): {at("extra", "read")}}
	reqs := []logged{
		{person("alice"), "get", "/api/v1/namespaces/team-a/configmaps/" + at("name", "cfg"), "allow"},
		{person("alice"), "list", "/api/v1/namespaces/" + at("namespace", "team-b") + "/pods?limit=500", "allow"},
		{person("alice"), "get", "/" + at("path", "healthz"), "allow"},
		{person("alice"), "get", "/apis/" + at("api-group", "example.com") + "/v1/namespaces/team-a/" + at("resource", "widgets") + "/w1", "allow"},
		{person(at("user", "frank")), "get", "/api/v1/namespaces/team-b/secrets/s", "allow"},
		{carol, "get", "/api/v1/namespaces/team-c/services/svc", "allow"},
		{extra, "get", "/api/v1/namespaces/team-d/pods/p", "allow"},
		{person("bob"), "get", "/api/v1/namespaces/team-a/configmaps/other", "forbid"},
		{person("dave"), "get", "/apis/apps/v1/namespaces/team-a/deployments/web", "allow"},
	}
	return logOf(t, reqs...), Options{Names: NamesExact, GroupSubjects: []string{at("group", "devs")}}
}

// hostilePieces are what hostile names are made of (see the package
// cedarlex tests): line breaks of every reader, quotes, backslashes,
// comment delimiters, NUL, invalid UTF-8, bidirectional controls, whole
// policies.
var hostilePieces = []string{
	"\n", "\r", "\r\n", "\u2028", "\u2029", "\u0085", `"`, `\`, `\"`, "*/", "/*", "//", "\x00", "\xff", "\xc3", "\xed\xa0\x80",
	"\n@id(\"p\") permit (principal, action, resource);\n", "\"; permit (principal, action, resource); //", ";", "}", ")",
	"ünï", "\u202e", "\t", " ", ":", "*", "\v", "\f", "\ufeff", "@", "?", "#", "%",
}

// hostileText draws a hostile text (after an "x": never empty, never a
// system identity), now and then a long one.
func hostileText(r *rand.Rand) string {
	var b strings.Builder
	b.WriteString("x")
	for range 1 + r.IntN(5) {
		b.WriteString(hostilePieces[r.IntN(len(hostilePieces))])
	}
	if r.IntN(25) == 0 {
		b.WriteString(strings.Repeat("y", 5000))
	}
	return b.String()
}

// asLogged is h as the log carries it to the generator: without "/" in
// the URL (a separator there), coerced to valid UTF-8 in JSON (as
// encoding/json writes a string).
func asLogged(slot, h string) string {
	if slices.Contains(urlSlots, slot) {
		return strings.ReplaceAll(h, "/", "")
	}
	return strings.ToValidUTF8(h, "\ufffd")
}

// benignResults are the twin logs' results, per slot and audit mode.
var benignResults sync.Map

// checkHostileEvent generates from the log with h in slot and from the
// twin with the benign text, and checks that h changed nothing but string
// contents: the generation succeeds; with h valid UTF-8, every policy is
// the benign one with the benign text replaced by h's, quoted (the same
// syntax: h never left a string); not valid UTF-8, the policies naming it
// are not granted, counted and said why, and the others are the benign
// ones. With audit, every policy is annotated @enforcement("audit").
func checkHostileEvent(t *testing.T, s *schemagen.Schema, slot, h string, audit bool) {
	t.Helper()
	h = asLogged(slot, h)
	key := slot + map[bool]string{true: "/audit"}[audit]
	want, ok := benignResults.Load(key)
	if !ok {
		log, opts := hostileLog(t, slot, benign)
		opts.Audit = audit
		want = generateFrom(t, s, opts, log)
		benignResults.Store(key, want)
	}
	log, opts := hostileLog(t, slot, h)
	opts.Audit = audit
	got := generateFrom(t, s, opts, log)
	wantTexts, gotTexts := parsedTexts(t, want.(*Result).Text, audit), parsedTexts(t, got.Text, audit)
	if !utf8.ValidString(h) {
		wantTexts = slices.DeleteFunc(wantTexts, func(w string) bool { return strings.Contains(w, benign) })
		if got.Outcome.Unwritable == 0 || !slices.ContainsFunc(got.Outcome.Skipped, func(w string) bool { return strings.Contains(w, "not valid UTF-8") }) {
			t.Errorf("slot %s, text %q: the requests not granted are not said (%+v)", slot, h, got.Outcome)
		}
	} else {
		quoted := string(types.String(h).MarshalCedar())
		for i, w := range wantTexts {
			wantTexts[i] = strings.ReplaceAll(w, benign, quoted[1:len(quoted)-1])
		}
	}
	slices.Sort(wantTexts)
	slices.Sort(gotTexts)
	if !slices.Equal(gotTexts, wantTexts) {
		t.Fatalf("slot %s, text %q: the policies are\n%s\nwant\n%s", slot, h, strings.Join(gotTexts, "\n"), strings.Join(wantTexts, "\n"))
	}
	if got.Count != len(gotTexts) || len(got.Subjects) != len(want.(*Result).Subjects) && utf8.ValidString(h) {
		t.Fatalf("slot %s, text %q: %d policies counted, %d parsed; %d subjects", slot, h, got.Count, len(gotTexts), len(got.Subjects))
	}
	var perSubject int
	for _, sp := range got.Subjects {
		perSubject += len(parsedTexts(t, sp.Text, audit))
	}
	if perSubject != got.Count {
		t.Fatalf("slot %s, text %q: %d policies in the subjects' texts, %d in all", slot, h, perSubject, got.Count)
	}
}

// parsedTexts are the policies of text as cedar-go writes them; with
// audit, each must be annotated @enforcement("audit").
func parsedTexts(t *testing.T, text []byte, audit bool) []string {
	t.Helper()
	ps, err := cedarlang.ParsePolicies("generated.cedar", text)
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	out := make([]string, len(ps))
	for i, p := range ps {
		if p.IsAudit() != audit {
			t.Fatalf("policy %s: audit %v, want %v\n%s", p.ID, p.IsAudit(), audit, text)
		}
		out[i] = string(p.Text())
	}
	return out
}

// TestHostileEventsStayStrings puts hostile text in every slot of an
// audit log: it stays the contents of string literals (or, not valid
// UTF-8, is not granted, with the reason), and the rest of the output is
// the one a benign text gives.
func TestHostileEventsStayStrings(t *testing.T) {
	s := embeddedschema.Schema(t)
	r := rand.New(rand.NewPCG(11, 3))
	n := 12
	if testing.Short() {
		n = 4
	}
	for _, slot := range eventSlots {
		for i := range n {
			checkHostileEvent(t, s, slot, hostileText(r), i%3 == 0)
		}
	}
}

// The exploit of issue 42: a request for a configmap whose name closes
// the policy's comment and opens a permit of everything. Authorization
// runs on the URL's name before validation, so it is logged allowed (404).
const exploitURI = `/api/v1/namespaces/team-a/configmaps/x%0A@id("p")%20permit%20(principal,%20action,%20resource);%0A`

func TestNameExploit(t *testing.T) {
	s := embeddedschema.Schema(t)
	log := logOf(t, logged{person("alice"), "get", exploitURI, "allow"})
	for _, audit := range []bool{false, true} {
		res := generateFrom(t, s, Options{Audit: audit}, log)
		for _, text := range [][]byte{res.Text, res.Subjects[0].Text} {
			ps, err := cedarlang.ParsePolicies("generated.cedar", text)
			if err != nil {
				t.Fatalf("%v\n%s", err, text)
			}
			if len(ps) != 1 || ps[0].ID == "p" || ps[0].IsAudit() != audit ||
				!bytes.Contains(ps[0].Text(), []byte(`resource.name == "x\n@id(\"p\") permit (principal, action, resource);\n"`)) {
				t.Fatalf("audit %v: the name became policy text: %d policies\n%s", audit, len(ps), text)
			}
		}
	}
}

// Users named like a ServiceAccount's or a group's slug get slugs (and so
// ids and file names) of their own.
func TestSlugsNeverCollide(t *testing.T) {
	log := logOf(t,
		logged{person("sa/team-a/builder"), "get", "/api/v1/namespaces/team-a/pods/p", "allow"},
		logged{withAuthenticated(authnv1.UserInfo{Username: "system:serviceaccount:team-a:builder"}), "get", "/api/v1/namespaces/team-a/pods/p", "allow"},
		logged{person("group/devs"), "get", "/api/v1/namespaces/team-a/pods/p", "allow"},
		logged{person("carol", "devs"), "get", "/api/v1/namespaces/team-a/pods/p", "allow"},
	)
	res := checkExact(t, Options{GroupSubjects: []string{"devs"}}, log)
	var slugs []string
	for _, sp := range res.Subjects {
		slugs = append(slugs, sp.Slug)
	}
	slices.Sort(slugs)
	if want := []string{"group/devs", "sa/team-a/builder", "user/group/devs", "user/sa/team-a/builder"}; !slices.Equal(slugs, want) {
		t.Errorf("slugs %q, want %q", slugs, want)
	}
}

func TestAssignIDsNeverRepeat(t *testing.T) {
	mk := func(user, verb string) *policy {
		return &policy{subject: subject{name: user}, target: target{entity: "core::pods", resource: "pods"}, verbs: []string{verb}}
	}
	// Two policies of the same base, then one whose own base is the
	// second's numbered id.
	ps := []*policy{mk("a", "get"), mk("a", "get"), mk("a", "get-2"), mk("a", "get-2")}
	assignIDs(ps)
	seen := map[string]bool{}
	for _, p := range ps {
		if seen[p.id] {
			t.Fatalf("id %s given twice: %v", p.id, []string{ps[0].id, ps[1].id, ps[2].id, ps[3].id})
		}
		seen[p.id] = true
	}
	if ps[0].id != "generated/a/pods-get" || ps[1].id != "generated/a/pods-get-2" {
		t.Errorf("ids %s, %s", ps[0].id, ps[1].id)
	}
}

// FuzzGenerateHostileEvent puts the fuzzed text in a slot of the log:
// checkHostileEvent's properties hold for any text.
func FuzzGenerateHostileEvent(f *testing.F) {
	for i, seed := range []string{"\n@id(\"p\") permit (principal, action, resource);\n", "\r@id(\"p\")", "\u2028*/ /* //", "\xff\x00\"\\"} {
		f.Add(uint8(i), seed, i%2 == 0)
	}
	s := embeddedschema.Schema(f)
	f.Fuzz(func(t *testing.T, slot uint8, text string, audit bool) {
		checkHostileEvent(t, s, eventSlots[int(slot)%len(eventSlots)], "x"+text, audit)
	})
}

// The check against the forbidden requests covers every policy of the
// text, not only those generate built: a policy it did not build that
// allows a forbidden request is an error, never passed over.
func TestForbiddenCheckCoversEveryPolicy(t *testing.T) {
	s := embeddedschema.Schema(t)
	g := New(s, Options{})
	for _, rec := range records(t, logOf(t, logged{person("bob"), "get", "/api/v1/namespaces/team-a/secrets/s", "forbid"})) {
		g.Add([]Input{{Request: rec.Request, Allowed: rec.Allowed}})
	}
	built := &policy{subject: subject{name: "alice", principal: "k8s::User"}, target: target{entity: "core::pods", resource: "pods"},
		verbs: []string{"get"}, names: nameRule{any: true}, id: "generated/alice/pods-get"}
	foreign, err := cedarlang.ParsePolicies("generated", []byte(`@id("p") permit (principal, action, resource);`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.allowsForbidden(foreign, []*policy{built}); err == nil || !strings.Contains(err.Error(), "did not build") {
		t.Fatalf("a policy generate did not build allowed a forbidden request unnoticed: %v", err)
	}
}

// Requests naming many texts that are not valid UTF-8 are counted, and
// the first reasons listed: the warnings do not grow with the log.
func TestSkippedReasonsAreBounded(t *testing.T) {
	var reqs []logged
	for i := range 50 {
		reqs = append(reqs, logged{person("alice"), "get", fmt.Sprintf("/api/v1/namespaces/team-a/configmaps/bad%%FF%d", i), "allow"})
	}
	res := generateFrom(t, embeddedschema.Schema(t), Options{}, logOf(t, reqs...))
	if res.Count != 0 || res.Outcome.Unwritable != 50 || len(res.Outcome.Skipped) != maxSkippedListed+1 ||
		!strings.HasPrefix(res.Outcome.Skipped[maxSkippedListed], "and 30 more") {
		t.Errorf("%d policies, %+v", res.Count, res.Outcome)
	}
}
