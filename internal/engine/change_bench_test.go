package engine

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/kcedar/kcedar/internal/cedarlang/lint"
	"github.com/kcedar/kcedar/internal/store"
	"github.com/kcedar/kcedar/internal/testing/embeddedschema"
	"github.com/kcedar/kcedar/internal/testing/policytest"
	"github.com/kcedar/kcedar/internal/testing/testgen/zoo"
)

// BenchmarkFileChange is the cost of a one-policy change to one of 8 files
// holding the zoo of 100,000 policies, as kcedar serve pays it: the store
// loads the change (checked against the embedded schema), the engine of the
// new set is made, and one request sees it. Each operation adds a policy
// at the end of the file, edits it or removes it, or inserts one at the top
// of the file (moving every later policy of the file) or removes it, in
// turn. It reports the wall time of a change
// (ms/change) and its share of the full load's (pct-of-full). The changes
// run under the pprof label phase=change: `-cpuprofile` then shows them
// apart from the full load with `-tagfocus phase=change`.
func BenchmarkFileChange(b *testing.B) {
	schema := embeddedschema.Schema(b)
	checker, err := lint.NewChecker(schema)
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	blocks := strings.SplitAfter(zoo.Policies(100000, 1), "\n\n")
	const files = 8
	per := (len(blocks) + files - 1) / files
	var target string
	var base []byte
	for i := range files {
		path := filepath.Join(dir, fmt.Sprintf("zoo-%d.cedar", i))
		data := []byte(strings.Join(blocks[min(len(blocks), i*per):min(len(blocks), (i+1)*per)], ""))
		if err := os.WriteFile(path, data, 0o644); err != nil {
			b.Fatal(err)
		}
		if i == files/2 {
			target, base = path, data
		}
	}
	s := store.NewStore([]string{dir}, checker.Validator(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	s.Checker, s.Schema = checker, schema
	t0 := time.Now()
	if err := s.Load(); err != nil {
		b.Fatal(err)
	}
	serving := NewServing(s, schema, EngineOptions{})
	serving.Engine()
	full := time.Since(t0)
	incremental := 0
	s.OnReload = func(r store.ReloadResult) {
		if r.Incremental {
			incremental++
		}
	}
	changes := []struct{ head, tail, user, verb string }{
		{"", "\n@id(\"edit-marker\")\npermit (principal == k8s::User::\"edit-marker\", action == k8s::Action::\"get\", resource is core::pods);\n", "edit-marker", "get"},
		{"", "\n@id(\"edit-marker\")\npermit (principal == k8s::User::\"edit-marker\", action == k8s::Action::\"list\", resource is core::pods);\n", "edit-marker", "list"},
		{"", "", "edit-marker", "list"},
		// At the top of the file: every later policy of the file moves.
		{"@id(\"edit-top\")\npermit (principal == k8s::User::\"edit-top\", action == k8s::Action::\"get\", resource is core::pods);\n\n", "", "edit-top", "get"},
		{"", "", "edit-top", "get"},
	}
	ctx := context.Background()
	b.ResetTimer()
	pprof.Do(ctx, pprof.Labels("phase", "change"), func(ctx context.Context) {
		for i := 0; i < b.N; i++ {
			ch := changes[i%len(changes)]
			if err := os.WriteFile(target, append(append([]byte(ch.head), base...), ch.tail...), 0o644); err != nil {
				b.Fatal(err)
			}
			if err := s.Load(); err != nil {
				b.Fatal(err)
			}
			d := serving.Engine().Authorize(ctx, policytest.ResourceRequest(ch.user, nil, ch.verb, "", "pods", "", "default", ""))
			if want := ch.tail != "" || ch.head != ""; d.IsAllowed() != want {
				b.Fatalf("change %d: allowed %v, want %v", i, d.IsAllowed(), want)
			}
		}
	})
	b.StopTimer()
	if incremental != b.N {
		b.Fatalf("%d of %d loads built by the change", incremental, b.N)
	}
	perChange := b.Elapsed() / time.Duration(b.N)
	b.ReportMetric(float64(perChange.Microseconds())/1000, "ms/change")
	b.ReportMetric(100*float64(perChange)/float64(full), "pct-of-full")
}
