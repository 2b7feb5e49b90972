package server

import (
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/kcedar/kcedar/cedar"
	"github.com/kcedar/kcedar/internal/wire"
)

// DecisionLog writes one JSON line per authorization decision: every deny
// (and every conditional or erroring decision), a sample of allows and
// no-opinions, all under a rate limit so a flood of requests cannot fill the
// disk or slow decisions down. Lines that the limit drops are counted and
// reported in the next line written ("dropped").
type DecisionLog struct {
	mu      sync.Mutex
	w       io.Writer
	limiter *rate.Limiter
	// SampleAllows logs one in SampleAllows allows and no-opinions (1: all).
	sampleAllows uint64
	seen         atomic.Uint64
	dropped      atomic.Uint64
	now          func() time.Time
}

// NewDecisionLog logs to w, one allow in sampleAllows (at least 1), at most
// perSecond lines a second (bursts of up to burst lines).
func NewDecisionLog(w io.Writer, sampleAllows int, perSecond float64, burst int) *DecisionLog {
	if sampleAllows < 1 {
		sampleAllows = 1
	}
	return &DecisionLog{w: w, limiter: rate.NewLimiter(rate.Limit(perSecond), max(burst, 1)), sampleAllows: uint64(sampleAllows), now: time.Now}
}

// DecisionRecord is one line of the decision log.
type DecisionRecord struct {
	Time        time.Time `json:"time"`
	User        string    `json:"user"`
	Groups      []string  `json:"groups,omitempty"`
	Verb        string    `json:"verb"`
	APIGroup    string    `json:"apiGroup,omitempty"`
	Resource    string    `json:"resource,omitempty"`
	Subresource string    `json:"subresource,omitempty"`
	Namespace   string    `json:"namespace,omitempty"`
	Name        string    `json:"name,omitempty"`
	Path        string    `json:"path,omitempty"`
	Decision    string    `json:"decision"`
	Policies    []string  `json:"policies,omitempty"`
	Conditions  []string  `json:"conditions,omitempty"`
	Errors      []string  `json:"errors,omitempty"`
	// Audit are the audit policies that would have changed the decision
	// (each with its would-be decision); such a line is never sampled out.
	Audit []cedar.AuditReport `json:"audit,omitempty"`
	// Refusal is why kcedar's webhook refused a write of a policy object
	// (invalid, duplicate-id, escalation, too-many-checks, check-failed);
	// such a line has Decision "Deny" and the refusal message in Errors.
	Refusal    string `json:"refusal,omitempty"`
	LatencyUS  int64  `json:"latencyMicros"`
	Generation uint64 `json:"policyGeneration"`
	Dropped    uint64 `json:"dropped,omitempty"` // lines dropped by the rate limit since the last one
}

// complete reports whether a decision is always logged (not sampled).
func complete(rec *DecisionRecord) bool {
	return len(rec.Errors) > 0 || len(rec.Audit) > 0 || (rec.Decision != "Allow" && rec.Decision != "NoOpinion")
}

// Log writes rec if sampling and the rate limit let it through.
func (l *DecisionLog) Log(rec DecisionRecord) {
	if l == nil {
		return
	}
	if !complete(&rec) && l.seen.Add(1)%l.sampleAllows != 0 {
		return
	}
	if !l.limiter.Allow() {
		l.dropped.Add(1)
		return
	}
	rec.Dropped = l.dropped.Swap(0)
	line, err := json.Marshal(rec)
	if err != nil {
		return
	}
	line = append(line, '\n')
	l.mu.Lock()
	_, _ = l.w.Write(line)
	l.mu.Unlock()
}

// logDecision logs a SubjectAccessReview's decision: the review, the
// answer rendered for the caller (its label and any conditions sent), and
// what the authorizer's Details say (the deciding policies, errors, audit
// findings, the generation of the set that decided).
func (e *endpoint) logDecision(spec *wire.SubjectAccessReviewSpec, answer sarAnswer, details *cedar.Details, took time.Duration) {
	if e.decisionLog == nil {
		return
	}
	rec := DecisionRecord{Time: e.decisionLog.now().UTC(), User: spec.User, Groups: spec.Groups,
		Decision: answer.Label, LatencyUS: took.Microseconds(), Generation: details.Generation, Audit: details.Audit,
		Policies: details.Policies, Errors: details.Errors}
	if ra := spec.ResourceAttributes; ra != nil {
		rec.Verb, rec.APIGroup, rec.Resource, rec.Subresource = ra.Verb, ra.Group, ra.Resource, ra.Subresource
		rec.Namespace, rec.Name = decidedName(ra)
	} else if na := spec.NonResourceAttributes; na != nil {
		rec.Verb, rec.Path = na.Verb, na.Path
	}
	if d := answer.Status.ConditionalDecision; d != nil && d.ConditionsMap != nil {
		for _, list := range [][]wire.Condition{d.ConditionsMap.DenyConditions, d.ConditionsMap.NoOpinionConditions, d.ConditionsMap.AllowConditions} {
			for _, c := range list {
				rec.Conditions = append(rec.Conditions, c.ID)
			}
		}
	}
	e.decisionLog.Log(rec)
}

// warnLimited logs at WARN, at most a few times a second across the server
// (401s and TLS handshake failures can come in floods).
type warnLimited struct {
	logger  *slog.Logger
	limiter *rate.Limiter
	dropped atomic.Uint64
}

func newWarnLimited(logger *slog.Logger) *warnLimited {
	return &warnLimited{logger: logger, limiter: rate.NewLimiter(rate.Limit(2), 10)}
}

func (w *warnLimited) warn(msg string, args ...any) {
	if !w.limiter.Allow() {
		w.dropped.Add(1)
		return
	}
	if n := w.dropped.Swap(0); n > 0 {
		args = append(args, "suppressed", n)
	}
	w.logger.Warn(msg, args...)
}

// TLSErrorLog returns an http.Server ErrorLog writer: TLS handshake failures
// go to the logger at WARN (rate limited), anything else at DEBUG.
func TLSErrorLog(logger *slog.Logger) io.Writer {
	return &tlsErrorWriter{logger: logger, warn: newWarnLimited(logger)}
}

type tlsErrorWriter struct {
	logger *slog.Logger
	warn   *warnLimited
}

func (t *tlsErrorWriter) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	if strings.Contains(msg, "TLS handshake error") {
		t.warn.warn("TLS handshake failed", "detail", msg)
	} else {
		t.logger.Debug(msg)
	}
	return len(p), nil
}
