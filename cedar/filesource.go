package cedar

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kcedar/kcedar/internal/cedarlang/lint"
	"github.com/kcedar/kcedar/internal/cluster/policyobjects"
	"github.com/kcedar/kcedar/internal/engine"
	gen "github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/store"
	"github.com/kcedar/kcedar/schemagen"
)

// DefaultSettle is the settle window of kcedar serve's policy files.
const DefaultSettle = store.DefaultSettle

// FileSourceOptions configure a FileSource.
type FileSourceOptions struct {
	// Logger gets the source's log lines; nil: slog.Default().
	Logger *slog.Logger
	// Settle: the files load only once they read the same twice, Settle
	// apart (a file renamed into place or a ConfigMap update loads at
	// once); 0 loads what is read.
	Settle time.Duration
	// ReloadInterval is how often Run reads the files when no file system
	// event says they changed; 0: every 2 seconds.
	ReloadInterval time.Duration
	// AllowEmpty: a load without policies serves (NoOpinion to every
	// request); otherwise it is a load error. With PolicyObjects an empty
	// set always serves: the cluster says what exists.
	AllowEmpty bool
	// MaxPolicyLoss refuses a load that removes more than this share of the
	// serving set's policies (by id); 0 or 1 turns the check off.
	MaxPolicyLoss float64
	// KeepForbids refuses a load that removes a forbid (by id).
	KeepForbids bool
	// Registerer, if set, gets the metrics of the loads and of the policy
	// objects.
	Registerer prometheus.Registerer
	// PolicyObjects, if set, adds the policies of CedarPolicy and
	// NamespacedCedarPolicy objects of a cluster to the files'.
	PolicyObjects *PolicyObjects
	// OnRefusedWrite, if set, is told of every write of a policy object
	// PolicyWebhook refuses.
	OnRefusedWrite func(RefusedWrite)
}

// FileSource is a PolicySource of policy files and directories (searched
// recursively for *.cedar files), and of policy objects: they load as one
// set, validated against one schema, and reload when they change. A load
// that fails (an invalid policy, an empty set, a refused shrink) keeps the
// last good set serving. Safe for concurrent use.
type FileSource struct {
	store     *store.Store
	admission *policyobjects.AdmissionHandler
	objects   *objectSource // nil without PolicyObjects
	logger    *slog.Logger
	interval  time.Duration
	metrics   *sourceMetrics

	mu          sync.Mutex
	subscribers []func(ReloadEvent)
	// serving is the checker of the schema the set serves with, for
	// DropPendingSchema.
	serving *policyobjects.Checker
}

// ReloadEvent is one load of a FileSource's policies.
type ReloadEvent struct {
	Time time.Time
	// Err is why the load failed (the last good set serves on); nil when
	// it succeeded.
	Err error
	// Changed: the policies read differed from the serving set's.
	Changed bool
	// Repeat: the same content as the previous failed load.
	Repeat bool
	// Incremental: the set was built from the one serving before, only what
	// changed parsed and validated again.
	Incremental bool
	// Policies, Generation and Hash describe the set serving after the
	// load (SourceStatus).
	Policies   int
	Generation uint64
	Hash       string
}

// NewFileSource returns the source of the policies in paths (files, or
// directories searched recursively for *.cedar files), and of the policy
// objects opts names, validated against schema. Without policy objects it
// loads the files at once: if they do not load, the source is not Ready,
// and Status says why. With policy objects, the first load waits for them
// (Run).
func NewFileSource(schema *schemagen.Schema, paths []string, opts FileSourceOptions) (*FileSource, error) {
	s := gen.FromPublic(schema)
	if s == nil {
		return nil, errors.New("cedar.NewFileSource: no schema")
	}
	if len(paths) == 0 && opts.PolicyObjects == nil {
		return nil, errors.New("cedar.NewFileSource: no policy files and no policy objects")
	}
	checker, err := lint.NewChecker(s)
	if err != nil {
		return nil, err
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	st := store.NewStore(paths, checker.Validator(), logger)
	st.Checker, st.Schema = checker, checker.Schema
	st.Settle, st.AllowEmpty, st.MaxPolicyLoss, st.KeepForbids = opts.Settle, opts.AllowEmpty, opts.MaxPolicyLoss, opts.KeepForbids
	fs := &FileSource{store: st, logger: logger, interval: opts.ReloadInterval, metrics: newSourceMetrics(st.FileReads)}
	fs.serving = policyobjects.NewCheckerFrom(checker)
	fs.admission = &policyobjects.AdmissionHandler{Checker: fs.serving, Current: st.Current, Logger: logger}
	if opts.OnRefusedWrite != nil {
		fs.admission.OnRefused = func(r policyobjects.RefusedWrite) { opts.OnRefusedWrite(RefusedWrite(r)) }
	}
	st.OnReload = fs.reloaded
	if opts.PolicyObjects != nil {
		if fs.objects, err = newObjectSource(opts.PolicyObjects, fs, logger); err != nil {
			return nil, err
		}
	}
	if err := fs.registerMetrics(opts.Registerer); err != nil {
		return nil, err
	}
	if fs.objects == nil {
		if err := st.Load(); err != nil {
			logger.Error("no valid policy set yet; not ready until the files are fixed (the problems are logged above)")
		}
	}
	return fs, nil
}

// registerMetrics adds the source's metrics to reg (nil: none).
func (fs *FileSource) registerMetrics(reg prometheus.Registerer) error {
	if reg == nil {
		return nil
	}
	if err := fs.metrics.register(reg); err != nil {
		return err
	}
	if err := fs.admission.RegisterMetrics(reg); err != nil {
		return err
	}
	if fs.objects != nil {
		return fs.objects.registerMetrics(reg)
	}
	return nil
}

// reloaded is the store's report of a load: metrics first, then every
// subscriber in order.
func (fs *FileSource) reloaded(r store.ReloadResult) {
	var gen uint64
	if cur := fs.store.Current(); cur != nil {
		gen = cur.Generation
	}
	fs.metrics.observe(r, gen)
	ev := ReloadEvent{Time: r.Time, Err: r.Err, Changed: r.Changed, Repeat: r.Repeat, Incremental: r.Incremental, Policies: r.Policies, Generation: gen, Hash: r.Hash}
	fs.mu.Lock()
	subs := fs.subscribers
	fs.mu.Unlock()
	for _, f := range subs {
		f(ev)
	}
}

// Subscribe has f called after every load, in the order of subscription,
// while no other load runs: keep it short.
func (fs *FileSource) Subscribe(f func(ReloadEvent)) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.subscribers = append(fs.subscribers[:len(fs.subscribers):len(fs.subscribers)], f)
}

func (fs *FileSource) policies(*gen.Schema) (engine.PolicySource, error) { return fs.store, nil }

func (fs *FileSource) follow(moved func()) {
	fs.Subscribe(func(ev ReloadEvent) {
		if ev.Err == nil && ev.Changed {
			moved()
		}
	})
}

// Run reloads the policies when they change until ctx ends: the files on
// file system events and every ReloadInterval; with policy objects, the
// objects as the cluster's watch reports them (and the files once the
// objects have synced, so that the files never serve without them), and
// the objects' status when this replica is elected to write it.
func (fs *FileSource) Run(ctx context.Context) error {
	if fs.objects == nil {
		fs.store.Watch(ctx, fs.interval)
		return nil
	}
	return fs.objects.run(ctx, func() { go fs.store.Watch(ctx, fs.interval) })
}

// Load reads the policies now, as Run does when they change, and returns
// the load's error; the last good set serves on after a failed load.
func (fs *FileSource) Load() error { return fs.store.Load() }

// Ready is nil once a set serves (with policy objects, once they have
// synced from the cluster too); otherwise it says why not.
func (fs *FileSource) Ready() error {
	if fs.objects != nil && !fs.objects.source.Synced() {
		return errors.New("policy objects not synced from the API server yet")
	}
	if fs.store.Current() == nil {
		if err := fs.store.LastError(); err != nil {
			return fmt.Errorf("no valid policy set loaded: %w", err)
		}
		return errors.New("no valid policy set loaded")
	}
	return nil
}

// SourceStatus is what a FileSource serves, and what went wrong.
type SourceStatus struct {
	// Serving: a set serves; Policies, Generation and Hash (hex SHA-256
	// over the names and contents of its files and objects) describe it.
	Serving    bool
	Policies   int
	Generation uint64
	Hash       string
	// LastError is why the latest load failed (the last good set serves
	// on), and LastErrorTime when that content first failed; nil when the
	// latest load succeeded.
	LastError     error
	LastErrorTime time.Time
	// Problems need an operator though the set serves (a status Lease
	// this replica cannot take).
	Problems []string
}

// Status is the source's status now.
func (fs *FileSource) Status() SourceStatus {
	var st SourceStatus
	if cur := fs.store.Current(); cur != nil {
		st.Serving, st.Policies, st.Generation, st.Hash = true, cur.Len(), cur.Generation, fs.store.Hash()
	}
	st.LastErrorTime, st.LastError = fs.store.LastFailure()
	if fs.objects != nil {
		if p := fs.objects.leaseProblem(); p != "" {
			st.Problems = append(st.Problems, p)
		}
	}
	return st
}

// String describes the serving set as /readyz reports it: "serving 12
// policies (generation 3, hash 0123456789ab)".
func (st SourceStatus) String() string {
	if !st.Serving {
		return "no policy set serving"
	}
	return fmt.Sprintf("serving %d policies (generation %d, hash %.12s)", st.Policies, st.Generation, st.Hash)
}

// Degraded is what needs an operator though a set serves: the latest load
// failed, or a Problem; "" when nothing does.
func (st SourceStatus) Degraded() string {
	var problems []string
	if st.LastError != nil && st.Serving {
		// Still ready: the last good set serves. Taking every replica out of
		// service for a bad edit would fail the whole cluster's requests.
		problems = append(problems, fmt.Sprintf("the latest reload failed %s ago, fix the policy files: %v", time.Since(st.LastErrorTime).Round(time.Second), st.LastError))
	}
	return strings.Join(append(problems, st.Problems...), "; ")
}

// PolicyWebhook is the validating admission webhook for policy objects
// (AdmissionReview in, AdmissionReview out): it refuses an object whose
// policies do not validate against the source's schema, one that takes a
// policy id the serving set already uses, and, with policy objects, a
// write that grants access its writer does not hold.
func (fs *FileSource) PolicyWebhook() http.Handler { return fs.admission }

// SetSchema moves the source to schema: writes of policy objects are
// checked against it from now on, and the policies move to it only if all
// of them validate against it; otherwise the last good set serves on with
// its schema, the error says what does not validate, and the objects that
// do not report it in their status until SetSchema succeeds or
// DropPendingSchema.
func (fs *FileSource) SetSchema(schema *schemagen.Schema) error {
	s := gen.FromPublic(schema)
	if s == nil {
		return errors.New("cedar.FileSource.SetSchema: no schema")
	}
	l, err := lint.NewChecker(s)
	if err != nil {
		return err
	}
	sc := store.SchemaCheck{Schema: s, Validator: l.Validator(), Checker: l}
	checker := policyobjects.NewCheckerFrom(l)
	fs.admission.SetChecker(checker)
	if fs.objects != nil {
		err = fs.objects.rebase(sc, checker)
	} else {
		err = fs.store.Rebase(sc)
	}
	if err == nil {
		fs.mu.Lock()
		fs.serving = checker
		fs.mu.Unlock()
	}
	return err
}

// DropPendingSchema forgets a schema SetSchema refused (the cluster's API is
// back to the schema that serves): writes are checked against the serving
// schema again, and so are the objects.
func (fs *FileSource) DropPendingSchema() {
	fs.mu.Lock()
	fs.admission.SetChecker(fs.serving)
	fs.mu.Unlock()
	if fs.objects != nil {
		fs.objects.dropPending()
	}
}
