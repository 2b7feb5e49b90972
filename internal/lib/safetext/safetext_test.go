package safetext

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode"

	"github.com/kcedar/kcedar/internal/testing/hostile"
)

// randomHostile draws a string from pieces of the hostile names, plain
// text and random runes, so that escapes meet every neighbour.
func randomHostile(rng *rand.Rand) string {
	var b strings.Builder
	for range rng.IntN(8) {
		switch rng.IntN(4) {
		case 0:
			h := hostile.Names[rng.IntN(len(hostile.Names))]
			i, j := rng.IntN(len(h)+1), rng.IntN(len(h)+1)
			b.WriteString(h[min(i, j):max(i, j)])
		case 1:
			b.WriteString("system:serviceaccount:dev:builder")
		case 2:
			b.WriteRune(rune(rng.IntN(0x3000)))
		default:
			b.WriteByte(byte(rng.IntN(256)))
		}
	}
	return b.String()
}

// Terminal leaves nothing that acts on a terminal or hides: no control,
// format or separator character, no invalid UTF-8, whatever the input.
// Lines is the same but keeps newlines.
func TestTerminalLeavesNothingRaw(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	inputs := append([]string{}, hostile.Names...)
	for range 20000 {
		inputs = append(inputs, randomHostile(rng))
	}
	for _, s := range inputs {
		if r := hostile.RawControl(Terminal(s), false); r != "" {
			t.Fatalf("Terminal(%q) = %q holds %s", s, Terminal(s), r)
		}
		if r := hostile.RawControl(Lines(s), true); r != "" {
			t.Fatalf("Lines(%q) = %q holds %s", s, Lines(s), r)
		}
		if strings.Count(Lines(s), "\n") != strings.Count(s, "\n") {
			t.Fatalf("Lines(%q) = %q: newlines not kept", s, Lines(s))
		}
	}
}

// What the escapes look like: kubectl's for ESC and CR, Go's for the rest;
// ordinary names, Unicode letters and emoji included, stay as they are.
func TestTerminalShowsEscapes(t *testing.T) {
	cases := map[string]string{
		"system:serviceaccount:dev:builder": "system:serviceaccount:dev:builder",
		"café-ñ-日本-😀":                       "café-ñ-日本-😀",
		"a\x1b[2Kb":                         "a^[[2Kb",
		"bob\rroot":                         `bob\rroot`,
		"x\by\az\tw\nv":                     `x\by\az\tw\nv`,
		"\u202etxt":                         `\u202etxt`,
		"c\u009bd":                          `c\u009bd`,
		"nul\x00\x7f":                       `nul\x00\x7f`,
		"bad\xff":                           `bad\xff`,
		"tag\U000E0041":                     `tag\U000e0041`,
	}
	for in, want := range cases {
		if got := Terminal(in); got != want {
			t.Errorf("Terminal(%q) = %q, want %q", in, got, want)
		}
	}
	if got := Lines("a\nb\x1b[1Ac\n"); got != "a\nb^[[1Ac\n" {
		t.Errorf("Lines: %q", got)
	}
}

// Sprintf escapes every argument, whatever its type, keeps widths and
// number formats, and writes the format as it is.
func TestSprintfEscapesArguments(t *testing.T) {
	type name string
	got := Sprintf("%-8s|%5d|%v|%s|%q|%v|%s\n", "a\rb", 42, []string{"x\ny", "z"}, errors.New("e\x1b[2K"), "q\x07", name("n\b"), stringer("s\u202e"))
	want := `a\rb    |   42|[x\ny z]|e^[[2K|"q\a"|n\b|s\u202e` + "\n"
	if got != want {
		t.Errorf("Sprintf = %q, want %q", got, want)
	}
	var b strings.Builder
	if _, err := Fprintln(&b, "a\nb", 3); err != nil || b.String() != "a\\nb 3\n" {
		t.Errorf("Fprintln = %q, %v", b.String(), err)
	}
}

type stringer string

func (s stringer) String() string { return string(s) }

// MarkdownCode holds whatever it is given inside its <code> element: no
// character Markdown or HTML reads survives raw, nothing hides or breaks
// the line, and decoding the references gives back Terminal(s).
func TestMarkdownCodeHolds(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	inputs := append([]string{}, hostile.Names...)
	for range 20000 {
		inputs = append(inputs, randomHostile(rng))
	}
	for _, s := range inputs {
		md := MarkdownCode(s)
		if s == "" {
			if md != "" {
				t.Fatalf("MarkdownCode(\"\") = %q", md)
			}
			continue
		}
		inner, ok := strings.CutPrefix(md, "<code>")
		inner, ok2 := strings.CutSuffix(inner, "</code>")
		if !ok || !ok2 {
			t.Fatalf("MarkdownCode(%q) = %q: not one code element", s, md)
		}
		if r := hostile.RawControl(inner, false); r != "" {
			t.Fatalf("MarkdownCode(%q) = %q holds %s", s, md, r)
		}
		decoded := decodeReferences(t, inner)
		if decoded != Terminal(s) {
			t.Fatalf("MarkdownCode(%q) = %q reads %q, want %q", s, md, decoded, Terminal(s))
		}
		for _, c := range inner {
			if strings.ContainsRune(markdownSpecial, c) && c != '&' {
				t.Fatalf("MarkdownCode(%q) = %q holds %q raw", s, md, c)
			}
		}
	}
}

// decodeReferences decodes the &#N; references of s, failing on any other
// use of &.
func decodeReferences(t *testing.T, s string) string {
	t.Helper()
	var b strings.Builder
	for {
		i := strings.IndexByte(s, '&')
		if i < 0 {
			return b.String() + s
		}
		b.WriteString(s[:i])
		end := strings.IndexByte(s[i:], ';')
		if end < 0 || !strings.HasPrefix(s[i:], "&#") {
			t.Fatalf("a raw & in %q", s)
		}
		n := 0
		for _, d := range s[i+2 : i+end] {
			if !unicode.IsDigit(d) {
				t.Fatalf("a malformed reference in %q", s)
			}
			n = n*10 + int(d-'0')
		}
		b.WriteRune(rune(n))
		s = s[i+end+1:]
	}
}

// JSON passed through NewJSONWriter, in pieces cut anywhere, reads the same
// and holds nothing a terminal acts on or that hides, but the newlines
// between JSON lines.
func TestJSONWriterKeepsDocuments(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 2000 {
		var doc []map[string]string // as the encoder wrote them
		var text []byte
		for range 1 + rng.IntN(3) {
			line, err := json.Marshal(map[string]string{"user": randomHostile(rng), "msg": hostile.Names[rng.IntN(len(hostile.Names))]})
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]string
			if err := json.Unmarshal(line, &m); err != nil {
				t.Fatal(err)
			}
			doc = append(doc, m)
			text = append(append(text, line...), '\n')
		}
		var out strings.Builder
		w := NewJSONWriter(&out)
		for rest := text; len(rest) > 0; {
			n := 1 + rng.IntN(len(rest))
			if k, err := w.Write(rest[:n]); k != n || err != nil {
				t.Fatalf("Write: %d, %v", k, err)
			}
			rest = rest[n:]
		}
		if r := hostile.RawControl(out.String(), true); r != "" {
			t.Fatalf("%q holds %s", out.String(), r)
		}
		lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		if len(lines) != len(doc) {
			t.Fatalf("%d lines for %d documents: %q", len(lines), len(doc), out.String())
		}
		for i, l := range lines {
			var got map[string]string
			if err := json.Unmarshal([]byte(l), &got); err != nil {
				t.Fatalf("%q: %v", l, err)
			}
			if got["user"] != doc[i]["user"] || got["msg"] != doc[i]["msg"] {
				t.Fatalf("%q reads %q, want %q", l, got, doc[i])
			}
		}
	}
}
