package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"

	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/testing/policytest"
	"github.com/kcedar/kcedar/internal/upstream"
)

// testPolicies: dev reads pods in dev; team-a creates configmaps in shared
// named team-a-* (a condition on the name, decided in admission); alice
// execs into pods in dev; an agent lists pods only with app=agent; anyone
// in ops may GET /healthz.
const testPolicies = `
@id("dev-pods")
permit (principal in k8s::Group::"dev", action in [k8s::Action::"get", k8s::Action::"list", k8s::Action::"watch"], resource is core::pods)
when { resource.namespace == "dev" };

@id("team-a-prefix")
permit (principal in k8s::Group::"team-a", action in [k8s::Action::"create", k8s::Action::"get"], resource is core::configmaps)
when { resource.namespace == "shared" && resource.name like "team-a-*" };

@id("alice-exec")
permit (principal == k8s::User::"alice", action == k8s::Action::"create", resource is core::pods_exec)
when { resource.namespace == "dev" };

@id("agent-labelled-pods")
permit (principal == k8s::ServiceAccount::"system:serviceaccount:agents:agent", action in [k8s::Action::"list", k8s::Action::"watch"], resource is core::pods)
when { resource has object && resource.object.metadata has labels && resource.object.metadata.labels.hasTag("app") && resource.object.metadata.labels.getTag("app") == "agent" };

@id("ops-healthz")
permit (principal in k8s::Group::"ops", action == k8s::Action::"get", resource is k8s::NonResourceURL)
when { resource.path == "/healthz" };

@id("no-secrets-for-contractors")
forbid (principal in k8s::Group::"contractors", action, resource is core::secrets);
`

var testSchema *schemagen.Schema

func schemaFor(t testing.TB) *schemagen.Schema {
	t.Helper()
	if testSchema == nil {
		s, err := schemagen.Load(context.Background(), schemagen.Source{})
		if err != nil {
			t.Fatal(err)
		}
		testSchema = s
	}
	return testSchema
}

func user(name string, groups ...string) authnv1.UserInfo {
	return authnv1.UserInfo{Username: name, UID: name + "-uid", Groups: append(groups, "system:authenticated")}
}

// event is a ResponseComplete, Metadata-level audit.k8s.io/v1 Event as
// kube-apiserver writes it, with the objectRef audit fills in.
func event(id, verb, uri string, u authnv1.UserInfo, was string) *auditv1.Event {
	ts := metav1.NewMicroTime(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	return &auditv1.Event{
		TypeMeta: metav1.TypeMeta{Kind: "Event", APIVersion: "audit.k8s.io/v1"},
		Level:    auditv1.LevelMetadata, AuditID: types.UID(id), Stage: auditv1.StageResponseComplete,
		RequestURI: uri, Verb: verb, User: u, SourceIPs: []string{"10.0.0.7"}, UserAgent: "kubectl/v1.37.1 (linux/amd64)",
		ResponseStatus:           &metav1.Status{Code: 200},
		RequestReceivedTimestamp: ts, StageTimestamp: ts,
		Annotations: map[string]string{"authorization.k8s.io/decision": was, "authorization.k8s.io/reason": ""},
	}
}

func lines(t testing.TB, evs ...*auditv1.Event) []byte {
	t.Helper()
	var b bytes.Buffer
	for _, ev := range evs {
		data, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(data)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

func replay(t testing.TB, ps string, opts Options, inputs ...[]byte) (*Summary, []Change) {
	t.Helper()
	var changes []Change
	opts.OnChange = func(c Change) error { changes = append(changes, c); return nil }
	r := New(schemaFor(t), policytest.Set(t, ps), opts)
	for i, in := range inputs {
		if err := r.Read(context.Background(), "log"+string(rune('0'+i)), bytes.NewReader(in)); err != nil {
			t.Fatal(err)
		}
	}
	s := r.Summary()
	s.Sort()
	return s, changes
}

func TestRebuildFromRequestURI(t *testing.T) {
	alice := user("alice")
	for _, tc := range []struct {
		name, verb, uri string
		want            entities.Request
	}{
		{"create: no name, whatever objectRef says", "create", "/api/v1/namespaces/shared/configmaps?fieldManager=kubectl",
			entities.Request{Verb: "create", ResourceRequest: true, APIVersion: "v1", Resource: "configmaps", Namespace: "shared"}},
		{"get by name", "get", "/api/v1/namespaces/dev/pods/web",
			entities.Request{Verb: "get", ResourceRequest: true, APIVersion: "v1", Resource: "pods", Namespace: "dev", Name: "web"}},
		{"subresource", "create", "/api/v1/namespaces/dev/pods/web/exec?command=ls&stdout=true",
			entities.Request{Verb: "create", ResourceRequest: true, APIVersion: "v1", Resource: "pods", Subresource: "exec", Namespace: "dev", Name: "web"}},
		{"group and subresource", "patch", "/apis/apps/v1/namespaces/dev/deployments/web/scale",
			entities.Request{Verb: "patch", ResourceRequest: true, APIGroup: "apps", APIVersion: "v1", Resource: "deployments", Subresource: "scale", Namespace: "dev", Name: "web"}},
		{"list with a label selector", "list", "/api/v1/namespaces/dev/pods?labelSelector=app%3Dagent%2Ctier+in+%28a%2Cb%29&limit=500",
			entities.Request{Verb: "list", ResourceRequest: true, APIVersion: "v1", Resource: "pods", Namespace: "dev",
				LabelSelector: []entities.LabelRequirement{{Key: "app", Op: metav1.LabelSelectorOpIn, Values: []string{"agent"}}, {Key: "tier", Op: metav1.LabelSelectorOpIn, Values: []string{"a", "b"}}}}},
		{"watch by field selector on the name", "watch", "/api/v1/namespaces/dev/pods?fieldSelector=metadata.name%3Dweb&watch=true",
			entities.Request{Verb: "watch", ResourceRequest: true, APIVersion: "v1", Resource: "pods", Namespace: "dev", Name: "web"}},
		{"cluster-wide list", "list", "/apis/apps/v1/deployments",
			entities.Request{Verb: "list", ResourceRequest: true, APIGroup: "apps", APIVersion: "v1", Resource: "deployments"}},
		{"deletecollection", "deletecollection", "/api/v1/namespaces/dev/pods?labelSelector=app",
			entities.Request{Verb: "deletecollection", ResourceRequest: true, APIVersion: "v1", Resource: "pods", Namespace: "dev",
				LabelSelector: []entities.LabelRequirement{{Key: "app", Op: metav1.LabelSelectorOpExists}}}},
		{"non-resource", "get", "/healthz?verbose=1", entities.Request{Verb: "get", Path: "/healthz"}},
		{"non-resource post", "post", "/apis", entities.Request{Verb: "post", Path: "/apis"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := event("x", tc.verb, tc.uri, alice, "allow")
			ev.ObjectRef = &auditv1.ObjectReference{Resource: "configmaps", Namespace: "shared", Name: "from-the-body"}
			var got auditEvent
			if err := json.Unmarshal(lines(t, ev), &got); err != nil {
				t.Fatal(err)
			}
			req, err := got.rebuild()
			if err != nil {
				t.Fatal(err)
			}
			want := tc.want
			want.User = entities.UserInfo{Name: "alice", UID: "alice-uid", Groups: []string{"system:authenticated"}}
			if g, w := mustJSON(t, req), mustJSON(t, &want); g != w {
				t.Errorf("rebuilt\n got %s\nwant %s", g, w)
			}
		})
	}
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestReplayComparesWithTheLog(t *testing.T) {
	admin := user("admin", "system:masters")
	impersonating := event("imp", "get", "/api/v1/namespaces/dev/pods/web", admin, "allow")
	impersonating.ImpersonatedUser = &authnv1.UserInfo{Username: "bob", Groups: []string{"dev", "system:authenticated"}}
	sa := authnv1.UserInfo{Username: "system:serviceaccount:agents:agent", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:agents", "system:authenticated"},
		Extra: map[string]authnv1.ExtraValue{"authentication.kubernetes.io/pod-name": {"agent-0"}}}
	log := lines(t,
		event("u1", "get", "/api/v1/namespaces/dev/pods/web", user("carol", "dev"), "allow"),              // unchanged
		event("u2", "get", "/api/v1/namespaces/prod/pods/web", user("carol", "dev"), "forbid"),            // unchanged (NoOpinion)
		event("d1", "get", "/api/v1/namespaces/prod/pods/web", user("carol", "dev"), "allow"),             // newly denied
		event("d2", "list", "/api/v1/namespaces/prod/pods", user("carol", "dev"), "allow"),                // newly denied
		event("d3", "get", "/api/v1/namespaces/dev/secrets/s", user("dan", "contractors"), "allow"),       // newly denied (Deny)
		event("a1", "create", "/api/v1/namespaces/dev/pods/web/exec?command=ls", user("alice"), "forbid"), // newly allowed
		impersonating, // unchanged: decided as bob (dev), not as the admin
		event("a2", "list", "/api/v1/pods?labelSelector=app%3Dagent", sa, "forbid"),                   // newly allowed
		event("u3", "list", "/api/v1/pods?labelSelector=app%3Dother", sa, "forbid"),                   // unchanged
		event("a3", "get", "/healthz", user("olga", "ops"), "forbid"),                                 // newly allowed
		event("u4", "get", "/livez", user("olga", "ops"), "forbid"),                                   // unchanged
		event("c1", "create", "/api/v1/namespaces/shared/configmaps", user("tom", "team-a"), "allow"), // conditional
	)
	s, changes := replay(t, testPolicies, Options{Mode: upstream.ServeModeConditionsReview}, log)
	want := Summary{Lines: 12, Events: 12, Requests: 12, Decided: 11, Unchanged: 5, NewlyDenied: 3, NewlyAllowed: 3, Conditional: 1}
	checkCounts(t, s, want)
	var ids []string
	for _, c := range changes {
		ids = append(ids, c.AuditID+":"+c.Was+">"+c.Now)
	}
	if got := strings.Join(ids, " "); got != "d1:allow>NoOpinion d2:allow>NoOpinion d3:allow>Deny a1:forbid>Allow a2:forbid>Allow a3:forbid>Allow" {
		t.Errorf("changes: %s", got)
	}
	if c := changes[2]; strings.Join(c.Policies, ",") != "no-secrets-for-contractors" || c.User != "dan" || c.Resource != "secrets" {
		t.Errorf("d3: %+v", c)
	}
	if g := s.Changes[len(s.Changes)-1]; g.Change != NewlyDenied || g.User != "dan" {
		t.Errorf("last group: %+v", g)
	}
	var text bytes.Buffer
	if err := s.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"newly denied: 3", "NoOpinion counts as not allowed", "user=carol verb=get resource=pods  (decision annotation)  e.g. d1"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, text.String())
		}
	}
}

func checkCounts(t *testing.T, s *Summary, want Summary) {
	t.Helper()
	counts := func(s *Summary) [11]int {
		return [...]int{s.Lines, s.Events, s.Requests, s.Decided, s.Unchanged, s.NewlyDenied, s.NewlyAllowed, s.Conditional, s.Undecidable, s.Malformed, s.Oversized}
	}
	if got := counts(s); got != counts(&want) {
		t.Errorf("counts (lines events requests decided unchanged denied allowed conditional undecidable malformed oversized)\n got %v\nwant %v\nskipped %v, conditional %v, undecidable %v, problems %v", counts(s), counts(&want), s.Skipped, s.ConditionalWhy, s.UndecidableWhy, s.Problems)
	}
}
