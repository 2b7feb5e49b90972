package replay

import (
	"bytes"
	"context"
	"testing"

	authnv1 "k8s.io/api/authentication/v1"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"

	"github.com/kcedar/kcedar/internal/testing/policytest"
)

// BenchmarkReplayMetadata replays a Metadata-level log (the events
// kube-apiserver writes at that level, about 1 KB each, every request at
// ResponseComplete after a RequestReceived) and reports events per second
// over all cores. The bar: >= 50,000 events/s on two cores.
func BenchmarkReplayMetadata(b *testing.B) { benchmarkReplay(b, Options{}) }

// BenchmarkReplayMetadataReach is BenchmarkReplayMetadata with the
// matchConditions kcedar manifests writes evaluated on every request, as
// kcedar replay does by default.
func BenchmarkReplayMetadataReach(b *testing.B) {
	reach, err := NewReach([]byte(manifestsReach), "")
	if err != nil {
		b.Fatal(err)
	}
	benchmarkReplay(b, Options{Reach: reach})
}

// BenchmarkReplayMetadataChain is BenchmarkReplayMetadataReach decided by
// kcedar, then RBAC (asked on kcedar's NoOpinion), as kcedar replay
// --cluster does.
func BenchmarkReplayMetadataChain(b *testing.B) {
	reach, err := NewReach([]byte(manifestsReach), "")
	if err != nil {
		b.Fatal(err)
	}
	benchmarkReplay(b, Options{Reach: reach, RBAC: policytest.Set(b, rbacPolicies)})
}

func benchmarkReplay(b *testing.B, opts Options) {
	const requests = 10000
	var evs []*auditv1.Event
	users := []authnv1.UserInfo{user("carol", "dev"), user("dan", "contractors"), user("alice"), user("olga", "ops")}
	uris := []struct{ verb, uri string }{
		{"get", "/api/v1/namespaces/dev/pods/web-7f9c"}, {"list", "/api/v1/namespaces/prod/pods?limit=500"},
		{"watch", "/api/v1/namespaces/dev/pods?allowWatchBookmarks=true&resourceVersion=123&watch=true"},
		{"get", "/api/v1/namespaces/dev/secrets/token"}, {"create", "/api/v1/namespaces/dev/pods/web/exec?command=sh&stdin=true"},
		{"patch", "/apis/apps/v1/namespaces/dev/deployments/web"}, {"get", "/healthz"},
	}
	for i := range requests {
		u, r := users[i%len(users)], uris[i%len(uris)]
		ev := event("5f0a7c1e-8d2b-4e7a-9c1d-"+itoa(100000000000+i), r.verb, r.uri, u, []string{"allow", "forbid"}[i%2])
		ev.ObjectRef = &auditv1.ObjectReference{Resource: "pods", Namespace: "dev", Name: "web-7f9c", APIVersion: "v1"}
		received := *ev
		received.Stage, received.ResponseStatus = auditv1.StageRequestReceived, nil
		evs = append(evs, &received, ev)
	}
	log := lines(b, evs...)
	r := New(schemaFor(b), policytest.Set(b, testPolicies), opts)
	b.SetBytes(int64(len(log)))
	b.ResetTimer()
	for range b.N {
		if err := r.Read(context.Background(), "bench", bytes.NewReader(log)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(evs)*b.N)/b.Elapsed().Seconds(), "events/s")
}
