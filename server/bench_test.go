package server

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/kcedar/kcedar/cedar"
	"github.com/kcedar/kcedar/internal/testing/embeddedschema"
	"github.com/kcedar/kcedar/internal/testing/testgen"
)

// benchHandler measures the whole handler (JSON in, decision, JSON out)
// without the network, with n generated policies validated against the
// embedded schema.
func benchHandler(b *testing.B, n int) { benchHandlerTraced(b, n, nil) }

// benchHandlerTraced is benchHandler with the server tracing through tp
// (nil: tracing off).
func benchHandlerTraced(b *testing.B, n int, tp trace.TracerProvider) {
	s := embeddedschema.Schema(b)
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "p.cedar"), []byte(testgen.RBACLike(n)), 0o644); err != nil {
		b.Fatal(err)
	}
	// AllowEmpty: the floor is no policies at all.
	srv := serve(b, serveConfig{schema: s, paths: []string{dir}, source: cedar.FileSourceOptions{AllowEmpty: n == 0}, server: Options{TracerProvider: tp}})
	if err := srv.source.Ready(); err != nil {
		b.Fatal(err)
	}
	var bodies [][]byte
	for i := 0; i < 64; i++ {
		ns := fmt.Sprintf("ns-%d", i%60)
		if i%7 == 0 {
			ns = ""
		}
		bodies = append(bodies, []byte(sarJSON(fmt.Sprintf("user-%d", i*3), []string{fmt.Sprintf("team-%d", i%200), "system:authenticated"},
			[]string{"get", "list", "watch", "create", "delete"}[i%5], "", []string{"pods", "configmaps", "secrets", "serviceaccounts", "nodes"}[i%5], ns, "")))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/v1/authorize", bytes.NewReader(bodies[i%len(bodies)]))
		srv.ServeHTTP(rec, req)
		if rec.Code != 200 {
			b.Fatal(rec.Code, rec.Body.String())
		}
	}
}

func BenchmarkHandlerEmpty(b *testing.B) { benchHandler(b, 0) }
func BenchmarkHandler1000(b *testing.B)  { benchHandler(b, 1000) }
func BenchmarkHandler10000(b *testing.B) { benchHandler(b, 10000) }
