package policyobjects

import (
	"context"
	"fmt"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/cache"

	"github.com/kcedar/kcedar/internal/cedarlang/lint"
	"github.com/kcedar/kcedar/internal/store"
	"github.com/kcedar/kcedar/internal/testing/embeddedschema"
	"github.com/kcedar/kcedar/internal/testing/testgen/zoo"
)

// BenchmarkOfferOneObjectChange is what kcedar serve does when one of
// 2,000 CedarPolicy objects holding the zoo of 100,000 policies changes:
// the offer reads the informer's objects, checks the changed one, hands the
// sources to the store and loads (by the change). Each operation adds a
// policy to the object, or removes it. It reports the time of an offer
// (ms/offer) beside the first offer's (first-ms). The offers run under the
// pprof label phase=change (`-tagfocus phase=change`).
func BenchmarkOfferOneObjectChange(b *testing.B) {
	schema := embeddedschema.Schema(b)
	lc, err := lint.NewChecker(schema)
	if err != nil {
		b.Fatal(err)
	}
	st := store.NewStore(nil, lc.Validator(), quietLogger())
	st.Checker, st.Schema = lc, schema
	s := &Source{Store: st, Checker: NewCheckerFrom(lc), Logger: quietLogger()}
	s.init()
	inf := cache.NewSharedIndexInformer(&cache.ListWatch{}, nil, 0, cache.Indexers{})
	s.informer[ClusterResource] = inf
	blocks := strings.SplitAfter(zoo.Policies(100000, 1), "\n\n")
	const objects = 2000
	per := (len(blocks) + objects - 1) / objects
	for i := range objects {
		content := strings.Join(blocks[min(len(blocks), i*per):min(len(blocks), (i+1)*per)], "")
		if err := inf.GetStore().Add(object(KindCluster, "", fmt.Sprintf("zoo-%04d", i), content, 1)); err != nil {
			b.Fatal(err)
		}
	}
	t0 := time.Now()
	s.offer()
	first := time.Since(t0)
	if st.Current() == nil || st.Current().Len() != 100000 {
		b.Fatalf("the first offer serves %v policies", st.Current())
	}
	base := strings.Join(blocks[objects/2*per:(objects/2+1)*per], "")
	added := base + "\n@id(\"object-marker\")\npermit (principal == k8s::User::\"marker\", action == k8s::Action::\"get\", resource is core::pods);\n"
	gen := st.Current().Generation
	b.ResetTimer()
	pprof.Do(context.Background(), pprof.Labels("phase", "change"), func(context.Context) {
		for i := 0; i < b.N; i++ {
			content := added
			if i%2 == 1 {
				content = base
			}
			if err := inf.GetStore().Update(object(KindCluster, "", fmt.Sprintf("zoo-%04d", objects/2), content, int64(i+2))); err != nil {
				b.Fatal(err)
			}
			s.offer()
			if next := st.Current().Generation; next != gen+1 {
				b.Fatalf("offer %d: generation %d, want %d", i, next, gen+1)
			}
			gen++
		}
	})
	b.StopTimer()
	b.ReportMetric(float64((b.Elapsed()/time.Duration(b.N)).Microseconds())/1000, "ms/offer")
	b.ReportMetric(float64(first.Milliseconds()), "first-ms")
}
