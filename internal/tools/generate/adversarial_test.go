package generate

import (
	"bytes"
	"context"
	"strings"
	"testing"

	authnv1 "k8s.io/api/authentication/v1"

	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/testing/embeddedschema"
)

// logged is one request of a handwritten log.
type logged struct {
	user      authnv1.UserInfo
	verb, uri string
	decision  string
}

func person(name string, groups ...string) authnv1.UserInfo {
	return withAuthenticated(authnv1.UserInfo{Username: name, Groups: groups})
}

func logOf(t *testing.T, reqs ...logged) []byte {
	var b bytes.Buffer
	for i, r := range reqs {
		b.Write(auditLine(t, i, r.verb, r.uri, r.user, r.decision))
	}
	return b.Bytes()
}

// checkExact asserts that the generated policies allow exactly the
// allowed requests of the log, and returns their text.
func checkExact(t *testing.T, opts Options, log []byte) *Result {
	t.Helper()
	s := embeddedschema.Schema(t)
	res := generateFrom(t, s, opts, log)
	set := valid(t, s, res.Text)
	e := engine.NewEngine(s, set, engine.EngineOptions{})
	for _, rec := range records(t, log) {
		if got := e.Authorize(context.Background(), rec.Request).IsAllowed(); got != rec.Allowed {
			t.Errorf("%s: allowed %v, logged allowed %v\n%s", rec.Request, got, rec.Allowed, res.Text)
		}
	}
	return res
}

// manyNames is alice reading eight pods of team-a by name, and being
// forbidden another.
func manyNames(alice, other authnv1.UserInfo) []logged {
	var reqs []logged
	for _, n := range []string{"x1", "x2", "x3", "x4", "x5", "x6", "x7", "x8"} {
		reqs = append(reqs, logged{alice, "get", "/api/v1/namespaces/team-a/pods/" + n, "allow"})
	}
	return append(reqs, logged{other, "get", "/api/v1/namespaces/team-a/pods/secret-one", "forbid"})
}

func TestWideningNeverCoversAForbiddenRequest(t *testing.T) {
	alice := person("alice")
	for _, names := range []Names{NamesAuto, NamesAny} {
		res := checkExact(t, Options{Names: names, MaxNames: 3}, logOf(t, manyNames(alice, alice)...))
		if !strings.Contains(string(res.Text), `"x8"`) || res.Outcome.KeptNames != 1 {
			t.Errorf("names %s: the names are not kept listed (%+v):\n%s", names, res.Outcome, res.Text)
		}
	}
	// In audit mode the policies are checked as they will be enforced.
	audit := generateFrom(t, embeddedschema.Schema(t), Options{Names: NamesAny, Audit: true}, logOf(t, manyNames(alice, alice)...))
	if !strings.Contains(string(audit.Text), `"x8"`) || !strings.Contains(string(audit.Text), `@enforcement("audit")`) {
		t.Errorf("--audit: the names are not kept listed:\n%s", audit.Text)
	}
	// Without the forbidden request, more than three names become every name.
	res := checkExact(t, Options{Names: NamesAuto, MaxNames: 3}, logOf(t, manyNames(alice, alice)[:8]...))
	if strings.Contains(string(res.Text), `"x8"`) {
		t.Errorf("eight names are still listed with --max-names 3:\n%s", res.Text)
	}
}

func TestGroupSubjectNeverCoversAMembersForbiddenRequest(t *testing.T) {
	alice, bob := person("alice", "dev"), person("bob", "dev")
	// bob was forbidden a name alice's many names would widen over: the
	// group's names stay listed.
	res := checkExact(t, Options{Names: NamesAuto, MaxNames: 3, GroupSubjects: []string{"dev"}}, logOf(t, manyNames(alice, bob)...))
	if !strings.Contains(string(res.Text), `principal in k8s::Group::"dev"`) || !strings.Contains(string(res.Text), `"x8"`) {
		t.Errorf("want the group's policy with the names listed:\n%s", res.Text)
	}
	// bob was forbidden the very permission alice used: alice's own policy.
	res = checkExact(t, Options{GroupSubjects: []string{"dev"}}, logOf(t,
		logged{alice, "list", "/api/v1/namespaces/team-a/pods?limit=500", "allow"},
		logged{bob, "list", "/api/v1/namespaces/team-a/pods?limit=500", "forbid"},
		logged{alice, "get", "/api/v1/namespaces/team-a/configmaps/cfg", "allow"},
	))
	if !strings.Contains(string(res.Text), `principal == k8s::User::"alice"`) || res.Outcome.PerMember != 1 {
		t.Errorf("want alice's list written for alice (%+v):\n%s", res.Outcome, res.Text)
	}
	// alice listed every namespace; bob was forbidden one: the group's
	// grant of every namespace would allow it, found by the check and
	// written for alice.
	res = checkExact(t, Options{GroupSubjects: []string{"dev"}}, logOf(t,
		logged{alice, "list", "/api/v1/pods?limit=500", "allow"},
		logged{bob, "list", "/api/v1/namespaces/team-b/pods?limit=500", "forbid"},
	))
	if !strings.Contains(string(res.Text), `principal == k8s::User::"alice"`) {
		t.Errorf("want alice's list across namespaces written for alice:\n%s", res.Text)
	}
}

func TestConflictingDecisionsGrantNothing(t *testing.T) {
	alice := person("alice")
	s := embeddedschema.Schema(t)
	log := logOf(t,
		logged{alice, "delete", "/api/v1/namespaces/team-a/pods/web", "allow"},
		logged{alice, "delete", "/api/v1/namespaces/team-a/pods/web", "forbid"},
	)
	res := generateFrom(t, s, Options{}, log)
	if res.Count != 0 || res.Outcome.Conflicting != 1 || !strings.Contains(string(res.Text), "also forbidden") {
		t.Errorf("a permission allowed and forbidden is granted (%+v):\n%s", res.Outcome, res.Text)
	}
}

func TestNamesOnlyWhereAuthorizationSawThem(t *testing.T) {
	alice := person("alice")
	res := checkExact(t, Options{Names: NamesExact}, logOf(t,
		logged{alice, "create", "/api/v1/namespaces/team-a/configmaps?fieldManager=kubectl", "allow"},
		logged{alice, "list", "/api/v1/namespaces/team-a/configmaps?limit=500", "allow"},
		logged{alice, "watch", "/api/v1/namespaces/team-a/configmaps?watch=true", "allow"},
		logged{alice, "deletecollection", "/api/v1/namespaces/team-a/configmaps", "allow"},
		logged{alice, "create", "/api/v1/namespaces/team-a/pods/web/exec?command=sh", "allow"},
	))
	text := string(res.Text)
	if strings.Count(text, "resource.name ==") != 1 || !strings.Contains(text, `resource.name == "web"`) {
		t.Errorf("want a name only on the exec:\n%s", text)
	}
	if !strings.Contains(text, `@id("generated/alice/configmaps-create-deletecollection-list-watch")`) {
		t.Errorf("want one policy for the verbs on configmaps:\n%s", text)
	}
	// A list selecting one name by field is authorized with that name (the
	// request-info resolver's), so it is listed.
	res = checkExact(t, Options{Names: NamesExact}, logOf(t,
		logged{alice, "list", "/api/v1/namespaces/team-a/configmaps?fieldSelector=metadata.name%3Dcfg", "allow"}))
	if !strings.Contains(string(res.Text), `resource.name == "cfg"`) {
		t.Errorf("want the list's name:\n%s", res.Text)
	}
}
