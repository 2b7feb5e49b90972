package schemarefresh

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	metadatafake "k8s.io/client-go/metadata/fake"

	"github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/testing/promtest"
	"github.com/kcedar/kcedar/internal/testing/schematest"
)

// cluster is a fake cluster: what Read returns. Its documents'
// fingerprint is fp ("": unknown, generate every time).
type cluster struct {
	mu        sync.Mutex
	schema    *schemagen.Schema
	fp        string
	err       error
	loads     int
	generated int
}

func (c *cluster) set(s *schemagen.Schema, err error) {
	c.mu.Lock()
	c.schema, c.err = s, err
	c.mu.Unlock()
}

// reads is how many times the cluster was read.
func (c *cluster) reads() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.loads
}

func (c *cluster) read(context.Context) (Reading, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.loads++
	s, err := c.schema, c.err
	return Reading{Fingerprint: c.fp, Schema: func() (*schemagen.Schema, error) {
		c.mu.Lock()
		c.generated++
		c.mu.Unlock()
		return s, nil
	}}, err
}

// target refuses schemas while refuse says so, as a Target whose policies do
// not validate against them.
type target struct {
	mu      sync.Mutex
	serving *schemagen.Schema
	refuse  func(*schemagen.Schema) error
	applies int
	drops   int
}

func (t *target) Apply(s *schemagen.Schema) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.applies++
	if t.refuse != nil {
		if err := t.refuse(s); err != nil {
			return err
		}
	}
	t.serving = s
	return nil
}

func (t *target) DropPending() {
	t.mu.Lock()
	t.drops++
	t.mu.Unlock()
}

func (t *target) counts() (applies, drops int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.applies, t.drops
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func without(resource string) *schemagen.Schema {
	s := schematest.Schema()
	delete(s.Resources, schemagen.ResourceKey{Resource: resource})
	return s
}

// start runs a refresher over a fake cluster serving initial, in the
// calling test's synctest bubble (time is the bubble's fake clock); every
// check and retry reports its result on the returned channel. configure, if
// set, adjusts the refresher before it runs.
func start(t *testing.T, initial *schemagen.Schema, tg *target, configure ...func(*Refresher)) (*Refresher, *cluster, chan string, *prometheus.Registry) {
	t.Helper()
	c := &cluster{schema: initial}
	r := New(initial, "", c.read, tg, quiet())
	results := make(chan string, 100)
	r.OnResult = func(res string) { results <- res }
	r.Debounce, r.MaxDelay, r.FollowUps = time.Millisecond, time.Second, nil
	for _, f := range configure {
		f(r)
	}
	reg := prometheus.NewPedanticRegistry()
	if err := r.RegisterMetrics(reg); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	synctest.Wait() // Run hashed the serving schema and waits for work
	if r.Active() == "" {
		t.Fatal("Run did not hash the serving schema")
	}
	return r, c, results, reg
}

func next(t *testing.T, results chan string) string {
	t.Helper()
	select {
	case res := <-results:
		return res
	case <-time.After(10 * time.Second):
		t.Fatal("no check ran") // in a bubble: once nothing else could happen
		return ""
	}
}

func TestUnchangedSchemaIsNotApplied(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tg := &target{}
		r, _, results, reg := start(t, schematest.Schema(), tg)
		r.Trigger()
		if res := next(t, results); res != ResultUnchanged {
			t.Fatalf("result %s", res)
		}
		if a, _ := tg.counts(); a != 0 {
			t.Fatalf("%d applies of an unchanged schema", a)
		}
		if got := promtest.Value(t, reg, "kcedar_schema_refresh_total", map[string]string{"result": ResultUnchanged}); got != 1 {
			t.Fatalf("unchanged count %v", got)
		}
		if r.Degraded() != "" {
			t.Fatal(r.Degraded())
		}
	})
}

func TestChangedSchemaAppliedOrPendingUntilThePoliciesValidate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		initial, changed := schematest.Schema(), without("configmaps")
		broken := true
		tg := &target{refuse: func(s *schemagen.Schema) error {
			if broken {
				return errors.New("CedarPolicy/cm:1:40: unknown entity type core::configmaps")
			}
			return nil
		}}
		r, c, results, reg := start(t, initial, tg)
		oldHash := r.Active()
		c.set(changed, nil)
		r.Trigger()
		if res := next(t, results); res != ResultInvalid {
			t.Fatalf("result %s", res)
		}
		if r.Active() != oldHash || tg.serving != nil {
			t.Fatal("a refused schema became the serving one")
		}
		d := r.Degraded()
		if !strings.Contains(d, "do not validate") || !strings.Contains(d, "CedarPolicy/cm:1:40") || !strings.Contains(d, oldHash) {
			t.Fatalf("degraded detail %q", d)
		}
		if got := promtest.Value(t, reg, "kcedar_schema_refresh_pending", nil); got != 1 {
			t.Fatalf("pending %v", got)
		}
		if got := promtest.Value(t, reg, "kcedar_schema_info", map[string]string{"hash": oldHash}); got != 1 {
			t.Fatalf("the serving schema's hash is not reported: %v", got)
		}

		// The policies changed: Retry applies the refused schema without
		// reading the cluster again.
		loads := c.loads
		broken = false
		r.Retry()
		if res := next(t, results); res != ResultApplied {
			t.Fatalf("retry: %s", res)
		}
		if c.loads != loads {
			t.Fatal("Retry read the cluster")
		}
		newHash, _ := Hash(changed)
		if r.Active() != newHash || tg.serving != changed || r.Degraded() != "" {
			t.Fatalf("after the retry: active %s, degraded %q", r.Active(), r.Degraded())
		}
		if got := promtest.Value(t, reg, "kcedar_schema_info", map[string]string{"hash": newHash}); got != 1 {
			t.Fatalf("hash gauge %v", got)
		}
		if got := promtest.Value(t, reg, "kcedar_schema_refresh_pending", nil); got != 0 {
			t.Fatalf("pending %v", got)
		}
		// Nothing pending: a Retry does nothing.
		applies, _ := tg.counts()
		r.Retry()
		r.Trigger() // a check (unchanged) to know the retry was handled
		if res := next(t, results); res != ResultUnchanged {
			t.Fatalf("result %s", res)
		}
		if a, _ := tg.counts(); a != applies {
			t.Fatal("a Retry with nothing pending applied something")
		}
	})
}

func TestTheAPIComingBackDropsTheRefusedSchema(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		initial := schematest.Schema()
		tg := &target{refuse: func(s *schemagen.Schema) error { return errors.New("refused") }}
		r, c, results, _ := start(t, initial, tg)
		c.set(without("configmaps"), nil)
		r.Trigger()
		if res := next(t, results); res != ResultInvalid {
			t.Fatalf("result %s", res)
		}
		c.set(schematest.Schema(), nil) // equal to the serving one, another value
		r.Trigger()
		if res := next(t, results); res != ResultUnchanged {
			t.Fatalf("result %s", res)
		}
		if _, drops := tg.counts(); drops != 1 || r.Degraded() != "" {
			t.Fatalf("drops %d, degraded %q", drops, r.Degraded())
		}
		// Nothing left to retry.
		applies, _ := tg.counts()
		r.Retry()
		r.Trigger()
		next(t, results)
		if a, _ := tg.counts(); a != applies {
			t.Fatal("a dropped schema was retried")
		}
	})
}

func TestDiscoveryErrorsKeepTheSchema(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tg := &target{}
		r, c, results, reg := start(t, schematest.Schema(), tg)
		active := r.Active()
		c.set(nil, errors.New("the server is currently unable to handle the request"))
		r.Trigger()
		if res := next(t, results); res != ResultError {
			t.Fatalf("result %s", res)
		}
		if a, _ := tg.counts(); a != 0 || r.Active() != active || !strings.Contains(r.Degraded(), "unable to handle") {
			t.Fatalf("after an error: applies %d, degraded %q", a, r.Degraded())
		}
		if got := promtest.Value(t, reg, "kcedar_schema_refresh_total", map[string]string{"result": ResultError}); got != 1 {
			t.Fatalf("error count %v", got)
		}
		c.set(schematest.Schema(), nil)
		r.Trigger()
		if res := next(t, results); res != ResultUnchanged || r.Degraded() != "" {
			t.Fatalf("after recovery: %s %q", res, r.Degraded())
		}
	})
}

// A burst of triggers is one check, Debounce after the last trigger,
// followed by the follow-ups. The bubble's fake clock makes the times exact.
func TestTriggersAreDebouncedAndFollowedUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, c, results, _ := start(t, schematest.Schema(), &target{}, func(r *Refresher) {
			r.Debounce, r.MaxDelay, r.FollowUps = 200*time.Millisecond, 10*time.Second, []time.Duration{time.Second, 5 * time.Second}
		})
		begin := time.Now()
		for i := 0; i < 50; i++ {
			r.Trigger()
		}
		for i := 0; i < 3; i++ { // more triggers, each within Debounce of the last
			time.Sleep(100 * time.Millisecond)
			r.Trigger()
		}
		// The last trigger at 300ms: the check at 500ms, then the follow-ups.
		for _, want := range []time.Duration{500 * time.Millisecond, 1500 * time.Millisecond, 6500 * time.Millisecond} {
			next(t, results)
			if got := time.Since(begin); got != want {
				t.Fatalf("a check at %v, want %v", got, want)
			}
		}
		if n := c.reads(); n != 3 {
			t.Fatalf("%d reads for one burst and two follow-ups", n)
		}
		select {
		case res := <-results:
			t.Fatalf("a check (%s) at %v after the follow-ups", res, time.Since(begin))
		case <-time.After(time.Hour):
		}
	})
}

// Triggers coming faster than Debounce do not hold the check off past
// MaxDelay after the first.
func TestTriggersAreCheckedWithinMaxDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, c, results, _ := start(t, schematest.Schema(), &target{}, func(r *Refresher) {
			r.Debounce, r.MaxDelay = 200*time.Millisecond, time.Second
		})
		begin := time.Now()
		stop := make(chan struct{})
		go func() { // a trigger every 100ms until told to stop
			for {
				r.Trigger()
				select {
				case <-stop:
					return
				case <-time.After(100 * time.Millisecond):
				}
			}
		}()
		next(t, results)
		close(stop)
		if got := time.Since(begin); got != time.Second {
			t.Fatalf("the check at %v, want MaxDelay (1s)", got)
		}
		if n := c.reads(); n != 1 {
			t.Fatalf("%d reads", n)
		}
	})
}

func TestPeriodicChecks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &cluster{schema: schematest.Schema()}
		c.set(without("secrets"), nil)
		r := New(schematest.Schema(), "", c.read, &target{}, quiet())
		results := make(chan string, 100)
		r.OnResult = func(res string) { results <- res }
		r.Interval = 3 * time.Second
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		begin := time.Now()
		go r.Run(ctx)
		if res := next(t, results); res != ResultApplied {
			t.Fatalf("result %s", res)
		}
		if res := next(t, results); res != ResultUnchanged {
			t.Fatalf("result %s", res)
		}
		if got := time.Since(begin); got != 6*time.Second {
			t.Fatalf("the second periodic check at %v, want 6s", got)
		}
	})
}

func TestWatchTriggersOnAPIChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		scheme := metadatafake.NewTestScheme()
		metav1.AddMetaToScheme(scheme)
		client := metadatafake.NewSimpleMetadataClient(scheme)
		tg := &target{}
		r, _, results, _ := start(t, schematest.Schema(), tg)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		if err := r.Watch(ctx, client); err != nil {
			t.Fatal(err)
		}
		next(t, results) // the check once the informers synced
		for gvr, kind := range map[schema.GroupVersionResource]string{CRDResource: "CustomResourceDefinition", APIServiceResource: "APIService"} {
			o := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: gvr.GroupVersion().String(), Kind: kind}, ObjectMeta: metav1.ObjectMeta{Name: "v1.example.com"}}
			if _, err := client.Resource(gvr).(metadatafake.MetadataClient).CreateFake(o, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if res := next(t, results); res != ResultUnchanged {
				t.Fatalf("%s: %s", kind, res)
			}
		}
	})
}

// The documents' fingerprint spares generating the schema: the same
// documents as the serving schema's, or as a refused schema's.
func TestFingerprintsSpareGeneration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		initial := schematest.Schema()
		tg := &target{refuse: func(s *schemagen.Schema) error { return errors.New("refused") }}
		r, c, results, _ := start(t, initial, tg)
		r.mu.Lock()
		r.activeFP = "fp1"
		r.mu.Unlock()
		generated := func() int { c.mu.Lock(); defer c.mu.Unlock(); return c.generated }
		c.fp = "fp1"
		r.Trigger()
		if res := next(t, results); res != ResultUnchanged || generated() != 0 {
			t.Fatalf("same documents: %s, %d generated", res, generated())
		}
		// Other documents, the same schema: generated once, then known.
		c.fp = "fp2"
		c.set(schematest.Schema(), nil)
		for i := 0; i < 2; i++ {
			r.Trigger()
			if res := next(t, results); res != ResultUnchanged || generated() != 1 {
				t.Fatalf("documents giving the serving schema, check %d: %s, %d generated", i, res, generated())
			}
		}
		// A refused schema: re-applied on every check, generated once.
		c.fp = "fp3"
		c.set(without("configmaps"), nil)
		for i := 0; i < 2; i++ {
			r.Trigger()
			if res := next(t, results); res != ResultInvalid || generated() != 2 {
				t.Fatalf("refused schema, check %d: %s, %d generated", i, res, generated())
			}
		}
		if a, _ := tg.counts(); a != 2 {
			t.Fatalf("%d applies, want 2", a)
		}
	})
}

func TestFingerprintOfDocuments(t *testing.T) {
	docs, err := schemagen.Default()
	if err != nil {
		t.Fatal(err)
	}
	a, err := Fingerprint(docs)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := Fingerprint(docs); a != b {
		t.Fatal("not deterministic")
	}
	for p, doc := range docs.OpenAPI {
		docs.OpenAPI[p] = append(append([]byte{}, doc...), ' ')
		break
	}
	if b, _ := Fingerprint(docs); a == b {
		t.Fatal("a changed OpenAPI document kept the fingerprint")
	}
}
