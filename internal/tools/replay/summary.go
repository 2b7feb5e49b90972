package replay

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/kcedar/kcedar/internal/lib/safetext"
)

// kind is what became of one line.
type kind int

const (
	kindBlank kind = iota
	kindMalformed
	kindOversized
	kindForeign
	kindSkipped
	kindNotSeen
	kindUndecidable
	kindConditional
	kindUnchanged
	kindNewlyDenied
	kindNewlyAllowed
)

// result is one line's outcome.
type result struct {
	kind   kind
	reason string // foreign, skipped, not seen, undecidable, conditional: why (few distinct values)
	detail string // malformed, undecidable: the particulars, for Problems
	change *Change
	// basis is what a decided request was compared with.
	basis string
	// auditID and stage pair the stages of one request (see pairing).
	auditID, stage string
}

// Change is one request whose decision changed, as --changes -o jsonl
// writes it.
type Change struct {
	AuditID string `json:"auditID"`
	// Was is the logged decision: allow or forbid.
	Was string `json:"was"`
	// Now is the chain's (Summary.Chain): Allow, Deny or NoOpinion (no
	// authorizer of the chain allowed: not allowed).
	Now string `json:"now"`
	// DecidedBy names the authorizer whose decision Now is: kcedar or rbac
	// (empty for NoOpinion).
	DecidedBy string `json:"decidedBy,omitempty"`
	// Policies are the ids of the deciding policies (none for NoOpinion);
	// RBAC's are those kcedar rbac convert writes (rbac/...).
	Policies  []string `json:"policies"`
	User      string   `json:"user"`
	Verb      string   `json:"verb"`
	Resource  string   `json:"resource"`
	Namespace string   `json:"namespace,omitempty"`
	Name      string   `json:"name,omitempty"`
	// ComparedWith is what Was was read from: ComparedWithAnnotation or
	// ComparedWithResponseCode (a hint).
	ComparedWith string `json:"comparedWith"`
}

// Change kinds, as Group.Change names them.
const (
	NewlyDenied  = "newly denied"
	NewlyAllowed = "newly allowed"
)

// Group is the changes of one kind for one user, verb and resource.
type Group struct {
	Change string `json:"change"`
	// ComparedWith is what the logged decisions were read from.
	ComparedWith string `json:"comparedWith"`
	User         string `json:"user"`
	Verb         string `json:"verb"`
	Resource     string `json:"resource"`
	Count        int    `json:"count"`
	// Examples are the first auditIDs (up to MaxExamples).
	Examples []string `json:"examples"`
}

// Problem is a line that was not an event, or an input cut short.
type Problem struct {
	Input   string `json:"input"`
	Line    int    `json:"line,omitempty"`
	Message string `json:"message"`
	// CutShort: the input could not be opened or read to its end.
	CutShort bool `json:"cutShort,omitempty"`
}

// MaxExamples and MaxProblems bound what a summary lists.
const (
	MaxExamples = 3
	MaxProblems = 10
)

// Summary counts what the inputs came to.
type Summary struct {
	// Chain names the authorizers that decided the requests: "kcedar, then
	// RBAC" (kube-apiserver's chain as kcedar manifests writes it), "RBAC,
	// then kcedar", or "kcedar alone".
	Chain string `json:"chain"`
	// Mode is how kcedar serve answers a conditional decision
	// (upstream.ServeMode).
	Mode string `json:"mode"`
	// RBAC says where the chain's RBAC came from (Options.RBACSource).
	RBAC string `json:"rbac,omitempty"`
	// Lines read, and the events among them (lines that decoded).
	Lines  int `json:"lines"`
	Events int `json:"events"`
	// Foreign are the lines that are JSON but no audit event (GKE and
	// Azure records, anything else), by what they are.
	Foreign    int            `json:"foreign"`
	ForeignWhy map[string]int `json:"foreignWhy,omitempty"`
	// Requests are the events that are one request's decision.
	Requests int `json:"requests"`
	// NotSeen are the requests kcedar never sees (system:masters, and those
	// the webhook's matchConditions exclude), left out of the comparison.
	NotSeen    int            `json:"notSeen"`
	NotSeenWhy map[string]int `json:"notSeenWhy,omitempty"`
	// Decided are the requests kcedar decided: unchanged, newly denied or
	// newly allowed.
	Decided      int `json:"decided"`
	Unchanged    int `json:"unchanged"`
	NewlyDenied  int `json:"newlyDenied"`
	NewlyAllowed int `json:"newlyAllowed"`
	// ByResponseCode are the decided requests compared with the response
	// code (a hint: no decision annotation in the log); the others were
	// compared with the decision annotation.
	ByResponseCode Comparisons `json:"byResponseCode"`
	// DecidedAtResponseStarted are the decided requests with a
	// ResponseStarted event and no ResponseComplete or Panic (a watch
	// still open, exec, attach or port-forward).
	DecidedAtResponseStarted int `json:"decidedAtResponseStarted"`
	Conditional              int `json:"conditional"`
	Undecidable              int `json:"undecidable"`
	// ConditionalWhy, UndecidableWhy and Skipped count by reason.
	ConditionalWhy map[string]int `json:"conditionalWhy,omitempty"`
	UndecidableWhy map[string]int `json:"undecidableWhy,omitempty"`
	Skipped        map[string]int `json:"skipped,omitempty"`
	Malformed      int            `json:"malformed"`
	Oversized      int            `json:"oversized"`
	// Unreadable are the inputs not read to their end (a directory, a
	// truncated gzip stream, a read error); each is also a Problem.
	Unreadable int `json:"unreadable"`
	// Problems are the first malformed or oversized lines and requests not
	// rebuilt (up to MaxProblems), and every input cut short.
	Problems []Problem `json:"problems,omitempty"`
	// Changes are grouped by kind, user, verb and resource.
	Changes []*Group `json:"changes,omitempty"`

	groups map[groupKey]*Group
}

// Comparisons count decided requests by outcome.
type Comparisons struct {
	Decided      int `json:"decided"`
	Unchanged    int `json:"unchanged"`
	NewlyDenied  int `json:"newlyDenied"`
	NewlyAllowed int `json:"newlyAllowed"`
}

type groupKey struct{ change, basis, user, verb, resource string }

func newSummary() *Summary {
	return &Summary{ConditionalWhy: map[string]int{}, UndecidableWhy: map[string]int{}, Skipped: map[string]int{},
		ForeignWhy: map[string]int{}, NotSeenWhy: map[string]int{}, groups: map[groupKey]*Group{}}
}

// maxReasons bounds the distinct reasons a map counts: reasons quote what
// a line holds, so a hostile log could make many.
const maxReasons = 64

// otherReasons counts the reasons past maxReasons.
const otherReasons = "(other reasons)"

// countReason counts one more of reason in by.
func countReason(by map[string]int, reason string) {
	if _, ok := by[reason]; !ok && len(by) >= maxReasons {
		reason = otherReasons
	}
	by[reason]++
}

// Changed reports whether any request is newly denied or newly allowed.
func (s *Summary) Changed() bool { return s.NewlyDenied+s.NewlyAllowed > 0 }

// add folds in the result of line no of input.
func (s *Summary) add(input string, no int, r result) {
	if r.kind != kindBlank {
		s.Lines++
	}
	if r.kind > kindForeign {
		s.Events++
	}
	if r.kind > kindSkipped {
		s.Requests++
	}
	switch r.kind {
	case kindMalformed:
		s.Malformed++
		s.problem(input, no, "malformed: "+r.detail)
	case kindOversized:
		s.Oversized++
		s.problem(input, no, "oversized line (skipped)")
	case kindForeign:
		s.Foreign++
		countReason(s.ForeignWhy, r.reason)
	case kindSkipped:
		countReason(s.Skipped, r.reason)
	case kindNotSeen:
		s.NotSeen++
		countReason(s.NotSeenWhy, r.reason)
	case kindUndecidable:
		s.Undecidable++
		countReason(s.UndecidableWhy, r.reason)
		if r.detail != "" {
			s.problem(input, no, r.detail)
		}
	case kindConditional:
		s.Conditional++
		countReason(s.ConditionalWhy, r.reason)
	case kindUnchanged:
		s.Decided++
		s.Unchanged++
		if r.basis == ComparedWithResponseCode {
			s.ByResponseCode.Decided++
			s.ByResponseCode.Unchanged++
		}
	case kindNewlyDenied, kindNewlyAllowed:
		s.Decided++
		s.addChange(r)
	}
}

// problem records a problem while there are fewer than MaxProblems.
func (s *Summary) problem(input string, no int, msg string) {
	if len(s.Problems) < MaxProblems {
		s.Problems = append(s.Problems, Problem{Input: input, Line: no, Message: msg})
	}
}

// cutShort records an input that ended early, after lines lines and n
// bytes of it.
func (s *Summary) cutShort(input string, lines int, n int64, err error) {
	s.Unreadable++
	s.Problems = append(s.Problems, Problem{Input: input, Line: lines, CutShort: true,
		Message: fmt.Sprintf("%v: read %d complete lines (%d bytes of the input); the rest is lost", err, lines, n)})
}

// addChange counts a changed request in its group.
func (s *Summary) addChange(r result) {
	c := r.change
	hinted := c.ComparedWith == ComparedWithResponseCode
	if hinted {
		s.ByResponseCode.Decided++
	}
	kind := NewlyDenied
	if r.kind == kindNewlyAllowed {
		kind = NewlyAllowed
		s.NewlyAllowed++
		if hinted {
			s.ByResponseCode.NewlyAllowed++
		}
	} else {
		s.NewlyDenied++
		if hinted {
			s.ByResponseCode.NewlyDenied++
		}
	}
	k := groupKey{kind, c.ComparedWith, c.User, c.Verb, c.Resource}
	g := s.groups[k]
	if g == nil {
		g = &Group{Change: kind, ComparedWith: c.ComparedWith, User: c.User, Verb: c.Verb, Resource: c.Resource}
		s.groups[k] = g
		s.Changes = append(s.Changes, g)
	}
	g.Count++
	if len(g.Examples) < MaxExamples {
		g.Examples = append(g.Examples, c.AuditID)
	}
}

// Sort orders the groups: newly allowed first (access gained), then by
// count, user, verb and resource.
func (s *Summary) Sort() {
	slices.SortStableFunc(s.Changes, func(a, b *Group) int {
		return cmp.Or(cmp.Compare(a.Change, b.Change), // "newly allowed" < "newly denied"
			cmp.Compare(b.Count, a.Count), cmp.Compare(a.ComparedWith, b.ComparedWith), cmp.Compare(a.User, b.User),
			cmp.Compare(a.Verb, b.Verb), cmp.Compare(a.Resource, b.Resource))
	})
}

// WriteText writes the summary as the text report: the counts, the reasons,
// the problems and the changes by group. Everything it quotes from the logs
// (reasons, problems, users, verbs, resources, auditIDs, input names) is
// escaped for a terminal (safetext.Fprintf), so a log cannot write a line
// of the report.
func (s *Summary) WriteText(w io.Writer) error {
	var b strings.Builder
	safetext.Fprintf(&b, "chain:          %s (kcedar serve mode: %s)\n", s.Chain, s.Mode)
	if s.RBAC != "" {
		safetext.Fprintf(&b, "RBAC:           %s\n", s.RBAC)
	}
	safetext.Fprintf(&b, "lines read:     %d (%d audit events; %d malformed, %d oversized)\n", s.Lines, s.Events, s.Malformed, s.Oversized)
	safetext.Fprintf(&b, "not audit events: %d\n", s.Foreign)
	writeReasons(&b, s.ForeignWhy)
	safetext.Fprintf(&b, "requests:       %d (one per request: its ResponseComplete or Panic event, or its ResponseStarted alone)\n", s.Requests)
	safetext.Fprintf(&b, "not seen by kcedar (left out): %d\n", s.NotSeen)
	writeReasons(&b, s.NotSeenWhy)
	s.writeDecided(&b)
	safetext.Fprintf(&b, "conditional:    %d\n", s.Conditional)
	writeReasons(&b, s.ConditionalWhy)
	safetext.Fprintf(&b, "undecidable:    %d\n", s.Undecidable)
	writeReasons(&b, s.UndecidableWhy)
	skipped := 0
	for _, n := range s.Skipped {
		skipped += n
	}
	safetext.Fprintf(&b, "skipped:        %d\n", skipped)
	writeReasons(&b, s.Skipped)
	if s.Chain == "kcedar alone" {
		b.WriteString("NoOpinion counts as not allowed, as if kcedar were the last authorizer: give the cluster's RBAC (--cluster reads it, --rbac FILE) to compose kcedar with it as kube-apiserver does.\n")
	} else {
		b.WriteString("NoOpinion counts as not allowed: no authorizer of the chain allowed.\n")
	}
	for _, p := range s.Problems {
		safetext.Fprintf(&b, "problem: %s:%d: %s\n", p.Input, p.Line, p.Message)
	}
	if len(s.Changes) > 0 {
		b.WriteString("\nchanges (by user, verb and resource; compared with):\n")
	}
	for _, g := range s.Changes {
		safetext.Fprintf(&b, "  %-13s %6d  user=%s verb=%s resource=%s  (%s)  e.g. %s\n", g.Change, g.Count, g.User, g.Verb, g.Resource, g.ComparedWith, strings.Join(g.Examples, ", "))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeDecided writes the decided requests' counts, those compared with
// the decision annotation and with the response code apart.
func (s *Summary) writeDecided(b *strings.Builder) {
	h := s.ByResponseCode
	safetext.Fprintf(b, "decided:        %d (%d at ResponseStarted, without ResponseComplete)\n", s.Decided, s.DecidedAtResponseStarted)
	safetext.Fprintf(b, "  unchanged:    %d\n", s.Unchanged)
	safetext.Fprintf(b, "  newly denied: %d\n", s.NewlyDenied)
	safetext.Fprintf(b, "  newly allowed: %d\n", s.NewlyAllowed)
	safetext.Fprintf(b, "  compared with the decision annotation: %d (%d unchanged, %d newly denied, %d newly allowed)\n",
		s.Decided-h.Decided, s.Unchanged-h.Unchanged, s.NewlyDenied-h.NewlyDenied, s.NewlyAllowed-h.NewlyAllowed)
	safetext.Fprintf(b, "  compared with the response code (hint): %d (%d unchanged, %d newly denied, %d newly allowed)\n",
		h.Decided, h.Unchanged, h.NewlyDenied, h.NewlyAllowed)
}

// writeReasons lists counts by reason, most frequent first.
func writeReasons(b *strings.Builder, by map[string]int) {
	reasons := make([]string, 0, len(by))
	for r := range by {
		reasons = append(reasons, r)
	}
	slices.SortFunc(reasons, func(x, y string) int { return cmp.Or(cmp.Compare(by[y], by[x]), cmp.Compare(x, y)) })
	for _, r := range reasons {
		safetext.Fprintf(b, "  %6d  %s\n", by[r], r)
	}
}
