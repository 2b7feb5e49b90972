package engine

import (
	"strings"

	"github.com/kcedar/kcedar/internal/lib/safetext"
)

// maxNearMisses bounds the near misses String shows.
const maxNearMisses = 5

// String renders the explanation for people: the decision, the deciding
// policies part by part, the near misses with the part that failed, and
// the conditions of a conditional decision. Every value it quotes (the
// request, policy ids and sources, policy text, values read) is escaped
// for a terminal (safetext.Fprintf), so none can add a line or act on it.
func (x Explanation) String() string {
	var b strings.Builder
	safetext.Fprintf(&b, "request: %s\nkcedar's decision: %s\n", x.Request, x.Decision)
	if x.Reason != "" {
		safetext.Fprintf(&b, "reason sent to the API server: %s\n", x.Reason)
	}
	if len(x.Deciding) == 0 {
		b.WriteString("decided by: no policy (no policy applies, so kcedar has no opinion)\n")
	} else {
		b.WriteString("decided by:\n")
	}
	for _, t := range x.Deciding {
		writeTrace(&b, t)
	}
	if len(x.NearMisses) > 0 {
		b.WriteString("nearly applied:\n")
	}
	for i, t := range x.NearMisses {
		if i == maxNearMisses {
			safetext.Fprintf(&b, "  ... and %d more (-o json lists them all)\n", len(x.NearMisses)-i)
			break
		}
		writeNearMiss(&b, t)
	}
	writeConditions(&b, x)
	return b.String()
}

// writeTrace writes a deciding policy and each of its parts.
func writeTrace(b *strings.Builder, t PolicyTrace) {
	safetext.Fprintf(b, "  %s %s (%s): %s\n", t.Effect, t.ID, t.Source, t.Outcome)
	if t.Error != "" {
		safetext.Fprintf(b, "    error: %s\n", t.Error)
	}
	for _, p := range t.Parts {
		safetext.Fprintf(b, "    %s  -> %s", oneLineText(p.Text), partResult(p))
		if len(p.Values) > 0 {
			safetext.Fprintf(b, " (%s)", strings.Join(p.Values, ", "))
		}
		b.WriteString("\n")
		if f := p.Failing; f != nil {
			safetext.Fprintf(b, "      decided by `%s`: %s\n", oneLineText(f.Text), subResult(f))
		}
	}
	if t.Residual != "" {
		safetext.Fprintf(b, "    remains: %s\n", oneLineText(t.Residual))
	}
}

// writeNearMiss writes a policy that nearly applied: what matched, and the
// part that did not.
func writeNearMiss(b *strings.Builder, t PolicyTrace) {
	var matched []string
	for _, p := range t.Parts {
		if !p.lets() {
			break
		}
		matched = append(matched, p.Kind+" matched")
	}
	safetext.Fprintf(b, "  %s %s (%s): ", t.Effect, t.ID, t.Source)
	if len(matched) > 0 {
		b.WriteString(strings.Join(matched, ", ") + ", ")
	}
	failed, ok := t.FailedPart()
	if !ok {
		b.WriteString("does not hold\n")
		return
	}
	safetext.Fprintf(b, "`%s` was %s", oneLineText(failed.Text), partResult(failed))
	switch {
	case failed.Failing != nil:
		safetext.Fprintf(b, ": `%s` is %s", oneLineText(failed.Failing.Text), subResult(failed.Failing))
	case len(failed.Values) > 0:
		safetext.Fprintf(b, ": %s", strings.Join(failed.Values, ", "))
	}
	b.WriteString("\n")
}

// subResult is a sub-expression's result with its error or the values it
// read.
func subResult(f *SubExpression) string {
	if f.Result == "error" {
		return "an error: " + f.Error
	}
	if len(f.Values) > 0 {
		return f.Result + " (" + strings.Join(f.Values, ", ") + ")"
	}
	return f.Result
}

// partResult is a part's result with its residual or error.
func partResult(p TracePart) string {
	switch p.Result {
	case "unknown":
		return "unknown until admission or open: " + oneLineText(p.Residual)
	case "error":
		return "an error: " + p.Error
	}
	return p.Result
}

// writeConditions writes what remains of a conditional decision, and what
// kcedar serve answers the API server for it.
func writeConditions(b *strings.Builder, x Explanation) {
	r := x.Report
	if r.Decision != "Conditional" {
		if x.ServedAs != "" {
			safetext.Fprintf(b, "kcedar serve answers: %s\n", x.ServedAs)
		}
		return
	}
	if x.ServedAs != "" {
		safetext.Fprintf(b, "kcedar serve answers: %s\nconditions that remain:\n", x.ServedAs)
	} else {
		safetext.Fprintf(b, "conditions that remain (admission decides; without conditional authorization: %s):\n", r.WithoutConditions)
	}
	for _, c := range r.Conditions {
		safetext.Fprintf(b, "  %s %s on %s: %s\n", strings.ToLower(c.Effect), c.ID, c.EntityType, oneLineText(c.Expression))
	}
}

func oneLineText(s string) string { return strings.Join(strings.Fields(s), " ") }
