package replay

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"

	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/upstream"
)

// A create's name is in the body, not in requestURI: audit fills
// objectRef.name in, the authorizer saw none. With conditional
// authorization (the decision annotation is the decision after admission),
// at Metadata level the decision stays conditional; at Request level the
// body is the object admission sees, and is evaluated.
func TestConditionalCreate(t *testing.T) {
	withObject := func(id, name, was string) *auditv1.Event {
		ev := event(id, "create", "/api/v1/namespaces/shared/configmaps?fieldManager=kubectl-create", user("tom", "team-a"), was)
		ev.Level = auditv1.LevelRequest
		ev.ObjectRef = &auditv1.ObjectReference{Resource: "configmaps", Namespace: "shared", Name: name, APIVersion: "v1"}
		ev.RequestObject = &runtime.Unknown{Raw: []byte(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"` + name + `","namespace":"shared"}}`)}
		return ev
	}
	metadataOnly := withObject("m1", "team-a-cfg", "allow")
	metadataOnly.Level, metadataOnly.RequestObject = auditv1.LevelMetadata, nil
	patch := event("p1", "patch", "/api/v1/namespaces/shared/configmaps/team-a-cfg", user("tom", "team-a"), "allow")
	patch.Level = auditv1.LevelRequest
	patch.RequestObject = &runtime.Unknown{Raw: []byte(`{"data":{"a":"b"}}`)}
	s, changes := replay(t, testPolicies, Options{Mode: upstream.ServeModeConditionsReview}, lines(t,
		metadataOnly,                            // conditional: objectRef.name is not what was authorized
		withObject("r1", "team-a-cfg", "allow"), // unchanged: the object's name matches
		withObject("r2", "other", "allow"),      // newly denied
		patch,                                   // a patch by name: decided, no condition
	))
	checkCounts(t, s, Summary{Lines: 4, Events: 4, Requests: 4, Decided: 3, Unchanged: 1, NewlyDenied: 2, Conditional: 1})
	if len(changes) != 2 || changes[0].AuditID != "r2" || changes[1].AuditID != "p1" {
		t.Errorf("changes: %+v", changes)
	}
	if s.ConditionalWhy["conditional on the object (not in the log: level Metadata)"] != 1 {
		t.Errorf("conditional reasons: %v", s.ConditionalWhy)
	}
}

const namespacePolicies = `
@id("team-a-by-label")
permit (principal in k8s::Group::"team-a", action == k8s::Action::"get", resource is core::pods)
when { resource has namespaceObject && resource.namespaceObject.metadata has labels &&
       resource.namespaceObject.metadata.labels.hasTag("team") && resource.namespaceObject.metadata.labels.getTag("team") == "a" };

@id("everyone-lists-nodes")
permit (principal, action == k8s::Action::"list", resource is core::nodes);
`

func TestNamespaceObjects(t *testing.T) {
	log := lines(t,
		event("n1", "get", "/api/v1/namespaces/shop/pods/web", user("tom", "team-a"), "allow"),
		event("n2", "get", "/api/v1/namespaces/web/pods/web", user("tom", "team-a"), "forbid"),
		event("n3", "list", "/api/v1/nodes", user("tom"), "allow"),
	)
	s, _ := replay(t, namespacePolicies, Options{}, log)
	checkCounts(t, s, Summary{Lines: 3, Events: 3, Requests: 3, Decided: 1, Unchanged: 1, Undecidable: 2})
	if s.UndecidableWhy[whyNamespace] != 2 {
		t.Errorf("undecidable: %v", s.UndecidableWhy)
	}
	ns := entities.StaticNamespaces{
		"shop": {"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "shop", "labels": map[string]any{"team": "a"}}},
		"web":  {"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "web", "labels": map[string]any{"team": "b"}}},
	}
	s, _ = replay(t, namespacePolicies, Options{Namespaces: ns}, log)
	checkCounts(t, s, Summary{Lines: 3, Events: 3, Requests: 3, Decided: 3, Unchanged: 3})
}

// One decision per request: the other stages of the same request are
// skipped, and so are events the authorizer never decided.
func TestStageFiltering(t *testing.T) {
	var evs []*auditv1.Event
	for _, stage := range []auditv1.Stage{auditv1.StageRequestReceived, auditv1.StageResponseStarted, auditv1.StageResponseComplete} {
		ev := event("w1", "watch", "/api/v1/namespaces/dev/pods?watch=true", user("carol", "dev"), "allow")
		ev.Stage = stage
		evs = append(evs, ev)
	}
	panicked := event("p1", "get", "/api/v1/namespaces/prod/pods/x", user("carol", "dev"), "allow")
	panicked.Stage = auditv1.StagePanic
	unauthenticated := event("x1", "get", "/api/v1/namespaces/dev/pods", user("system:anonymous"), "")
	delete(unauthenticated.Annotations, decisionAnnotation)
	unauthenticated.ResponseStatus.Code = 401
	evs = append(evs, panicked, unauthenticated)
	s, changes := replay(t, testPolicies, Options{}, lines(t, evs...))
	checkCounts(t, s, Summary{Lines: 5, Events: 5, Requests: 2, Decided: 2, Unchanged: 1, NewlyDenied: 1})
	if len(changes) != 1 || changes[0].AuditID != "p1" {
		t.Errorf("changes: %+v", changes)
	}
	if len(s.Skipped) != 3 {
		t.Errorf("skipped: %v", s.Skipped)
	}
}

func TestMalformedAndOversizedLines(t *testing.T) {
	good := lines(t, event("u1", "get", "/api/v1/namespaces/dev/pods/web", user("carol", "dev"), "allow"))
	var log bytes.Buffer
	log.Write(good)
	log.WriteString("this is not json\n\n")
	log.WriteString(`{"kind":"Event","apiVersion":"audit.k8s.io/v1","stage":` + "\n")
	log.WriteString(`{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"z","stage":"RequestReceived",` + "\n")
	log.WriteString(`{"kind":"Event","apiVersion":"audit.k8s.io/v1","requestURI":"` + strings.Repeat("x", 5000) + "\"}\n")
	log.Write(bytes.TrimSuffix(good, []byte("\n"))) // the last line has no newline
	s, _ := replay(t, testPolicies, Options{MaxLineBytes: 4096}, log.Bytes())
	checkCounts(t, s, Summary{Lines: 6, Events: 2, Requests: 2, Decided: 2, Unchanged: 2, Malformed: 3, Oversized: 1})
	var where []string
	for _, p := range s.Problems {
		where = append(where, p.Input+":"+itoa(p.Line))
	}
	if got := strings.Join(where, " "); got != "log0:2 log0:4 log0:5 log0:6" {
		t.Errorf("problems at %s: %+v", got, s.Problems)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestGzipAndTruncatedGzip(t *testing.T) {
	var evs []*auditv1.Event
	for i := range 200 {
		evs = append(evs, event("g"+itoa(i), "get", "/api/v1/namespaces/dev/pods/web", user("carol", "dev"), "allow"))
	}
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	if _, err := zw.Write(lines(t, evs...)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	plain := lines(t, evs[:3]...)
	s, _ := replay(t, testPolicies, Options{}, zipped.Bytes(), plain)
	checkCounts(t, s, Summary{Lines: 203, Events: 203, Requests: 203, Decided: 203, Unchanged: 203})
	if len(s.Problems) != 0 {
		t.Errorf("problems: %+v", s.Problems)
	}

	cut := zipped.Bytes()[:zipped.Len()*2/3]
	s, _ = replay(t, testPolicies, Options{}, cut)
	if s.Lines == 0 || s.Lines >= 200 || s.Unchanged != s.Lines {
		t.Errorf("a truncated gzip: %d lines, %d unchanged", s.Lines, s.Unchanged)
	}
	if len(s.Problems) != 1 || !strings.Contains(s.Problems[0].Message, "truncated gzip stream: read "+itoa(s.Lines)+" complete lines") {
		t.Errorf("problems: %+v", s.Problems)
	}
}
