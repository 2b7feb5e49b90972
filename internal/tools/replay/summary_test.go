package replay

import (
	"strings"
	"testing"

	"github.com/kcedar/kcedar/internal/lib/safetext"
	"github.com/kcedar/kcedar/internal/testing/hostile"
)

// WriteText quotes the logs: reasons, problems, input names, users, verbs,
// resources and auditIDs. Each hostile name, wherever it stands, is shown
// escaped, and adds no line to the report.
func TestWriteTextEscapesHostileNames(t *testing.T) {
	for _, name := range hostile.Names {
		s := newSummary()
		s.add(name, 1, result{kind: kindForeign, reason: name})
		s.add(name, 2, result{kind: kindUndecidable, reason: name, detail: name})
		s.add(name, 3, result{kind: kindNewlyDenied, change: &Change{AuditID: name, Was: "allow", Now: "NoOpinion", User: name, Verb: name, Resource: name, ComparedWith: ComparedWithAnnotation}})
		clean := newSummary()
		clean.add("in", 1, result{kind: kindForeign, reason: "x"})
		clean.add("in", 2, result{kind: kindUndecidable, reason: "x", detail: "x"})
		clean.add("in", 3, result{kind: kindNewlyDenied, change: &Change{AuditID: "x", Was: "allow", Now: "NoOpinion", User: "x", Verb: "x", Resource: "x", ComparedWith: ComparedWithAnnotation}})
		var got, want strings.Builder
		if err := s.WriteText(&got); err != nil {
			t.Fatal(err)
		}
		if err := clean.WriteText(&want); err != nil {
			t.Fatal(err)
		}
		out := got.String()
		if r := hostile.RawControl(out, true); r != "" {
			t.Fatalf("%q: the report holds %s raw:\n%q", name, r, out)
		}
		if strings.Count(out, "\n") != strings.Count(want.String(), "\n") {
			t.Errorf("%q: %d lines, %d with a plain name:\n%s", name, strings.Count(out, "\n"), strings.Count(want.String(), "\n"), out)
		}
		if !strings.Contains(out, "user="+safetext.Terminal(name)+" ") {
			t.Errorf("%q: the user is not shown escaped:\n%s", name, out)
		}
	}
}
