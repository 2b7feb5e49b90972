package cedarlang

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/cedar-policy/cedar-go/types"
)

func mustParse(t testing.TB, file, src string) []*Policy {
	t.Helper()
	ps, err := ParsePolicies(file, []byte(src))
	if err != nil {
		t.Fatalf("ParsePolicies(%s): %v", file, err)
	}
	return ps
}

func wantParseError(t *testing.T, file, src string, wantRE string) error {
	t.Helper()
	ps, err := ParsePolicies(file, []byte(src))
	if err == nil {
		t.Fatalf("ParsePolicies(%s) = %d policies, want an error matching %q", file, len(ps), wantRE)
	}
	if !regexp.MustCompile(wantRE).MatchString(err.Error()) {
		t.Fatalf("ParsePolicies(%s) error\n  %v\nwant it to match %q", file, err, wantRE)
	}
	return err
}

func TestParseTrailingGarbageIsAnErrorWithPosition(t *testing.T) {
	// cedar-go's Policy.UnmarshalCedar ignores everything after the first
	// policy; kcedar must not.
	src := "permit(principal, action, resource) when { false };\n\ngarbage !!! ("
	wantParseError(t, "team.cedar", src, `^team\.cedar:3:\d+: `)

	// A second policy missing its semicolon, and one cut short.
	wantParseError(t, "a.cedar", "permit(principal, action, resource);\npermit(principal, action, resource)", `^a\.cedar:2:\d+: .*\(at the end of the input\)`)
	wantParseError(t, "b.cedar", "permit(principal, action, resource) when {", `^b\.cedar:1:\d+: `)
	wantParseError(t, "c.cedar", "permit(principal, action, resource); forbid", `^c\.cedar:1:\d+: `)
}

func TestParseIDsReasonsAndSources(t *testing.T) {
	src := `// leading comment
@id("alice-pods") @reason("alice reads pods")
permit(principal == k8s::User::"alice", action == k8s::Action::"get", resource is core::pods);

  forbid(principal, action, resource is core::secrets)
  when { resource.object.v1.type == "x" };
@reason("no id")
permit(principal, action, resource) unless { resource has oldObject };
`
	ps := mustParse(t, "dir/p.cedar", src)
	if len(ps) != 3 {
		t.Fatalf("got %d policies", len(ps))
	}
	want := []struct {
		id, reason, source, describe string
		effect                       types.Effect
		usesObjects                  bool
	}{
		{"alice-pods", "alice reads pods", "dir/p.cedar:2:1", "alice reads pods", types.Permit, false},
		{"dir/p.cedar:5:3", "", "dir/p.cedar:5:3", "dir/p.cedar:5:3", types.Forbid, true},
		{"dir/p.cedar:7:1", "no id", "dir/p.cedar:7:1", "no id", types.Permit, true},
	}
	for i, w := range want {
		p := ps[i]
		if p.ID != w.id || p.Reason != w.reason || p.Source != w.source || p.Describe() != w.describe || p.Effect != w.effect || p.UsesObjects != w.usesObjects {
			t.Errorf("policy %d: got id=%q reason=%q source=%q describe=%q effect=%v usesObjects=%v, want %+v",
				i, p.ID, p.Reason, p.Source, p.Describe(), p.Effect, p.UsesObjects, w)
		}
		if p.AST == nil || p.Compiled() == nil {
			t.Errorf("policy %d: AST or Compiled missing", i)
		}
	}
	wantParseError(t, "e.cedar", `@id("") permit(principal, action, resource);`, `^e\.cedar:1:1: @id is empty`)
	wantParseError(t, "d.cedar", `@id("a") @id("b") permit(principal, action, resource);`, `^d\.cedar:1:\d+: duplicate annotation: @id`)
}

func TestDuplicateIDsAcrossFilesNameBothPlaces(t *testing.T) {
	a := mustParse(t, "/p/a.cedar", `@id("shared") permit(principal, action, resource);`)
	b := mustParse(t, "/p/sub/b.cedar", "permit(principal, action, resource);\n\n@id(\"shared\")\nforbid(principal, action, resource);")
	_, err := NewPolicySet(append(a, b...))
	if err == nil {
		t.Fatal("duplicate @id accepted")
	}
	for _, want := range []string{`"shared"`, "/p/a.cedar:1:1", "/p/sub/b.cedar:3:1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
	// An explicit @id colliding with another policy's default id is a duplicate too.
	c := mustParse(t, "c.cedar", "permit(principal, action, resource);\n@id(\"c.cedar:1:1\") permit(principal, action, resource);")
	if _, err := NewPolicySet(c); err == nil || !strings.Contains(err.Error(), "c.cedar:1:1") {
		t.Fatalf("default id collision: %v", err)
	}
	ps, err := NewPolicySet(append(a, c[0]))
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := ps.Get("shared"); !ok || p != a[0] {
		t.Fatalf("Get(shared) = %v, %v", p, ok)
	}
	if _, ok := ps.Get("nope"); ok || ps.Len() != 2 {
		t.Fatalf("Get(nope) found, or Len %d", ps.Len())
	}
}

func TestResourceScopesNamingEntitiesAreRefused(t *testing.T) {
	for _, tc := range []struct{ scope, want string }{
		{`resource == core::pods::"web"`, `^s\.cedar:1:1: policy s\.cedar:1:1: the resource scope names entity core::pods::"web"; .*resource is core::pods`},
		{`resource in core::namespaces::"team-a"`, `resource scope .in core::namespaces::"team-a". never matches`},
		{`resource is core::pods in core::namespaces::"team-a"`, `resource scope .is core::pods in core::namespaces::"team-a". never matches`},
	} {
		wantParseError(t, "s.cedar", "permit(principal, action, "+tc.scope+");", tc.want)
	}
	// Fine: type scopes and unconstrained.
	mustParse(t, "ok.cedar", `permit(principal, action, resource is core::pods); permit(principal, action, resource);`)
}

func TestHostileInputs(t *testing.T) {
	const n = 1_000_000
	pre := "permit(principal, action, resource) when { "
	cases := []struct {
		name, src, want string
	}{
		{"a million nested parentheses", pre + strings.Repeat("(", n) + "true" + strings.Repeat(")", n) + " };", `^h\.cedar:1:\d+: nesting deeper than 64$`},
		{"a million nested brackets", pre + strings.Repeat("[", n) + strings.Repeat("]", n) + ".isEmpty() };", `nesting deeper than 64`},
		{"a million nested records", pre + strings.Repeat("{a:", n) + "1" + strings.Repeat("}", n) + " == {} };", `nesting deeper than 64`},
		{"closers hidden in block comments", pre + strings.Repeat("(/*)*/", n) + "true" + strings.Repeat(")", n) + " };", `nesting deeper than 64`},
		{"a quote hidden in a block comment", pre + `true && /* " */ ` + strings.Repeat("(", n) + "true" + strings.Repeat(")", n) + " };", `nesting deeper than 64`},
		{"a quote hidden in a line comment", pre + "true && // \"\n" + strings.Repeat("(", n) + "true" + strings.Repeat(")", n) + " };", `^h\.cedar:2:64: nesting deeper than 64`},
		{"unbalanced closers first", strings.Repeat(")", n) + strings.Repeat("(", n), `nesting deeper than 64`},
		{"a million chained ifs", pre + strings.Repeat("if true then ", n/4) + "true" + strings.Repeat(" else false", n/4) + " };", `^h\.cedar:1:1: the policy starting here is nested too deeply`},
		{"two million additions", pre + "1" + strings.Repeat("+1", 2*n) + " > 0 };", `nested too deeply`},
		{"a million conjunctions", pre + "true" + strings.Repeat("&&true", n) + " };", `nested too deeply`},
		{"four million negations", pre + strings.Repeat("!", 4*n) + "true };", `nested too deeply`},
		{"two million attribute accesses", pre + "principal" + strings.Repeat(".a", 2*n) + ` == "x" };`, `nested too deeply`},
		{"a chain left open at the end", pre + "true" + strings.Repeat("||true", n), `nested too deeply`},
		{"over the size limit", pre + "true };" + strings.Repeat(" ", MaxPolicyFileBytes), `^h\.cedar: \d+ bytes is over the limit of 8388608$`},
		{"unterminated string", pre + `principal.username == "alice };`, `^h\.cedar:1:66: string literal not terminated$`},
		{"string across lines", pre + "principal.username == \"al\nice\" };", `^h\.cedar:1:66: string literal not terminated$`},
		{"unterminated block comment", pre + "true } /* ((((", `^h\.cedar:1:51: comment not terminated$`},
		{"NUL bytes", pre + "true };\x00\x00", `^h\.cedar:`},
		{"invalid UTF-8", "\xff\xfe\xfd", `^h\.cedar:1:1: invalid UTF-8`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			wantParseError(t, "h.cedar", tc.src, tc.want)
			runtime.ReadMemStats(&after)
			// Refusing an input must not cost much more than the input.
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
				t.Errorf("allocated %d MB to refuse a %d-byte input", alloc>>20, len(tc.src))
			}
		})
	}

	t.Run("binary garbage", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(1, 2))
		for i := 0; i < 200; i++ {
			b := make([]byte, 1+rng.IntN(4096))
			for j := range b {
				b[j] = byte(rng.UintN(256))
			}
			if ps, err := ParsePolicies("bin.cedar", b); err == nil && len(ps) > 0 {
				t.Fatalf("random bytes parsed as %d policies", len(ps))
			} else if err != nil && !strings.HasPrefix(err.Error(), "bin.cedar") {
				t.Fatalf("error does not name the file: %v", err)
			}
		}
		// Eight megabytes of garbage, mostly brackets and operators.
		b := make([]byte, MaxPolicyFileBytes)
		const alphabet = "()[]{}!&|+-.*\"/\\ \nif"
		for j := range b {
			b[j] = alphabet[rng.IntN(len(alphabet))]
		}
		if _, err := ParsePolicies("bin.cedar", b); err == nil {
			t.Fatal("8 MB of garbage parsed")
		}
	})

	t.Run("5 MB of valid policies load", func(t *testing.T) {
		var b strings.Builder
		for i := 0; b.Len() < 5<<20; i++ {
			fmt.Fprintf(&b, `// policy %d: brackets in comments ((( and strings do not count
@id("p%d") @reason("team %d reads pods (and lists them)")
permit(principal in k8s::Group::"team-%d", action in [k8s::Action::"get", k8s::Action::"list"], resource is core::pods)
when { resource.namespace == "team-%d" && principal.username like "*-%d" && ["a", "b(", "c]"].contains("x") };
`, i, i, i, i, i, i)
		}
		ps, err := ParsePolicies("big.cedar", []byte(b.String()))
		if err != nil {
			t.Fatal(err)
		}
		set, err := NewPolicySet(ps)
		if err != nil {
			t.Fatal(err)
		}
		if set.Len() < 10000 {
			t.Fatalf("only %d policies", set.Len())
		}
	})
}

func TestCheckNesting(t *testing.T) {
	open := func(k int) string { return strings.Repeat("(", k) }
	cases := []struct {
		name, src string
		ok        bool
	}{
		{"exactly the limit", open(MaxNesting), true},
		{"one over the limit", open(MaxNesting + 1), false},
		{"balanced groups in sequence", strings.Repeat(open(MaxNesting)+strings.Repeat(")", MaxNesting), 100), true},
		{"brackets in a string", `"` + open(1000) + `"`, true},
		{"escaped quote in a string", `"a\"` + open(1000) + `"`, true},
		{"escaped backslash ends the string", `"a\\"` + open(MaxNesting+1) + `"`, false},
		{"brackets in a line comment", "// " + open(1000) + "\n", true},
		{"line comment ends at the newline", "// x\n" + open(MaxNesting+1), false},
		{"brackets in a block comment", "/* " + open(1000) + "\n" + open(1000) + " */", true},
		{"block comment ends at */", "/* x */" + open(MaxNesting+1), false},
		{"/*/ does not end a block comment", "/*/ " + open(1000) + " */", true},
		{"quote in a line comment", "// \"\n" + open(MaxNesting+1) + "\"", false},
		{"quote in a block comment", "/* \" */" + open(MaxNesting+1) + "\"", false},
		{"// in a string is no comment", `"//"` + open(MaxNesting+1), false},
		{"/* in a string is no comment", `"/*"` + open(MaxNesting+1) + `"*/"`, false},
		{"closers in comments do not close", strings.Repeat("(/*)*/ // )\n", MaxNesting+1), false},
		{"closers in strings do not close", strings.Repeat(`("))))"`, MaxNesting+1), false},
		{"unbalanced closers do not buy depth", strings.Repeat(")", 100) + open(MaxNesting+1), false},
		{"mixed bracket kinds", strings.Repeat("([{", MaxNesting/3) + "(" + strings.Repeat(")]}", MaxNesting/3) + ")", true},
		{"mixed bracket kinds over", strings.Repeat("([{", MaxNesting/3+1), false},
		{"long chain just under the limit", "true" + strings.Repeat("&&true", MaxExpressionDepth-2), true},
		{"long chain at the limit", "true" + strings.Repeat("&&true", MaxExpressionDepth), false},
		{"long chain in brackets", "{" + strings.Repeat("-", MaxExpressionDepth) + "1}", false},
		{"commas separate expressions", "[" + strings.Repeat("1+1+1, ", 10*MaxExpressionDepth) + "1]", true},
		{"semicolons separate policies", strings.Repeat("permit(principal, action, resource) when { true"+strings.Repeat(" && true", MaxExpressionDepth/2)+" };\n", 20), true},
		{"depth adds up through nested groups", strings.Repeat("true"+strings.Repeat("||true", 20)+"&&(", 60) + "true" + strings.Repeat(")", 60), false},
		{"nested groups under the limit", strings.Repeat("true"+strings.Repeat("||true", 10)+"&&(", 60) + "true" + strings.Repeat(")", 60), true},
		{"sibling groups do not add up", strings.Repeat("(true"+strings.Repeat("||true", 20)+")&&", 60) + "true", true},
		{"identifiers containing keywords are no operators", strings.Repeat("gift inn hash likely island ", MaxExpressionDepth), true},
		{"keywords are operators", strings.Repeat("if in has like is ", MaxExpressionDepth/5+1), false},
		{"operators in strings do not count", `"` + strings.Repeat("&&", 10*MaxExpressionDepth) + `"`, true},
	}
	for _, tc := range cases {
		_, err := checkNesting([]byte(tc.src))
		if (err == nil) != tc.ok {
			t.Errorf("%s: checkNesting = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
	// Positions count lines and characters (not bytes).
	_, err := checkNesting([]byte("\"é\"\n  é " + open(MaxNesting+1)))
	if err == nil || !strings.HasPrefix(err.Error(), fmt.Sprintf("2:%d:", 4+MaxNesting+1)) {
		t.Errorf("position: %v", err)
	}
}

// Whatever checkNesting accepts, cedar-go parses (or refuses) without
// crashing; checked over random token soup.
func TestCheckNestingRandomTokens(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	tokens := []string{"(", ")", "[", "]", "{", "}", "\"", "\\", "//", "/*", "*/", "\n", " ", "&&", "||", "!", "-", ".a", "if", "then", "else", "true", ",", ";", "x", "permit", "principal"}
	for i := 0; i < 2000; i++ {
		var b bytes.Buffer
		b.WriteString("permit(principal, action, resource) when { ")
		for j := rng.IntN(400); j > 0; j-- {
			b.WriteString(tokens[rng.IntN(len(tokens))])
		}
		_, _ = ParsePolicies("r.cedar", b.Bytes())
	}
}

// A policy is compiled on first use, once, whoever asks first; the compiled
// policy is the AST's (a confined copy gets its own, with the guard).
func TestCompiledOnFirstUseOnce(t *testing.T) {
	ps := mustParse(t, "c.cedar", `permit(principal, action, resource) when { resource.namespace == "a" };`)
	p := ps[0]
	if p.lazy.compiled != nil {
		t.Fatal("compiled at parse")
	}
	got := make(chan any, 8)
	for range 8 {
		go func() { got <- p.Compiled() }()
	}
	first := <-got
	for range 7 {
		if c := <-got; c != first {
			t.Fatal("compiled twice")
		}
	}
	if !bytes.Equal(p.Compiled().MarshalCedar(), p.Text()) {
		t.Fatalf("compiled %s, AST %s", p.Compiled().MarshalCedar(), p.Text())
	}
	confined, err := ConfineToNamespace(ps, "team", "x/")
	if err != nil {
		t.Fatal(err)
	}
	if text := string(confined[0].Compiled().MarshalCedar()); !strings.Contains(text, `"team"`) || p.Compiled() == confined[0].Compiled() {
		t.Fatalf("the confined policy shares the original's compiled form: %s", text)
	}
}
