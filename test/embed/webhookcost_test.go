package embed

import (
	"bytes"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/plugin/pkg/authorizer/webhook"
	webhookmetrics "k8s.io/apiserver/plugin/pkg/authorizer/webhook/metrics"
	"k8s.io/client-go/rest"
)

// What kube-apiserver's webhook authorizer (k8s.io/apiserver's, with
// client-go's REST client over HTTP/2) spends per SubjectAccessReview, on
// its side of the wire: the benchmarks call it against a server that
// decodes the review and answers a constant Allow, in this process, and
// report the process's CPU per call (cpu-µs/op) beside the time. The same
// load from a bare HTTP/2 client (the review encoded once, the answer
// decoded by encoding/json) measures the transport; the difference is the
// authorizer's own work: the review built and encoded (twice: once as the
// cache key), client-go's request machinery, the answer decoded by
// apimachinery's serializer, the metrics.
//
//	cd test/embed && go test -run '^$' -bench WebhookClient -benchtime 20000x
func BenchmarkWebhookClient(b *testing.B) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(constantAllow))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	cfg := &rest.Config{
		Host:            srv.URL + "/v1/authorize",
		TLSClientConfig: rest.TLSClientConfig{CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})},
		// As kube-apiserver loads a webhook's kubeconfig
		// (k8s.io/apiserver/pkg/util/webhook): no client-side rate limit.
		QPS:     -1,
		Timeout: 30 * time.Second,
	}
	for _, ttl := range []time.Duration{0, time.Minute} {
		wh, err := webhook.New(cfg, "v1", ttl, ttl, wait.Backoff{Duration: 10 * time.Millisecond, Factor: 1, Steps: 1},
			authorizer.DecisionDeny, nil, "kcedar", webhookmetrics.NoopAuthorizerMetrics{}, nil)
		if err != nil {
			b.Fatal(err)
		}
		name := "authorizer, cache off"
		if ttl > 0 {
			name = "authorizer, cache hits"
		}
		b.Run(name, func(b *testing.B) {
			var n atomic.Int64
			parallelCPU(b, func() {
				i := n.Add(1)
				if ttl > 0 {
					i = 0 // one review, answered from the cache after the first
				}
				if d, _, err := wh.Authorize(b.Context(), attributes(i)); err != nil || d != authorizer.DecisionAllow {
					b.Error(d, err)
				}
			})
		})
	}
	b.Run("bare HTTP/2 client", func(b *testing.B) {
		client := srv.Client()
		var n atomic.Int64
		parallelCPU(b, func() { bareCall(b, client, srv.URL+"/v1/authorize", n.Add(1)) })
	})
}

// attributes is a namespaced get of pod i by a user in two groups.
func attributes(i int64) authorizer.Attributes {
	return authorizer.AttributesRecord{User: &user.DefaultInfo{Name: "jane", Groups: []string{"dev", "system:authenticated"}},
		Verb: "get", Namespace: "dev", APIVersion: "v1", Resource: "pods", Name: fmt.Sprintf("pod-%d", i), ResourceRequest: true}
}

// bareCall posts the review of attributes(i), encoded by encoding/json, and
// decodes the answer with it.
func bareCall(b *testing.B, client *http.Client, url string, i int64) {
	a := attributes(i)
	sar := authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: a.GetUser().GetName(), Groups: a.GetUser().GetGroups(),
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: a.GetVerb(), Namespace: a.GetNamespace(), Version: "v1", Resource: a.GetResource(), Name: a.GetName()}}}
	sar.APIVersion, sar.Kind = "authorization.k8s.io/v1", "SubjectAccessReview"
	body, _ := json.Marshal(sar)
	resp, err := client.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		b.Error(err)
		return
	}
	defer resp.Body.Close()
	var got authorizationv1.SubjectAccessReview
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || !got.Status.Allowed || resp.ProtoMajor != 2 {
		b.Error(err, got.Status, resp.Proto)
	}
}

// constantAllow is the bare server: it decodes the review and allows.
func constantAllow(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	var sar authorizationv1.SubjectAccessReview
	if err == nil {
		err = json.Unmarshal(body, &sar)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","status":{"allowed":true}}`)
}

// parallelCPU runs call b.N times from 16 goroutines and reports the
// process's CPU (user + system) per call.
func parallelCPU(b *testing.B, call func()) {
	b.SetParallelism(8) // 8 per GOMAXPROCS: 16 concurrent calls on 2 cores
	cpu0 := processCPU()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			call()
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(processCPU()-cpu0)/float64(time.Microsecond)/float64(b.N), "cpu-µs/op")
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
