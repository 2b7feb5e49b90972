package replay

import (
	"context"
	"errors"
	"io"
	"runtime"
	"strconv"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/conditions"
	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/lib/parallel"
	"github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/upstream"
)

// DefaultMaxLineBytes bounds one line of a log: longer lines are counted as
// oversized and skipped.
const DefaultMaxLineBytes = 4 << 20

// batchLines and batchBytes bound the lines read before they are decided
// together, on every core: memory stays flat however long the log is.
const (
	batchLines = 2048
	batchBytes = 8 << 20
)

// Options configure a Replayer.
type Options struct {
	// Namespaces are the Namespace objects that fill namespaceObject; nil:
	// none is known, and a decision that needs one is undecidable.
	Namespaces entities.NamespaceLookup
	// MaxLineBytes bounds one line (DefaultMaxLineBytes when 0).
	MaxLineBytes int
	// MaxOpenRequests bounds the requests held from their ResponseStarted
	// event until their ResponseComplete (DefaultMaxOpenRequests when 0).
	MaxOpenRequests int
	// Reach tells which requests kcedar sees; those it does not are left
	// out of the comparison. nil: every request but those of system:masters
	// members (allowed before any authorizer).
	Reach *Reach
	// RBAC are the cluster's RBAC grants as Cedar permits (kcedar rbac
	// convert), composed with kcedar as kube-apiserver's chain composes
	// them: after kcedar (kcedar's Allow or Deny is final, on its NoOpinion
	// RBAC decides), or before it with RBACFirst. nil: kcedar alone, its
	// NoOpinion counted as not allowed.
	RBAC      *cedarlang.PolicySet
	RBACFirst bool
	// RBACSource says where RBAC came from, for the summary ("the
	// cluster's: 364 permits from 66 bindings").
	RBACSource string
	// Mode is how kcedar serve answers a conditional decision (""
	// is upstream.ServeModeNone): folded, answered Allow under admission
	// enforcement (the decision annotation records it), or left to
	// admission (conditions-review: the annotation records the decision
	// after admission, so the conditions are evaluated against the logged
	// object).
	Mode upstream.ServeMode
	// OnChange, if set, is called for every changed request, in the order
	// of the inputs.
	OnChange func(Change) error
	// Progress, if set, is called after each batch of lines with the counts
	// so far.
	Progress func(*Summary)
}

// Replayer decides the requests of audit logs with one policy set and
// compares the decisions with the logged ones.
type Replayer struct {
	opts    Options
	workers chan *worker
	sum     *Summary
	pairs   *pairing
}

// New returns a Replayer deciding with the policies ps against schema s,
// through the offline engine (as kcedar serve decides).
func New(s *schemagen.Schema, ps *cedarlang.PolicySet, opts Options) *Replayer {
	if opts.MaxLineBytes <= 0 {
		opts.MaxLineBytes = DefaultMaxLineBytes
	}
	if opts.MaxOpenRequests <= 0 {
		opts.MaxOpenRequests = DefaultMaxOpenRequests
	}
	if opts.Mode == "" {
		opts.Mode = upstream.ServeModeNone
	}
	n := runtime.GOMAXPROCS(0)
	r := &Replayer{opts: opts, workers: make(chan *worker, n), sum: newSummary(), pairs: newPairing(opts.MaxOpenRequests)}
	var rbac *engine.Engine
	if opts.RBAC != nil {
		rbac = engine.NewEngine(s, opts.RBAC, engine.EngineOptions{})
	}
	for range n {
		lookup := &recordingLookup{known: opts.Namespaces}
		kcedar := conditions.New(engine.NewEngine(s, ps, engine.EngineOptions{Namespaces: lookup}), conditions.NewCodec(conditions.RandomKeyring()))
		chain := &upstream.Chain{Kcedar: kcedar, Mode: opts.Mode, RBAC: rbac, RBACFirst: opts.RBACFirst}
		r.workers <- &worker{chain: chain, lookup: lookup, reach: opts.Reach}
	}
	r.sum.Chain, r.sum.Mode, r.sum.RBAC = r.chainName(), string(opts.Mode), opts.RBACSource
	return r
}

// chainName names the chain the requests are decided by.
func (r *Replayer) chainName() string {
	c := upstream.Chain{RBACFirst: r.opts.RBACFirst}
	if r.opts.RBAC != nil {
		c.RBAC = &engine.Engine{}
	}
	return c.String()
}

// Summary is what the inputs read so far came to, after Finish (whose
// OnChange error it drops: call Finish first to see it).
func (r *Replayer) Summary() *Summary {
	_ = r.Finish()
	return r.sum
}

// Finish decides the requests seen so far only at their ResponseStarted
// event (no ResponseComplete or Panic came: a watch still open, exec,
// attach, port-forward). Call it after the last Read; the error is
// OnChange's.
func (r *Replayer) Finish() error {
	for _, f := range r.pairs.drain() {
		if err := r.count(f); err != nil {
			return err
		}
	}
	return nil
}

// Read replays one input (name is how reports call it: a file, or <stdin>).
// Malformed or oversized lines are counted and the run goes on; an input
// cut short (a truncated gzip stream) is reported in the summary with how
// far it got. The error is the context's, or OnChange's.
func (r *Replayer) Read(ctx context.Context, name string, in io.Reader) error {
	lr, err := newLineReader(in, r.opts.MaxLineBytes)
	if err != nil {
		r.sum.cutShort(name, 0, 0, err)
		return nil
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		batch, readErr := readBatch(lr)
		if err := r.decideBatch(name, batch); err != nil {
			return err
		}
		if r.opts.Progress != nil {
			r.opts.Progress(r.sum)
		}
		if errors.Is(readErr, io.EOF) {
			return nil
		}
		if readErr != nil {
			r.sum.cutShort(name, lr.no, lr.counted.n, inputError(lr, readErr))
			return nil
		}
	}
}

// Unreadable records an input that could not be opened (err says why) as
// cut short before its first line.
func (r *Replayer) Unreadable(name string, err error) {
	r.sum.Unreadable++
	r.sum.Problems = append(r.sum.Problems, Problem{Input: name, CutShort: true, Message: "not read: " + err.Error()})
}

// inputError says how an input was cut short.
func inputError(lr *lineReader, err error) error {
	if lr.gz && errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("truncated gzip stream")
	}
	return err
}

// readBatch reads lines up to the batch bounds; the error ends the input.
func readBatch(lr *lineReader) ([]line, error) {
	var batch []line
	size := 0
	for len(batch) < batchLines && size < batchBytes {
		l, err := lr.next()
		if err != nil {
			return batch, err
		}
		batch = append(batch, l)
		size += len(l.data)
	}
	return batch, nil
}

// decideBatch decides the lines on every core and folds the results into
// the summary in their order.
func (r *Replayer) decideBatch(name string, batch []line) error {
	results := make([]result, len(batch))
	parallel.For(len(batch), func(i int) {
		w := <-r.workers
		results[i] = w.process(batch[i])
		r.workers <- w
	})
	for i, res := range results {
		for _, f := range r.pairs.admit(folded{input: name, no: batch[i].no, res: res}) {
			if err := r.count(f); err != nil {
				return err
			}
		}
	}
	return nil
}

// count folds one result into the summary, and passes a change on.
func (r *Replayer) count(f folded) error {
	r.sum.add(f.input, f.no, f.res)
	if f.res.stage == stageResponseStarted && f.res.kind >= kindUnchanged {
		r.sum.DecidedAtResponseStarted++
	}
	if f.res.change != nil && r.opts.OnChange != nil {
		return r.opts.OnChange(*f.res.change)
	}
	return nil
}

// recordingLookup is a worker's NamespaceLookup: the known namespaces, and
// the name of the last one asked for and not known (the engine asks only
// when a candidate policy reads namespaceObject).
type recordingLookup struct {
	known  entities.NamespaceLookup
	missed string
}

// Namespace implements entities.NamespaceLookup.
func (l *recordingLookup) Namespace(name string) (map[string]any, bool) {
	if l.known != nil {
		if obj, ok := l.known.Namespace(name); ok {
			return obj, true
		}
	}
	l.missed = name
	return nil, false
}

// worker decides one line at a time with its own decider (its lookup
// records what one request needed).
type worker struct {
	chain  *upstream.Chain
	lookup *recordingLookup
	reach  *Reach
}

// process decodes one line and decides its request.
func (w *worker) process(l line) result {
	switch {
	case l.oversize:
		return result{kind: kindOversized}
	case len(l.data) == 0:
		return result{kind: kindBlank}
	}
	if stage, ok := otherStage(l.data); ok {
		return result{kind: kindSkipped, reason: stageReason(stage)}
	}
	ev, res := readEvent(l.data)
	if res != nil {
		return *res
	}
	r := w.processEvent(ev)
	r.auditID, r.stage = ev.AuditID, ev.Stage
	return r
}

// processEvent decides the request of an audit event of a stage that
// records a decision, if kcedar would have seen it and the log says what
// happened to it.
func (w *worker) processEvent(ev *auditEvent) result {
	switch ev.Stage {
	case stageResponseComplete, stagePanic, stageResponseStarted:
	default:
		return result{kind: kindSkipped, reason: stageReason(ev.Stage)}
	}
	was, why := ev.logged()
	if why != "" {
		return result{kind: kindSkipped, reason: why}
	}
	if ev.effectiveUser().Username == "" {
		return result{kind: kindSkipped, reason: "no user: the event names no user.username (nor impersonatedUser.username)"}
	}
	spec, err := ev.sar()
	if err != nil {
		return result{kind: kindUndecidable, reason: whyNotRebuilt, detail: ev.AuditID + ": " + err.Error()}
	}
	if why := w.reach.notSeen(spec); why != "" {
		return result{kind: kindNotSeen, reason: why}
	}
	req, err := entities.RequestFromSAR(spec)
	if err != nil {
		return result{kind: kindUndecidable, reason: whyNotRebuilt, detail: ev.AuditID + ": " + err.Error()}
	}
	r := w.decide(ev, req, was)
	r.basis = was.basis
	return r
}

// stageReason is why an event of another stage is skipped.
func stageReason(stage string) string {
	if stage == stageRequestReceived {
		return "stage RequestReceived (the request is decided at its ResponseStarted, ResponseComplete or Panic event)"
	}
	return "stage " + strconv.Quote(clip(stage)) + " is not an audit stage"
}

// decide decides the event's rebuilt request with the chain and compares
// it with was: the chain's answer at authorization time, or, for an answer
// left to admission (conditions-review), its conditions evaluated against
// the logged object.
func (w *worker) decide(ev *auditEvent, req *entities.Request, was logged) result {
	ctx := context.Background()
	w.lookup.missed = ""
	a := w.chain.Authorize(ctx, req)
	// Only the authorization asks for a namespace its policies read; the
	// evaluation of conditions below looks every namespace up.
	missed := w.lookup.missed
	d, by := concreteAnswer(a)
	if a.Type() == engine.DecisionConditional {
		obj := ev.fullObject(req.Verb, req.Subresource)
		if obj == nil {
			return result{kind: kindConditional, reason: whyConditional(ev, req)}
		}
		adm := &conditions.Admission{Operation: conditions.DefaultOperation(req.Verb, req.Subresource), Object: obj}
		d, by = w.chain.Admitted(ctx, a, req, adm)
	}
	now := d.Type().String()
	if missed != "" && !d.IsAllowed() {
		// Unknown, the namespace's labels could have allowed (or kept from
		// denying): an Allow is the only answer that holds whatever they are.
		return result{kind: kindUndecidable, reason: whyNamespace}
	}
	return compare(ev, req, was, now, by, policyIDs(d))
}

// concreteAnswer is the chain's answer at authorization time with the
// deciding authorizer's decision (its policies): kcedar's, RBAC's, or a
// NoOpinion.
func concreteAnswer(a upstream.ChainAnswer) (engine.Decision, string) {
	switch {
	case a.By == upstream.ChainKcedar && a.Kcedar.Enforced:
		return engine.Allowed(conditionPolicies(a.Kcedar.Decision), nil), a.By
	case a.By == upstream.ChainKcedar:
		return a.Kcedar.Decision.FailureDecision(), a.By
	case a.By == upstream.ChainRBAC:
		return *a.RBAC, a.By
	}
	return engine.NoOpinion(nil), ""
}

// conditionPolicies are the policies of a decision's allow conditions.
func conditionPolicies(d engine.Decision) []*cedarlang.Policy {
	var ps []*cedarlang.Policy
	for _, r := range d.AllowConditions() {
		ps = append(ps, r.Policy)
	}
	return ps
}

// policyIDs are the ids of d's policies.
func policyIDs(d engine.Decision) []string {
	var ids []string
	for _, p := range d.Policies() {
		ids = append(ids, p.ID)
	}
	return ids
}

// Reasons a request is not compared.
const (
	whyNotRebuilt = "the request could not be rebuilt from requestURI and verb"
	whyNamespace  = "the decision needs namespaceObject (give --namespace-objects with the namespace)"
)

// whyConditional is why a conditional decision stays conditional.
func whyConditional(ev *auditEvent, req *entities.Request) string {
	switch {
	case req.Verb != "create":
		return "conditional on the object of a " + req.Verb + " (not in the log as admission sees it)"
	case req.Subresource != "":
		return "conditional on the object of a create of a subresource"
	}
	return "conditional on the object (not in the log: level " + ev.Level + ")"
}

// compare sets what happened (allowed or not) against now.
func compare(ev *auditEvent, req *entities.Request, was logged, now, by string, policies []string) result {
	allowed := now == engine.DecisionAllow.String()
	if was.allowed == allowed {
		return result{kind: kindUnchanged}
	}
	c := &Change{AuditID: ev.AuditID, Was: was.decision(), Now: now, DecidedBy: by, Policies: append([]string{}, policies...),
		User: req.User.Name, Verb: req.Verb, Resource: resourceName(req), Namespace: req.Namespace, Name: req.Name,
		ComparedWith: was.basis}
	if allowed {
		return result{kind: kindNewlyAllowed, change: c}
	}
	return result{kind: kindNewlyDenied, change: c}
}
