package lint

import (
	"fmt"
	"strings"
	"testing"
)

// maskComments blanks comments as cedar-go reads them (line and block
// comments, never inside strings) and keeps offsets and newlines.
func TestMaskComments(t *testing.T) {
	for src, want := range map[string]string{
		"a // b \"c\nd":             "a " + strings.Repeat(" ", 7) + "\nd",
		"a /* \"b\n// c */ d":       "a " + strings.Repeat(" ", 5) + "\n" + strings.Repeat(" ", 7) + " d",
		`"//" "/*" x "*/"`:          `"//" "/*" x "*/"`,
		`"\"//" /**/ y`:             `"\"//"      y`,
		"/*/ still */ z":            "             z",
		"x \"unterminated /* // \n": "x \"unterminated /* // \n",
	} {
		if got := maskComments([]byte(src)); got != want {
			t.Errorf("maskComments(%q) = %q, want %q", src, got, want)
		}
		if got := maskComments([]byte(src)); len(got) != len(src) {
			t.Errorf("maskComments(%q) changed the length", src)
		}
	}
}

// A diagnostic points at the code, not at a decoy in a block comment.
func TestDiagnosticSkipsBlockComments(t *testing.T) {
	c := testChecker(t)
	src := `@id("w")
permit (principal, action, resource is core::pods)
/* was: when { resource.namespace == "*" } */
when { resource.namespace == "*" };`
	res := c.Check([]File{{Name: "w.cedar", Data: []byte(src)}})
	if res.Errors() != 0 || len(res.Diagnostics) == 0 {
		t.Fatalf("want one warning, got %v", res.Diagnostics)
	}
	d := res.Diagnostics[0]
	if pos := fmt.Sprintf("%d:%d", d.Line, d.Column); d.Code != CodeWildcardCompare || pos != "4:30" {
		t.Errorf("got %s at %s, want %s at 4:30", d, pos, CodeWildcardCompare)
	}
	if !strings.Contains(d.String(), "w.cedar:4:30") {
		t.Errorf("rendering: %s", d)
	}
}
