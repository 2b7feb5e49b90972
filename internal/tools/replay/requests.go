package replay

import (
	"context"
	"errors"
	"io"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"

	"github.com/kcedar/kcedar/internal/entities"
)

// Event is one audited request as replay reads it, whatever the log's
// format (audit.k8s.io/v1 or v1beta1, kind-only, unwrapped from an Azure
// diagnostic record): what the authorizer saw, and what happened.
type Event struct {
	ev   *auditEvent
	spec *authorizationv1.SubjectAccessReviewSpec
	was  logged
}

// AuditID is the request's auditID.
func (e Event) AuditID() string { return e.ev.AuditID }

// Stage is the stage of the event the request was read from:
// ResponseComplete, Panic, or ResponseStarted for a request without
// either.
func (e Event) Stage() string { return e.ev.Stage }

// User is the user the request was authorized as: the impersonated user
// where there is one.
func (e Event) User() authenticationv1.UserInfo { return e.ev.effectiveUser() }

// SubjectAccessReview is the spec kube-apiserver's webhook authorizer
// sends for the request (rebuilt from requestURI and verb).
func (e Event) SubjectAccessReview() *authorizationv1.SubjectAccessReviewSpec {
	return e.spec.DeepCopy()
}

// Request is the request as kcedar's server reads the SubjectAccessReview.
func (e Event) Request() (*entities.Request, error) { return entities.RequestFromSAR(e.spec) }

// Allowed reports whether the request was allowed, as the log says.
func (e Event) Allowed() bool { return e.was.allowed }

// ComparedWith is what Allowed was read from: ComparedWithAnnotation, or
// ComparedWithResponseCode (a hint).
func (e Event) ComparedWith() string { return e.was.basis }

// ReadOptions configure ReadRequests.
type ReadOptions struct {
	// MaxLineBytes bounds one line (DefaultMaxLineBytes when 0); longer
	// lines are skipped.
	MaxLineBytes int
	// MaxOpenRequests bounds the requests held from their ResponseStarted
	// until their ResponseComplete (DefaultMaxOpenRequests when 0).
	MaxOpenRequests int
	// Reach leaves out the requests kcedar never sees (nil: only those of
	// system:masters members).
	Reach *Reach
}

// ReadRequests reads one input (plain or gzipped) as Replayer.Read does and
// calls fn once per request kcedar would have seen and whose outcome the
// log tells, in the order of the log: at its ResponseComplete or Panic
// event, or, for a request with a ResponseStarted event alone (a watch
// still open, exec, port-forward), at the end of the input. Lines that are
// no such request are passed over; Replayer counts them. The error is the
// context's, fn's, or the input's (cut short).
func ReadRequests(ctx context.Context, in io.Reader, opts ReadOptions, fn func(Event) error) error {
	if opts.MaxLineBytes <= 0 {
		opts.MaxLineBytes = DefaultMaxLineBytes
	}
	if opts.MaxOpenRequests <= 0 {
		opts.MaxOpenRequests = DefaultMaxOpenRequests
	}
	lr, err := newLineReader(in, opts.MaxLineBytes)
	if err != nil {
		return err
	}
	held := newHeldEvents(opts.MaxOpenRequests)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		l, err := lr.next()
		if errors.Is(err, io.EOF) {
			return held.drain(fn)
		}
		if err != nil {
			return inputError(lr, err)
		}
		e, ok := requestOf(l, opts.Reach)
		if !ok {
			continue
		}
		if err := held.admit(e, fn); err != nil {
			return err
		}
	}
}

// requestOf is the request of one line, if it is one kcedar would have
// seen and whose outcome the log tells.
func requestOf(l line, reach *Reach) (Event, bool) {
	if l.oversize || len(l.data) == 0 {
		return Event{}, false
	}
	if _, ok := otherStage(l.data); ok {
		return Event{}, false
	}
	ev, res := readEvent(l.data)
	if res != nil || (ev.Stage != stageResponseComplete && ev.Stage != stagePanic && ev.Stage != stageResponseStarted) {
		return Event{}, false
	}
	was, why := ev.logged()
	if why != "" || ev.effectiveUser().Username == "" {
		return Event{}, false
	}
	spec, err := ev.sar()
	if err != nil || reach.notSeen(spec) != "" {
		return Event{}, false
	}
	return Event{ev: ev, spec: spec, was: was}, true
}

// heldEvents pairs the stages of a request as pairing does, for
// ReadRequests: ResponseStarted events wait for their ResponseComplete.
type heldEvents struct {
	max   int
	byID  map[string]Event
	queue []string
	early map[string]bool
}

func newHeldEvents(max int) *heldEvents {
	return &heldEvents{max: max, byID: map[string]Event{}, early: map[string]bool{}}
}

// admit passes e to fn now, or holds it (a ResponseStarted), or drops it
// (the end of a request already passed on).
func (h *heldEvents) admit(e Event, fn func(Event) error) error {
	id := e.AuditID()
	if id == "" {
		return fn(e)
	}
	if e.Stage() == stageResponseStarted {
		if _, ok := h.byID[id]; ok || h.early[id] {
			return nil
		}
		h.byID[id] = e
		h.queue = append(h.queue, id)
		return h.evict(fn)
	}
	delete(h.byID, id)
	if h.early[id] {
		delete(h.early, id)
		return nil
	}
	return fn(e)
}

// evict passes on the oldest held past max.
func (h *heldEvents) evict(fn func(Event) error) error {
	for len(h.byID) > h.max && len(h.queue) > 0 {
		id := h.queue[0]
		h.queue = h.queue[1:]
		e, ok := h.byID[id]
		if !ok {
			continue
		}
		delete(h.byID, id)
		if len(h.early) < earlyPerHeld*h.max {
			h.early[id] = true
		}
		if err := fn(e); err != nil {
			return err
		}
	}
	h.queue = compact(h.queue, func(id string) bool { _, ok := h.byID[id]; return ok }, h.max)
	return nil
}

// drain passes on every request still held, oldest first.
func (h *heldEvents) drain(fn func(Event) error) error {
	for _, id := range h.queue {
		if e, ok := h.byID[id]; ok {
			delete(h.byID, id)
			if err := fn(e); err != nil {
				return err
			}
		}
	}
	h.queue = h.queue[:0]
	return nil
}
