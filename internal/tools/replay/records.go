package replay

import (
	"bytes"
	"context"
	"errors"
	"io"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"

	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/lib/parallel"
)

// Record is one logged authorization: the request as the authorizer saw it
// (rebuilt as Read rebuilds it) and the logged decision. Tools that learn
// from a log (kcedar generate) read records instead of replaying.
type Record struct {
	Request *entities.Request
	// Allowed is the authorization.k8s.io/decision annotation: allow (true)
	// or forbid (false).
	Allowed bool
	// Time is the event's requestReceivedTimestamp (zero when not logged).
	Time time.Time
	// Review is the SubjectAccessReview spec the webhook authorizer sends
	// for the request (what Reach.NotSeen decides on).
	Review *authorizationv1.SubjectAccessReviewSpec
}

// RecordCounts are what ReadRecords read.
type RecordCounts struct {
	Lines    int // lines read
	Requests int // records: requests with a decision
	Skipped  int // lines that are no request's record (other stages, malformed, unrebuildable, ...)
}

// ReadRecords reads one input as ReadRequests does (plain or gzipped, every
// format replay reads, a ResponseStarted-only request once at the end of
// the input, the requests of system:masters members left out) and calls
// fn with the records of each batch of lines, in the log's order; the
// lines are decoded and the requests rebuilt on every core. The error is
// the context's, fn's, or the input's when it is cut short.
func ReadRecords(ctx context.Context, in io.Reader, maxLineBytes int, fn func([]Record) error) (RecordCounts, error) {
	var counts RecordCounts
	if maxLineBytes <= 0 {
		maxLineBytes = DefaultMaxLineBytes
	}
	lr, err := newLineReader(in, maxLineBytes)
	if err != nil {
		return counts, err
	}
	r := &recordReader{held: newHeldEvents(DefaultMaxOpenRequests), pending: map[*auditEvent]Record{}}
	for {
		if err := ctx.Err(); err != nil {
			return counts, err
		}
		batch, readErr := readBatch(lr)
		counts.Lines += len(batch)
		if err := r.admit(batch); err != nil {
			return counts, err
		}
		if errors.Is(readErr, io.EOF) {
			err = r.held.drain(r.emit)
		} else if readErr != nil {
			err = inputError(lr, readErr)
		}
		counts.Requests += len(r.out)
		out := r.out
		r.out = nil
		if ferr := fn(out); ferr != nil {
			return counts, ferr
		}
		if err != nil || errors.Is(readErr, io.EOF) {
			counts.Skipped = counts.Lines - counts.Requests
			return counts, err
		}
	}
}

// recordReader pairs the events of a batch (decoded on every core) as
// ReadRequests pairs them.
type recordReader struct {
	held *heldEvents
	// pending are the records of the events read and not passed on yet.
	pending map[*auditEvent]Record
	out     []Record
}

// admit decodes the batch's lines on every core and passes its requests
// on in order.
func (r *recordReader) admit(batch []line) error {
	events := make([]Event, len(batch))
	recs := make([]Record, len(batch))
	ok := make([]bool, len(batch))
	parallel.For(len(batch), func(i int) {
		if events[i], ok[i] = requestOf(batch[i], nil); !ok[i] {
			return
		}
		req, err := events[i].Request()
		if ok[i] = err == nil; ok[i] {
			recs[i] = Record{Request: req, Allowed: events[i].Allowed(), Time: receivedAt(batch[i].data), Review: events[i].spec}
		}
	})
	for i := range batch {
		if !ok[i] {
			continue
		}
		if prev, ok := r.held.byID[events[i].AuditID()]; ok && events[i].Stage() != stageResponseStarted {
			delete(r.pending, prev.ev) // the request's end replaces its ResponseStarted
		}
		r.pending[events[i].ev] = recs[i]
		if err := r.held.admit(events[i], r.emit); err != nil {
			return err
		}
		// Passed on, or dropped: only a ResponseStarted now held waits.
		if h, ok := r.held.byID[events[i].AuditID()]; !ok || h.ev != events[i].ev {
			delete(r.pending, events[i].ev)
		}
	}
	return nil
}

// emit passes one request's record on.
func (r *recordReader) emit(e Event) error {
	if rec, ok := r.pending[e.ev]; ok {
		r.out = append(r.out, rec)
		delete(r.pending, e.ev)
	}
	return nil
}

// receivedAt is the line's requestReceivedTimestamp, found without
// decoding the event again (zero when absent or not RFC 3339).
func receivedAt(data []byte) time.Time {
	const key = `"requestReceivedTimestamp":"`
	i := bytes.Index(data, []byte(key))
	if i < 0 {
		return time.Time{}
	}
	rest := data[i+len(key):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, string(rest[:j]))
	if err != nil {
		return time.Time{}
	}
	return t
}
