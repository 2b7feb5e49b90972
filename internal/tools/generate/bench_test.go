package generate

import (
	"bytes"
	"context"
	"flag"
	"math/rand/v2"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/kcedar/kcedar/internal/testing/embeddedschema"
	"github.com/kcedar/kcedar/internal/testing/testgen"
	"github.com/kcedar/kcedar/internal/tools/rbacconvert"
	"github.com/kcedar/kcedar/internal/tools/replay"
)

// writeLog, when set, is where the benchmarks write their synthesized log,
// to time kcedar generate and kcedar replay on the same events:
// go test ./internal/tools/generate -run '^$' -bench Generate -args -generate.log=/tmp/audit.log
var writeLog = flag.String("generate.log", "", "write the benchmarks' synthesized audit log to this file")

// benchLog is a Metadata-level log of 100,000 requests, each a
// RequestReceived and a ResponseComplete event (200,000 events of about
// 1 KB), by the synthesized users with their realistic shapes, a third of
// them forbidden.
func benchLog(b *testing.B) []byte {
	b.Helper()
	const distinct, requests = 5000, 100000
	r := rand.New(rand.NewPCG(42, 7))
	users := logUsers(r)
	var unique [][]byte
	for i := range distinct {
		u := users[r.IntN(len(users))]
		verb, uri := drawRequest(r)
		decision := "allow"
		if r.IntN(3) == 0 {
			decision = "forbid"
		}
		done := auditLine(b, i, verb, uri, u, decision)
		received := bytes.Replace(bytes.Replace(done, []byte(`"stage":"ResponseComplete"`), []byte(`"stage":"RequestReceived"`), 1),
			[]byte(`,"responseStatus":{"metadata":{},"code":200}`), nil, 1)
		unique = append(unique, append(received, done...))
	}
	var log bytes.Buffer
	for i := range requests {
		log.Write(unique[i%distinct])
	}
	if *writeLog != "" {
		if err := os.WriteFile(*writeLog, log.Bytes(), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return log.Bytes()
}

// BenchmarkGenerate folds the 200,000 events of benchLog into policies
// and reports events per second over all cores and the heap in use after
// (which grows with distinct permissions, not with events).
func BenchmarkGenerate(b *testing.B) { benchGenerate(b, false) }

// BenchmarkGenerateWithExisting is BenchmarkGenerate with existing
// policies (a generated RBAC cluster, converted) deciding every allowed
// request.
func BenchmarkGenerateWithExisting(b *testing.B) { benchGenerate(b, true) }

func benchGenerate(b *testing.B, existing bool) {
	s := embeddedschema.Schema(b)
	log := benchLog(b)
	opts := Options{}
	if existing {
		cluster := testgen.RBACConfig(1, 40, 80)
		conv, err := rbacconvert.Convert(s, &rbacconvert.Input{Roles: cluster.Roles, ClusterRoles: cluster.ClusterRoles,
			RoleBindings: cluster.RoleBindings, ClusterRoleBindings: cluster.ClusterRoleBindings})
		if err != nil {
			b.Fatal(err)
		}
		opts.Existing = valid(b, s, conv.Policies)
	}
	const events = 200000
	var res *Result
	b.SetBytes(int64(len(log)))
	cpu0 := cpuSeconds(b)
	b.ResetTimer()
	for range b.N {
		g := New(s, opts)
		_, err := replay.ReadRecords(context.Background(), bytes.NewReader(log), 0, func(recs []replay.Record) error {
			batch := make([]Input, len(recs))
			for i, r := range recs {
				batch[i] = Input{Request: r.Request, Allowed: r.Allowed, Time: r.Time}
			}
			g.Add(batch)
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		if res, err = g.Policies(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(events*b.N)/b.Elapsed().Seconds(), "events/s")
	// On a loaded machine wall time says little: events per second of CPU
	// time used (all cores together) is the throughput per core.
	b.ReportMetric(float64(events*b.N)/(cpuSeconds(b)-cpu0), "events/cpu-s")
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	b.ReportMetric(float64(m.HeapInuse)/(1<<20), "heap-MiB")
	b.ReportMetric(float64(res.Count), "policies")
}

// cpuSeconds is the CPU time the process used so far (user and system).
func cpuSeconds(b *testing.B) float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}
