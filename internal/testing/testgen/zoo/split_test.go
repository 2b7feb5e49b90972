package zoo

import (
	"fmt"
	"strings"
	"testing"
)

// Split cuts at policy boundaries whether policies are separated by a
// blank line or by one newline, into parts of at most maxBytes that join
// back into the document.
func TestSplitAtPolicyBoundaries(t *testing.T) {
	for _, sep := range []string{"\n", "\n\n"} {
		var policies []string
		for i := range 200 {
			policies = append(policies, fmt.Sprintf("@id(\"p%d\") permit (principal, action, resource) when { resource.name == \"n%d\" };", i, i))
		}
		doc := strings.Join(policies, sep) + "\n"
		parts := Split(doc, 1000)
		if len(parts) < len(doc)/1000 {
			t.Fatalf("separator %q: %d parts of a %d-byte document", sep, len(parts), len(doc))
		}
		for i, p := range parts {
			if len(p) > 1000 || !strings.HasPrefix(p, "@id(") {
				t.Errorf("separator %q: part %d (%d bytes) starts %.12q", sep, i, len(p), p)
			}
		}
		if strings.Join(parts, "") != doc {
			t.Errorf("separator %q: the parts do not join into the document", sep)
		}
	}
}
