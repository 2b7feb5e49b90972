package replay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/lib/parallel"
	"github.com/kcedar/kcedar/internal/schemagen"
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
}

// New returns a Replayer deciding with the policies ps against schema s,
// through the offline engine (as kcedar serve decides).
func New(s *schemagen.Schema, ps *cedarlang.PolicySet, opts Options) *Replayer {
	if opts.MaxLineBytes <= 0 {
		opts.MaxLineBytes = DefaultMaxLineBytes
	}
	n := runtime.GOMAXPROCS(0)
	r := &Replayer{opts: opts, workers: make(chan *worker, n), sum: newSummary()}
	for range n {
		lookup := &recordingLookup{known: opts.Namespaces}
		r.workers <- &worker{decider: engine.NewEngine(s, ps, engine.NewCodec(engine.RandomKeyring()), engine.EngineOptions{Namespaces: lookup}), lookup: lookup}
	}
	return r
}

// Summary is what the inputs read so far came to.
func (r *Replayer) Summary() *Summary { return r.sum }

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
		r.sum.add(name, batch[i].no, res)
		if res.change != nil && r.opts.OnChange != nil {
			if err := r.opts.OnChange(*res.change); err != nil {
				return err
			}
		}
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
	decider *engine.Engine
	lookup  *recordingLookup
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
	ev, err := decodeEvent(l.data)
	if err != nil {
		return result{kind: kindMalformed, detail: err.Error()}
	}
	if why := ev.skipReason(); why != "" {
		return result{kind: kindSkipped, reason: why}
	}
	return w.decide(ev)
}

// skipReason is why an event is not one request's decision ("" if it is).
func (ev *auditEvent) skipReason() string {
	switch {
	case ev.Kind != eventKind || ev.APIVersion != eventAPIVersion:
		return "not an audit.k8s.io/v1 Event"
	case ev.Stage != stageResponseComplete && ev.Stage != stagePanic:
		return stageReason(ev.Stage)
	}
	switch ev.Annotations[decisionAnnotation] {
	case wasAllow, wasForbid:
		return ""
	case "":
		return "no authorization decision (not authorized: e.g. authentication failed)"
	}
	return "unknown authorization decision " + fmt.Sprintf("%q", ev.Annotations[decisionAnnotation])
}

// stageReason is why an event of another stage is skipped.
func stageReason(stage string) string {
	return "stage " + stage + " (a request is decided at ResponseComplete or Panic)"
}

// decide rebuilds the event's request, decides it and compares.
func (w *worker) decide(ev *auditEvent) result {
	req, err := ev.rebuild()
	if err != nil {
		return result{kind: kindUndecidable, reason: whyNotRebuilt, detail: ev.AuditID + ": " + err.Error()}
	}
	w.lookup.missed = ""
	rep := w.decider.Report(context.Background(), req, nil)
	// Only the authorization asks for a namespace its policies read; the
	// evaluation of conditions below looks every namespace up.
	missed := w.lookup.missed
	now := rep.Decision
	if now == engine.DecisionConditional.String() {
		obj := ev.fullObject(req.Verb, req.Subresource)
		if obj == nil {
			return result{kind: kindConditional, reason: whyConditional(ev, req)}
		}
		adm := &engine.Admission{Operation: engine.DefaultOperation(req.Verb, req.Subresource), Object: obj}
		rep = w.decider.Report(context.Background(), req, adm)
		now = rep.Outcome
	}
	if missed != "" && now != engine.DecisionAllow.String() {
		// Unknown, the namespace's labels could have allowed (or kept from
		// denying): an Allow is the only answer that holds whatever they are.
		return result{kind: kindUndecidable, reason: whyNamespace}
	}
	return compare(ev, req, now, rep.Policies)
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

// compare sets what happened (allow or forbid) against now.
func compare(ev *auditEvent, req *entities.Request, now string, policies []string) result {
	was := ev.Annotations[decisionAnnotation]
	allowed := now == engine.DecisionAllow.String()
	if (was == wasAllow) == allowed {
		return result{kind: kindUnchanged}
	}
	c := &Change{AuditID: ev.AuditID, Was: was, Now: now, Policies: append([]string{}, policies...),
		User: req.User.Name, Verb: req.Verb, Resource: resourceName(req), Namespace: req.Namespace, Name: req.Name}
	if allowed {
		return result{kind: kindNewlyAllowed, change: c}
	}
	return result{kind: kindNewlyDenied, change: c}
}
