package replay

import (
	"bytes"
	"compress/gzip"
	"context"
	"strings"
	"testing"
	"time"

	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"

	"github.com/kcedar/kcedar/internal/testing/policytest"
)

// watchStages is a watch's events: RequestReceived, ResponseStarted and,
// if complete, ResponseComplete.
func watchStages(id string, complete bool) []*auditv1.Event {
	var evs []*auditv1.Event
	stages := []auditv1.Stage{auditv1.StageRequestReceived, auditv1.StageResponseStarted}
	if complete {
		stages = append(stages, auditv1.StageResponseComplete)
	}
	for _, st := range stages {
		ev := event(id, "watch", "/api/v1/namespaces/dev/pods?watch=true", user("carol", "dev"), "allow")
		ev.Stage = st
		evs = append(evs, ev)
	}
	return evs
}

// Each request is decided once whatever its stages; past MaxOpenRequests
// held at once, the oldest is decided at its ResponseStarted and its
// ResponseComplete is skipped, never decided twice.
func TestResponseStartedDecidedOnce(t *testing.T) {
	var evs []*auditv1.Event
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		evs = append(evs, watchStages(id, false)...)
	}
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		complete := watchStages(id, true)
		evs = append(evs, complete[2])
	}
	evs = append(evs, watchStages("open", false)...)
	for _, max := range []int{1, 2, 100} {
		s, _ := replay(t, testPolicies, Options{MaxOpenRequests: max}, lines(t, evs...))
		if s.Requests != 6 || s.Decided != 6 || s.Unchanged != 6 {
			t.Errorf("max %d: %d requests, %d decided, %d unchanged; skipped %v", max, s.Requests, s.Decided, s.Unchanged, s.Skipped)
		}
		early := 6 - max // evicted ones, and the one open to the end
		if max >= 5 {
			early = 1
		}
		if s.DecidedAtResponseStarted != early {
			t.Errorf("max %d: %d decided at ResponseStarted, want %d; skipped %v", max, s.DecidedAtResponseStarted, early, s.Skipped)
		}
	}
}

// The held set stays within its bound however many requests stay open.
func TestPairingBounded(t *testing.T) {
	p := newPairing(10)
	for i := range 10000 {
		id := strings.Repeat("x", i%7) + itoa(i)
		p.admit(folded{res: result{kind: kindUnchanged, auditID: id, stage: stageResponseStarted}})
		if i%3 == 0 {
			p.admit(folded{res: result{kind: kindUnchanged, auditID: id, stage: stageResponseComplete}})
		}
		if len(p.started) > 10 || len(p.early) > earlyPerHeld*10 || len(p.queue) > 2*10+16 || len(p.earlyQ) > 2*earlyPerHeld*10+16 {
			t.Fatalf("after %d: %d held, %d early, queues %d and %d", i, len(p.started), len(p.early), len(p.queue), len(p.earlyQ))
		}
	}
}

func TestReachNamesTheCondition(t *testing.T) {
	reach, err := NewReach([]byte(manifestsReach), "kcedar")
	if err != nil {
		t.Fatal(err)
	}
	sa := user("system:serviceaccount:kube-system:coredns", "system:serviceaccounts")
	node := user("system:node:n1", "system:nodes")
	log := lines(t,
		event("m", "get", "/api/v1/namespaces/dev/pods/web", user("root", "system:masters"), "allow"),
		event("s", "list", "/api/v1/endpoints", sa, "allow"),
		event("n", "get", "/api/v1/nodes/n1", node, "allow"),
		event("k", "get", "/api/v1/namespaces/kcedar-system/configmaps", user("system:serviceaccount:kcedar-system:kcedar"), "allow"),
		event("c", "get", "/api/v1/namespaces/dev/pods/web", user("carol", "dev"), "allow"),
	)
	s, _ := replay(t, testPolicies, Options{Reach: reach}, log)
	if s.NotSeen != 4 || s.Decided != 1 || s.Unchanged != 1 {
		t.Errorf("not seen %d, decided %d: %v", s.NotSeen, s.Decided, s.NotSeenWhy)
	}
	for _, want := range []string{"user in group system:masters (allowed before any authorizer)",
		"excluded by the matchCondition of authorizer kcedar: !request.user.startsWith('system:serviceaccount:kube-system:')",
		"excluded by the matchCondition of authorizer kcedar: !has(request.groups) || !('system:nodes' in request.groups)",
		"excluded by the matchCondition of authorizer kcedar: request.user != 'system:serviceaccount:kcedar-system:kcedar'"} {
		if s.NotSeenWhy[want] != 1 {
			t.Errorf("no %q in %v", want, s.NotSeenWhy)
		}
	}
	for _, bad := range []string{"", "kind: AuthorizationConfiguration\napiVersion: apiserver.config.k8s.io/v1\nauthorizers: [{type: RBAC, name: rbac}]\n",
		strings.Replace(manifestsReach, "request.user != ", "request.nosuchfield != ", 1),
		strings.Replace(manifestsReach, "request.user != 'system:serviceaccount:kcedar-system:kcedar'", "request.user", 1),
		strings.Replace(manifestsReach, "request.user != 'system:serviceaccount:kcedar-system:kcedar'", "' '", 1)} {
		if _, err := NewReach([]byte(bad), ""); err == nil {
			t.Errorf("NewReach accepted %q", bad)
		}
	}
}

// A truncated gzip stream, a directory or a read error mid-file is an
// input cut short, counted as unreadable with how far it got.
func TestUnreadableInputs(t *testing.T) {
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	_, _ = zw.Write(lines(t, watchStages("a", true)...))
	_ = zw.Close()
	r := New(schemaFor(t), policytest.Set(t, testPolicies), Options{})
	if err := r.Read(context.Background(), "cut.gz", bytes.NewReader(zipped.Bytes()[:zipped.Len()-6])); err != nil {
		t.Fatal(err)
	}
	if err := r.Read(context.Background(), "dir", failingReader{}); err != nil {
		t.Fatal(err)
	}
	r.Unreadable("missing.log", errNotThere)
	s := r.Summary()
	if s.Unreadable != 3 || len(s.Problems) != 3 {
		t.Fatalf("unreadable %d: %+v", s.Unreadable, s.Problems)
	}
	for i, want := range []string{"truncated gzip stream", "is a directory", "not read: no such file"} {
		if p := s.Problems[i]; !p.CutShort || !strings.Contains(p.Message, want) {
			t.Errorf("problem %d: %+v, want %q", i, p, want)
		}
	}
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errIsDir }

type constError string

func (e constError) Error() string { return string(e) }

const (
	errIsDir    = constError("read dir: is a directory")
	errNotThere = constError("no such file or directory")
)

// FuzzReader: no input makes the reader crash or hang, and every line is
// accounted for.
func FuzzReader(f *testing.F) {
	f.Add([]byte(`{"kind":"Event","apiVersion":"audit.k8s.io/v1","stage":"ResponseStarted","auditID":"a","verb":"watch","requestURI":"/api/v1/pods?watch=1","user":{"username":"u"},"annotations":{"authorization.k8s.io/decision":"allow"}}`))
	f.Add([]byte(`{"category":"kube-audit","properties":{"log":"{\"kind\":\"Event\",\"stage\":\"Panic\",\"auditID\":\"x\",\"verb\":\"get\",\"requestURI\":\"/x\",\"responseStatus\":{\"code\":403}}"}}`))
	f.Add([]byte("{\"protoPayload\":{}}\n[1]\n\"s\"\n{\"kind\":\"Event\",\"user\":\"s\"}\n\x1f\x8b\x08"))
	f.Add([]byte{0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff})
	s, ps := schemaFor(f), policytest.Set(f, testPolicies)
	reach, err := NewReach([]byte(manifestsReach), "")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := New(s, ps, Options{MaxLineBytes: 1024, MaxOpenRequests: 2, Reach: reach})
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := r.Read(ctx, "fuzz", bytes.NewReader(data)); err != nil {
			t.Fatal(err)
		}
		sum := r.Summary()
		if sum.Lines < sum.Events+sum.Malformed+sum.Oversized+sum.Foreign {
			t.Fatalf("lines %d < events %d + malformed %d + oversized %d + foreign %d", sum.Lines, sum.Events, sum.Malformed, sum.Oversized, sum.Foreign)
		}
		if sum.Decided != sum.Unchanged+sum.NewlyDenied+sum.NewlyAllowed {
			t.Fatalf("decided %d != %d + %d + %d", sum.Decided, sum.Unchanged, sum.NewlyDenied, sum.NewlyAllowed)
		}
		seen := map[string]bool{}
		err := ReadRequests(ctx, bytes.NewReader(data), ReadOptions{MaxLineBytes: 1024, MaxOpenRequests: 2, Reach: reach}, func(e Event) error {
			if id := e.AuditID(); id != "" && seen[id] && len(seen) < 4*2 {
				t.Fatalf("request %q passed on twice", id)
			}
			seen[e.AuditID()] = true
			return nil
		})
		if err != nil && ctx.Err() != nil {
			t.Fatal(err)
		}
	})
}
