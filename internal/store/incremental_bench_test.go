package store

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kcedar/kcedar/internal/cedarlang/lint"
	"github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/testing/testgen/zoo"
)

// BenchmarkPolicyObjectChange is the cost of a change to one policy object
// (a Source) among 2,000 holding the zoo of 100,000 policies, checked
// against the default schema as kcedar serve checks them: each operation
// adds a policy to one object, or removes it, and loads. It reports the
// full load's CPU time (full-cpu-ms), each change's (cpu-ms/op: the
// process's, garbage collection included) and its share (pct-of-full).
func BenchmarkPolicyObjectChange(b *testing.B) {
	docs, err := schemagen.Default()
	if err != nil {
		b.Fatal(err)
	}
	schema, err := schemagen.Generate(docs)
	if err != nil {
		b.Fatal(err)
	}
	checker, err := lint.NewChecker(schema)
	if err != nil {
		b.Fatal(err)
	}
	blocks := strings.SplitAfter(zoo.Policies(100000, 1), "\n\n")
	const objects = 2000
	srcs := make([]Source, objects)
	for i := range srcs {
		per := (len(blocks) + objects - 1) / objects
		srcs[i] = Source{Name: fmt.Sprintf("CedarPolicy/zoo-%04d", i), Data: []byte(strings.Join(blocks[min(len(blocks), i*per):min(len(blocks), (i+1)*per)], ""))}
	}
	s := NewStore(nil, checker.Validator(), quietLogger())
	s.Checker, s.Schema = checker, schema
	s.SetSources(srcs)
	cpu0 := processCPU(b)
	if err := s.Load(); err != nil {
		b.Fatal(err)
	}
	full := processCPU(b) - cpu0
	base := srcs[objects/2].Data
	added := append(append([]byte{}, base...), "\n@id(\"object-marker\")\npermit (principal == k8s::User::\"marker\", action == k8s::Action::\"get\", resource is core::pods);\n"...)
	var incremental int
	s.OnReload = func(r ReloadResult) {
		if r.Incremental {
			incremental++
		}
	}
	b.ResetTimer()
	cpu0 = processCPU(b)
	for i := 0; i < b.N; i++ {
		srcs[objects/2].Data = added
		if i%2 == 1 {
			srcs[objects/2].Data = base
		}
		s.SetSources(srcs)
		if err := s.Load(); err != nil {
			b.Fatal(err)
		}
	}
	if incremental != b.N {
		b.Fatalf("%d of %d loads built by the change", incremental, b.N)
	}
	per := (processCPU(b) - cpu0) / time.Duration(b.N)
	b.ReportMetric(float64(full.Milliseconds()), "full-cpu-ms")
	b.ReportMetric(float64(per.Microseconds())/1000, "cpu-ms/op")
	b.ReportMetric(100*float64(per)/float64(full), "pct-of-full")
}

// processCPU is the CPU time (user and system) the process used so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
