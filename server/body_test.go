package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// decodeJSON's fast path (json.Unmarshal) accepts what decodeWithDecoder
// accepts, and decodes it the same; what both refuse gets the decoder's
// message.
func TestDecodeJSONAsTheDecoder(t *testing.T) {
	for _, body := range []string{
		`{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":{"user":"u","groups":["a","b"]}}`,
		" {\"kind\":\"x\"} \n\t", ``, ` `, `{`, `{}}`, `{} {}`, `{}]`, `[]`, `null`, `{"spec":{"user":3}}`,
		`{"spec":{"groups":"a"}}`, `{"kind":"x"} x`, `"x"`, `{"kind":"\u00e9\ud800"}`, "{\"kind\":\"\xff\"}",
	} {
		var got, want sarRequest
		gotErr, wantErr := decodeJSON([]byte(body), &got), decodeWithDecoder([]byte(body), &want)
		if (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error() {
			t.Errorf("%q: error %v, want %v", body, gotErr, wantErr)
		}
		var re *requestError
		if gotErr != nil && !errors.As(gotErr, &re) {
			t.Errorf("%q: %T is no requestError", body, gotErr)
		}
		if gotErr == nil {
			g, _ := json.Marshal(got)
			w, _ := json.Marshal(want)
			if !bytes.Equal(g, w) {
				t.Errorf("%q: decoded %s, want %s", body, g, w)
			}
		}
	}
}

func TestBodyBufferPool(t *testing.T) {
	buf := getBodyBuffer()
	buf.WriteString("left over")
	putBodyBuffer(buf)
	if b := getBodyBuffer(); b.Len() != 0 {
		t.Errorf("a pooled buffer holds %q", b.String())
	}
	big := getBodyBuffer()
	big.Grow(2 * maxPooledBody)
	putBodyBuffer(big) // dropped, not kept: nothing to check but that it does not panic
}

func TestSeriesCacheCreatesOnFirstUse(t *testing.T) {
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "c", Help: "h"}, []string{"endpoint", "decision"})
	reg := prometheus.NewRegistry()
	reg.MustRegister(vec)
	series := func() map[string]float64 {
		out := map[string]float64{}
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fams {
			for _, m := range f.GetMetric() {
				out[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue() // labels sort by name: decision, endpoint
			}
		}
		return out
	}
	created := 0
	c := newSeriesCache(func(d string) prometheus.Counter { created++; return vec.WithLabelValues("authorize", d) })
	if got := series(); len(got) != 0 {
		t.Fatalf("series before any use: %v", got)
	}
	c.get("Allow").Inc()
	c.get("Allow").Inc()
	c.get("Deny").Inc()
	if got := series(); created != 2 || len(got) != 2 || got["Allow"] != 2 || got["Deny"] != 1 {
		t.Errorf("created %d series, got %v", created, got)
	}
}
