package cedarlex

import (
	"strings"
	"testing"
	"unicode/utf8"

	cedarlib "github.com/cedar-policy/cedar-go"
	"github.com/cedar-policy/cedar-go/types"
)

// A quoted string reads back, through cedar-go's parser, as the same string.
func TestQuoteReadsBack(t *testing.T) {
	for _, s := range []string{"", "plain", `a"b\c`, "tab\tnew\nline\rcr", "\x00\x01\x1f\x7f", "ünï ✓ 日本", "*-app-*", "\\u{41}",
		"\u2028\u2029\u0085\u200e\u202e\ufeff\u00a0", "\U0010ffff\ufffd", `*/ /* //`} {
		q, err := Quote(s)
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		if !allPrintable(q) {
			t.Errorf("%q: quoted as %q, which holds a rune that is not printable", s, q)
		}
		src := `permit (principal, action, resource) when { context.s == ` + q + ` };`
		var p cedarlib.Policy
		if err := p.UnmarshalCedar([]byte(src)); err != nil {
			t.Fatalf("%q: %v\n%s", s, err, src)
		}
		ctx := types.NewRecord(types.RecordMap{"s": types.String(s)})
		ps := cedarlib.NewPolicySet()
		ps.Add("p", &p)
		if d, _ := cedarlib.Authorize(ps, nil, cedarlib.Request{Context: ctx}); d != cedarlib.Allow {
			t.Errorf("%q: %s does not read back as the same string", s, q)
		}
	}
}

// A string that is not valid UTF-8 has no exact Cedar literal: Quote
// refuses it rather than write U+FFFD for its bytes.
func TestQuoteRefusesInvalidUTF8(t *testing.T) {
	for _, s := range []string{"\xff", "a\xc3", "ok\xed\xa0\x80", strings.Repeat("x", 500) + "\x80"} {
		if q, err := Quote(s); err == nil {
			t.Errorf("%q quoted as %s", s, q)
		} else if !utf8.ValidString(err.Error()) || len(err.Error()) > 300 {
			t.Errorf("%q: the error is not short, valid text: %q", s, err)
		}
	}
}

// allPrintable reports whether s holds printable runes and newlines only.
func allPrintable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r != '\n' && !printable(r) {
			return false
		}
	}
	return true
}

// Comment text stays one line of printable text that neither opens nor
// closes a block comment, whatever it was.
func TestCommentText(t *testing.T) {
	cases := map[string]string{
		"plain text":               "plain text",
		"a\nb":                     `a\nb`,
		"a\rb\tc":                  `a\rb\tc`,
		"\u2028\u2029\u0085":       `\u{2028}\u{2029}\u{85}`,
		"\x00\xff\xc3":             `\u{0}\xff\xc3`,
		"a/*b*/c":                  `a/\*b*\/c`,
		"/*/":                      `/\*\/`,
		"**//**":                   `**\//\**`,
		`back\slash "quotes" // x`: `back\slash "quotes" // x`,
		"\u202eevil":               `\u{202e}evil`,
	}
	for in, want := range cases {
		got := CommentText(in)
		if got != want {
			t.Errorf("CommentText(%q) = %q, want %q", in, got, want)
		}
		if !allPrintable(got) || strings.Contains(got, "\n") || strings.Contains(got, "/*") || strings.Contains(got, "*/") {
			t.Errorf("CommentText(%q) = %q: not one printable line free of /* and */", in, got)
		}
	}
}

func TestEscapeLineBreaks(t *testing.T) {
	in := "// a\rb\u2028c\u2029d\u0085e\vf\fg \t ü \xff"
	want := `// a\u{d}b\u{2028}c\u{2029}d\u{85}e\u{b}f\u{c}g ` + "\t ü \xff"
	if got := EscapeLineBreaks(in); got != want {
		t.Errorf("EscapeLineBreaks(%q) = %q, want %q", in, got, want)
	}
	if s := "// nothing to do ü"; EscapeLineBreaks(s) != s {
		t.Errorf("EscapeLineBreaks changed %q", s)
	}
}
