package server

import (
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// badRequestSeries is kcedar_bad_requests_total by endpoint, as /metrics
// exposes it.
func badRequestSeries(t *testing.T, g prometheus.Gatherer) map[string]float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "kcedar_bad_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "endpoint" {
					out[lp.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

// TestFirstBadRequestIsAnIncrease checks that every endpoint that counts
// malformed requests has its kcedar_bad_requests_total series at 0 from
// the start, so the first malformed request is an increase (a series that
// first appears at 1 has no increase() and no rate(): an alert on it would
// miss the first event). On kcedar's own authorizer (every endpoint) and
// on a union holding it (authorize and conditions only), each kind of
// malformed request to each endpoint under /v1/ adds 1 to a series that
// existed, and creates none; an endpoint the server does not serve
// answers 404 and counts nothing.
func TestFirstBadRequestIsAnIncrease(t *testing.T) {
	bad := map[string]struct {
		contentType, body string
	}{
		"malformed JSON":     {"application/json", `{"apiVersion": `},
		"wrong kind":         {"application/json", `{"apiVersion":"v1","kind":"Pod"}`},
		"wrong content type": {"application/yaml", `apiVersion: v1`},
		"trailing data":      {"application/json", `{} {}`},
		"oversized":          {"application/json", `{"a":"` + strings.Repeat("a", MaxBodyBytes) + `"}`},
	}
	endpoints := []string{"authorize", "conditions", "admit", "resourceaccessreview", "rulesreview", "validate-policy"}
	servers := map[string]struct {
		new    func(t *testing.T) (http.Handler, prometheus.Gatherer)
		serves []string
	}{
		"kcedar's authorizer": {func(t *testing.T) (http.Handler, prometheus.Gatherer) {
			s, _ := newTestServer(t, basePolicies)
			return s, s.registry
		}, []string{"admit", "authorize", "conditions", "resourceaccessreview", "rulesreview"}},
		"a union": {func(t *testing.T) (http.Handler, prometheus.Gatherer) { return unionServer(t) }, []string{"authorize", "conditions"}},
	}
	for name, srv := range servers {
		t.Run(name, func(t *testing.T) {
			for kind, b := range bad {
				s, metrics := srv.new(t)
				start := badRequestSeries(t, metrics)
				if got := slices.Sorted(maps.Keys(start)); !slices.Equal(got, srv.serves) {
					t.Fatalf("series at the start for endpoints %v, want %v", got, srv.serves)
				}
				for e, v := range start {
					if v != 0 {
						t.Fatalf("%s starts at %v", e, v)
					}
				}
				want := maps.Clone(start)
				for _, e := range endpoints {
					rec := httptest.NewRecorder()
					req := httptest.NewRequest(http.MethodPost, "/v1/"+e, strings.NewReader(b.body))
					req.Header.Set("Content-Type", b.contentType)
					s.ServeHTTP(rec, req)
					_, served := start[e]
					switch {
					case served && rec.Code >= 400 && rec.Code < 500:
						want[e]++
					case served:
						t.Fatalf("%s to %s: code %d, want a 4xx", kind, e, rec.Code)
					case rec.Code != http.StatusNotFound:
						t.Fatalf("%s to %s, which this server does not serve: code %d, want 404", kind, e, rec.Code)
					}
					if got := badRequestSeries(t, metrics); !maps.Equal(got, want) {
						t.Fatalf("after %s to %s: series %v, want %v (a series created by the request, or a count missed)", kind, e, got, want)
					}
				}
			}
		})
	}
}
