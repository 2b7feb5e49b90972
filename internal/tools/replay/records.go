package replay

import (
	"bytes"
	"context"
	"errors"
	"io"
	"time"

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
}

// RecordCounts are what ReadRecords read.
type RecordCounts struct {
	Lines    int // lines read
	Requests int // records: requests with a decision
	Skipped  int // lines that are not a decided request (other stages, malformed, unrebuildable)
}

// ReadRecords reads one input (plain or gzipped, as Read does) and calls fn
// with the records of each batch of lines, in the input's order, decoded
// on every core. Lines that are not a request's decision are counted as
// skipped. The error is the context's, fn's, or the input's when it is cut
// short (a truncated gzip stream).
func ReadRecords(ctx context.Context, in io.Reader, maxLineBytes int, fn func([]Record) error) (RecordCounts, error) {
	var counts RecordCounts
	if maxLineBytes <= 0 {
		maxLineBytes = DefaultMaxLineBytes
	}
	lr, err := newLineReader(in, maxLineBytes)
	if err != nil {
		return counts, err
	}
	for {
		if err := ctx.Err(); err != nil {
			return counts, err
		}
		batch, readErr := readBatch(lr)
		recs := make([]Record, len(batch))
		ok := make([]bool, len(batch))
		parallel.For(len(batch), func(i int) { recs[i], ok[i] = recordOf(batch[i]) })
		out := recs[:0]
		for i := range batch {
			if ok[i] {
				out = append(out, recs[i])
			}
		}
		counts.Lines += len(batch)
		counts.Requests += len(out)
		counts.Skipped += len(batch) - len(out)
		if err := fn(out); err != nil {
			return counts, err
		}
		if errors.Is(readErr, io.EOF) {
			return counts, nil
		}
		if readErr != nil {
			return counts, inputError(lr, readErr)
		}
	}
}

// recordOf decodes one line into a record, if it is a request's decision.
func recordOf(l line) (Record, bool) {
	if l.oversize || len(l.data) == 0 {
		return Record{}, false
	}
	if _, other := otherStage(l.data); other {
		return Record{}, false
	}
	ev, err := decodeEvent(l.data)
	if err != nil || ev.skipReason() != "" {
		return Record{}, false
	}
	req, err := ev.rebuild()
	if err != nil {
		return Record{}, false
	}
	return Record{Request: req, Allowed: ev.Annotations[decisionAnnotation] == wasAllow, Time: receivedAt(l.data)}, true
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
