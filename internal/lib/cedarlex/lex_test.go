package cedarlex

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	cedarlib "github.com/cedar-policy/cedar-go"
)

func TestTokens(t *testing.T) {
	type tk struct {
		kind Kind
		text string
		pos  string
	}
	cases := []struct {
		src  string
		want []tk
	}{
		{`permit(principal,action,resource);`, []tk{
			{Ident, "permit", "1:1"}, {Punct, "(", "1:7"}, {Ident, "principal", "1:8"}, {Punct, ",", "1:17"},
			{Ident, "action", "1:18"}, {Punct, ",", "1:24"}, {Ident, "resource", "1:25"}, {Punct, ")", "1:33"}, {Punct, ";", "1:34"},
		}},
		{"\"a//b\" // c \"d\n x", []tk{{String, `"a//b"`, "1:1"}, {LineComment, `// c "d`, "1:8"}, {Ident, "x", "2:2"}}},
		{`"a/*b" /* "c */ x`, []tk{{String, `"a/*b"`, "1:1"}, {BlockComment, `/* "c */`, "1:8"}, {Ident, "x", "1:17"}}},
		{"/* a\n\"b */x", []tk{{BlockComment, "/* a\n\"b */", "1:1"}, {Ident, "x", "2:6"}}},
		{`/*/ x */y`, []tk{{BlockComment, `/*/ x */`, "1:1"}, {Ident, "y", "1:9"}}},
		{`/**/y`, []tk{{BlockComment, `/**/`, "1:1"}, {Ident, "y", "1:5"}}},
		{`"a\"b\\" c`, []tk{{String, `"a\"b\\"`, "1:1"}, {Ident, "c", "1:10"}}},
		{`"é" é x`, []tk{{String, `"é"`, "1:1"}, {Invalid, "é", "1:5"}, {Ident, "x", "1:7"}}},
		{`a::b 12ab`, []tk{{Ident, "a", "1:1"}, {Punct, "::", "1:2"}, {Ident, "b", "1:4"}, {Int, "12", "1:6"}, {Ident, "ab", "1:8"}}},
		{`a==b=c||d|e&&f&g!=h<=i>=j/k`, []tk{
			{Ident, "a", "1:1"}, {Punct, "==", "1:2"}, {Ident, "b", "1:4"}, {Invalid, "=", "1:5"}, {Ident, "c", "1:6"},
			{Punct, "||", "1:7"}, {Ident, "d", "1:9"}, {Invalid, "|", "1:10"}, {Ident, "e", "1:11"}, {Punct, "&&", "1:12"},
			{Ident, "f", "1:14"}, {Invalid, "&", "1:15"}, {Ident, "g", "1:16"}, {Punct, "!=", "1:17"}, {Ident, "h", "1:19"},
			{Punct, "<=", "1:20"}, {Ident, "i", "1:22"}, {Punct, ">=", "1:23"}, {Ident, "j", "1:25"}, {Invalid, "/", "1:26"},
			{Ident, "k", "1:27"},
		}},
	}
	for _, tc := range cases {
		toks, err := Tokens([]byte(tc.src))
		if err != nil {
			t.Errorf("%q: %v", tc.src, err)
			continue
		}
		var got []tk
		for _, tok := range toks {
			got = append(got, tk{tok.Kind, tok.Text([]byte(tc.src)), tok.Pos.String()})
		}
		if len(got) != len(tc.want) {
			t.Errorf("%q: got %v, want %v", tc.src, got, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%q: token %d is %v, want %v", tc.src, i, got[i], tc.want[i])
			}
		}
	}

	for src, want := range map[string]string{
		`x "abc`:         "1:3: string literal not terminated",
		"x \"ab\nc\"":    "1:3: string literal not terminated",
		"x \"ab\\\nc\"":  "1:3: string literal not terminated",
		`x "ab\"`:        "1:3: string literal not terminated",
		"x\n /* abc":     "2:2: comment not terminated",
		"x\n /* abc *":   "2:2: comment not terminated",
		`/*/`:            "1:1: comment not terminated",
		"\"é\" é /* \n ": "1:7: comment not terminated",
	} {
		_, err := Tokens([]byte(src))
		if err == nil || err.Error() != want {
			t.Errorf("%q: error %v, want %q", src, err, want)
		}
	}
}

// gen generates Cedar policy text that stresses the boundaries between
// strings, comments and code: string literals holding //, /*, */, escaped
// quotes and backslashes, non-ASCII runes and brackets; line and block
// comments holding quotes, //, /* and newlines between any two tokens; and
// now and then a broken piece (a lone quote, an unterminated comment, a lone
// operator character) so that rejection is exercised too.
type gen struct{ r *rand.Rand }

var strPieces = []string{"a", "Z", " ", "//", "/*", "*/", "/", "*", `\"`, `\\`, `\n`, `\t`, `\0`, `\'`, `\u{e9}`, `\x41`, "é", "日本", "{", ")", ";", "@", "#", "'", "`", "\t"}

func (g gen) str() string {
	var b strings.Builder
	b.WriteByte('"')
	for n := g.r.IntN(6); n > 0; n-- {
		b.WriteString(strPieces[g.r.IntN(len(strPieces))])
	}
	if g.r.IntN(200) == 0 { // broken: a bare quote, a raw newline, a trailing backslash
		b.WriteString([]string{`"`, "\n", `\`}[g.r.IntN(3)])
	}
	b.WriteByte('"')
	return b.String()
}

var commentPieces = []string{"x", " ", `"`, `\"`, "//", "/*", "*", "/", "é", "(", "]", ";", "permit", "\\", "\t", "@id(\"c\")"}

func (g gen) comment() string {
	var b strings.Builder
	block := g.r.IntN(2) == 0
	if block {
		b.WriteString("/*")
	} else {
		b.WriteString("//")
	}
	for n := g.r.IntN(6); n > 0; n-- {
		piece := commentPieces[g.r.IntN(len(commentPieces))]
		if block && strings.HasSuffix(b.String(), "*") && strings.HasPrefix(piece, "/") && g.r.IntN(10) > 0 {
			continue // mostly keep block comments from ending early
		}
		b.WriteString(piece)
		if block && g.r.IntN(5) == 0 {
			b.WriteByte('\n')
		}
	}
	switch {
	case block && g.r.IntN(300) == 0: // unterminated unless a later one closes it
	case block && g.r.IntN(150) == 0:
		b.WriteString("*/ */") // the first */ ends it
	case block:
		b.WriteString("*/")
	default:
		b.WriteByte('\n')
	}
	return b.String()
}

func (g gen) sep() string {
	switch k := g.r.IntN(12); {
	case g.r.IntN(100) == 0:
		return "" // tokens run together
	case k < 4:
		return " "
	case k < 6:
		return "\n"
	case k < 7:
		return "\r\n\t"
	case k < 10:
		return g.comment()
	default:
		return g.comment() + g.comment()
	}
}

// policy returns one policy's tokens.
func (g gen) policy() []string {
	var t []string
	add := func(s ...string) { t = append(t, s...) }
	keys := []string{"id", "reason", "x"}
	for _, i := range g.r.Perm(3)[:g.r.IntN(3)] {
		add("@", keys[i], "(", g.str(), ")")
	}
	add([]string{"permit", "forbid"}[g.r.IntN(2)], "(")
	switch g.r.IntN(3) {
	case 0:
		add("principal")
	case 1:
		add("principal", "in", "k8s", "::", "Group", "::", g.str())
	default:
		add("principal", "==", "k8s", "::", "User", "::", g.str())
	}
	add(",", "action", "in", "[", "k8s", "::", "Action", "::", g.str(), ",", "k8s", "::", "Action", "::", g.str(), "]", ",")
	add("resource", ")")
	for n := g.r.IntN(3); n > 0; n-- {
		add([]string{"when", "unless"}[g.r.IntN(2)], "{")
		for m := 1 + g.r.IntN(3); m > 0; m-- {
			switch g.r.IntN(5) {
			case 0:
				add("context", ".", "x", "==", g.str())
			case 1:
				add("resource", ".", "name", "like", g.str())
			case 2:
				add("[", g.str(), ",", g.str(), "]", ".", "contains", "(", "principal", ".", "name", ")")
			case 3:
				add("(", "-", "1", "+", "2", "*", "3", ")", "<=", "4")
			default:
				add("principal", "has", g.str(), "||", "!", "(", "context", "[", g.str(), "]", "!=", "\"\"", ")")
			}
			if m > 1 {
				add("&&")
			}
		}
		add("}")
	}
	add(";")
	if g.r.IntN(200) == 0 {
		t[g.r.IntN(len(t))] = []string{"=", "|", "&", "/", "é", "$", "\x00"}[g.r.IntN(7)]
	}
	return t
}

func (g gen) text() []byte {
	var b bytes.Buffer
	b.WriteString(g.sep())
	for n := 1 + g.r.IntN(3); n > 0; n-- {
		for _, tok := range g.policy() {
			b.WriteString(tok)
			b.WriteString(g.sep())
		}
	}
	return b.Bytes()
}

// checkAgainstCedarGo checks the lexer against cedar-go's parser on src and
// reports whether cedar-go accepted it:
//   - whatever cedar-go accepts, the lexer reads without error and without
//     Invalid tokens;
//   - the lexer's tokens without its comments, one per line, parse to the
//     same policies (so no comment the lexer finds is code or part of a
//     string, no comment it misses is there, and every string literal is
//     exactly one token: a raw newline inside a literal is a syntax error);
//   - each policy starts where cedar-go says (offset, line and column);
//   - when the lexer finds an unterminated string or comment, cedar-go
//     rejects the input too.
func checkAgainstCedarGo(t *testing.T, src []byte) bool {
	t.Helper()
	want, perr := cedarlib.NewPolicyListFromBytes("f.cedar", src)
	toks, lerr := Tokens(src)
	if perr != nil {
		return false
	}
	if lerr != nil {
		t.Fatalf("cedar-go accepts what the lexer rejects (%v):\n%s", lerr, src)
	}
	var code bytes.Buffer
	var starts []Pos
	prevSemi := true
	for _, tok := range toks {
		switch {
		case tok.Kind == Invalid:
			t.Fatalf("cedar-go accepts what the lexer calls invalid (%q at %s):\n%s", tok.Text(src), tok.Pos, src)
		case tok.Kind.IsComment():
			continue
		}
		if prevSemi {
			starts = append(starts, tok.Pos)
		}
		prevSemi = tok.Is(src, ";")
		code.WriteString(tok.Text(src))
		code.WriteByte('\n')
	}
	got, err := cedarlib.NewPolicyListFromBytes("f.cedar", code.Bytes())
	if err != nil {
		t.Fatalf("the lexer's tokens without comments do not parse (%v):\n--- source:\n%s\n--- tokens:\n%s", err, src, code.Bytes())
	}
	if len(got) != len(want) || len(starts) != len(want) {
		t.Fatalf("%d policies, %d without comments, %d policy starts:\n%s", len(want), len(got), len(starts), src)
	}
	for i := range want {
		a, _ := json.Marshal(want[i])
		b, _ := json.Marshal(got[i])
		if !bytes.Equal(a, b) {
			t.Fatalf("policy %d differs without the lexer's comments:\n%s\nvs\n%s\n--- source:\n%s", i, a, b, src)
		}
		p := want[i].Position()
		if starts[i] != (Pos{Offset: p.Offset, Line: p.Line, Column: p.Column}) {
			t.Fatalf("policy %d starts at %+v for cedar-go, %+v for the lexer:\n%s", i, p, starts[i], src)
		}
	}
	return true
}

// TestAgreesWithCedarGo runs the differential check over generated policies
// and over every truncation of some of them (cutting inside strings and
// comments).
func TestAgreesWithCedarGo(t *testing.T) {
	g := gen{rand.New(rand.NewPCG(20261123, 1))}
	n := 3000
	if testing.Short() {
		n = 500
	}
	accepted := 0
	for i := 0; i < n; i++ {
		src := g.text()
		if checkAgainstCedarGo(t, src) {
			accepted++
		}
		if i%50 == 0 {
			for cut := 0; cut < len(src); cut += 1 + g.r.IntN(7) {
				checkAgainstCedarGo(t, src[:cut])
			}
		}
	}
	t.Logf("%d of %d generated inputs accepted by cedar-go", accepted, n)
	if accepted < n/3 || accepted == n {
		t.Errorf("cedar-go accepted %d of %d generated inputs: the generator no longer covers both sides", accepted, n)
	}
}

// TestAgreesOnPolicyLibrary runs the check over the repository's policies.
func TestAgreesOnPolicyLibrary(t *testing.T) {
	files := 0
	err := filepath.WalkDir("../../../policies", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".cedar") {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		if !checkAgainstCedarGo(t, src) {
			t.Errorf("%s: cedar-go rejects it", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files == 0 {
		t.Fatal("no policy files found")
	}
}

// FuzzAgreesWithCedarGo: `go test -fuzz FuzzAgreesWithCedarGo ./internal/lib/cedarlex`.
func FuzzAgreesWithCedarGo(f *testing.F) {
	g := gen{rand.New(rand.NewPCG(1, 2))}
	for i := 0; i < 50; i++ {
		f.Add(g.text())
	}
	f.Add([]byte(`permit(principal, action, resource) when { "/*" == "*/" }; // "`))
	f.Add([]byte("/* \" */ permit(principal, action, resource) when { context.a == \"//\" };"))
	f.Fuzz(func(t *testing.T, src []byte) {
		checkAgainstCedarGo(t, src)
	})
}

// BenchmarkTokens lexes the policy library (repeated to about 200 KB) and, for
// scale, parses it with cedar-go: the nesting guard adds one lexer pass to
// every parse.
func BenchmarkTokens(b *testing.B) {
	var one []byte
	err := filepath.WalkDir("../../../policies", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".cedar") {
			return err
		}
		data, err := os.ReadFile(path)
		one = append(append(one, data...), '\n')
		return err
	})
	if err != nil || len(one) == 0 {
		b.Fatal("no policies", err)
	}
	src := bytes.Repeat(one, 200<<10/len(one)+1)
	b.Run("cedarlex", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		for i := 0; i < b.N; i++ {
			if _, err := Tokens(src); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cedar-go", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		for i := 0; i < b.N; i++ {
			if _, err := cedarlib.NewPolicyListFromBytes("p.cedar", src); err != nil {
				b.Fatal(err)
			}
		}
	})
}
