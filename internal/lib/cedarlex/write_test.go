package cedarlex

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	cedarlib "github.com/cedar-policy/cedar-go"
	cedarast "github.com/cedar-policy/cedar-go/ast"
	"github.com/cedar-policy/cedar-go/types"
)

// hostilePieces are what hostile names are made of: line breaks of every
// reader, quotes, backslashes, comment delimiters, NUL, invalid UTF-8,
// bidirectional controls and whole policies.
var hostilePieces = []string{
	"\n", "\r", "\r\n", "\u2028", "\u2029", "\u0085", `"`, `\`, `\"`, "*/", "/*", "//", "\x00", "\xff", "\xc3", "\xed\xa0\x80",
	"\n@id(\"p\") permit (principal, action, resource);\n", "\"; permit (principal, action, resource); //", ";", "}", ")",
	" when { true }", "ünï", "\u202e", "\t", " ", "a", "-", ":", "/", "*", "\v", "\f", "\ufeff",
}

// hostileString draws a name of hostile pieces, now and then a long one.
func hostileString(r *rand.Rand) string {
	var b strings.Builder
	for range r.IntN(6) {
		b.WriteString(hostilePieces[r.IntN(len(hostilePieces))])
	}
	if r.IntN(20) == 0 {
		b.WriteString(strings.Repeat("x", 5000))
	}
	return b.String()
}

// hostilePolicy is a policy with s in every place outside text can take.
func hostilePolicy(s string) *Policy {
	return &Policy{
		Comments:    []string{s, "subjects: " + s},
		Annotations: []Annotation{{"id", "p/" + s}, {"binding", s}},
		Principal:   ScopeEq(types.NewEntityUID("k8s::User", types.String(s))),
		Action:      ScopeInSet([]types.EntityUID{types.NewEntityUID("k8s::Action", types.String(s)), types.NewEntityUID("k8s::Action", "get")}),
		Resource:    ScopeIs("core::pods"),
		When: []Expr{
			Resource().Attr("namespace").Eq(Str(s)),
			Or(Not(Resource().Has("name")), And(Resource().Has(s), Resource().Attr(s).LikePrefix(s))),
			OneOf(Context().Attr("verb"), []string{s, "get"}),
			Principal().In(Entity(types.NewEntityUID("k8s::Group", types.String(s)))),
			Resource().Attr("name").Like(s, "-", s+"*", ""),
		},
	}
}

// TestHostileTextStaysQuoted writes policies holding hostile text and
// checks that cedar-go parses the file to exactly the policy built, that
// every rune of the file is printable (or a newline), and that its
// comments are the lines written: text never becomes syntax. A name that
// is not valid UTF-8 is refused with a reason, never changed.
func TestHostileTextStaysQuoted(t *testing.T) {
	r := rand.New(rand.NewPCG(42, 1))
	written := 0
	for range 2000 {
		s := hostileString(r)
		var f File
		f.Comment("header: " + s)
		err := f.Add(hostilePolicy(s))
		if !utf8.ValidString(s) {
			if err == nil || !strings.Contains(err.Error(), "not valid UTF-8") {
				t.Fatalf("%q: not refused as invalid UTF-8 (%v)", s, err)
			}
			if f.Len() != 0 || bytes.Count(f.Bytes(), []byte("\n")) != 1 {
				t.Fatalf("%q: a refused policy was written:\n%s", s, f.Bytes())
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		written++
		checkWritten(t, s, &f, 3)
	}
	if written < 500 {
		t.Fatalf("only %d of 2000 hostile names were valid UTF-8: the generator is off", written)
	}
}

// checkWritten checks a File of one policy and comments comments.
func checkWritten(t *testing.T, name string, f *File, comments int) {
	t.Helper()
	src := f.Bytes()
	if !allPrintable(string(src)) {
		t.Fatalf("%q: the file holds a rune that is not printable:\n%q", name, src)
	}
	ps, err := cedarlib.NewPolicyListFromBytes("f.cedar", src)
	if err != nil || len(ps) != 1 {
		t.Fatalf("%q: %d policies, %v\n%s", name, len(ps), err, src)
	}
	if got, want := ps[0].MarshalCedar(), f.Built()[0].Text(); !bytes.Equal(got, want) {
		t.Fatalf("%q: parsed\n%s\nbuilt\n%s", name, got, want)
	}
	toks, err := Tokens(src)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, tok := range toks {
		if tok.Kind.IsComment() {
			n++
			if tok.Kind != LineComment || strings.Contains(tok.Text(src), "/*") || strings.Contains(tok.Text(src)[2:], "*/") {
				t.Fatalf("%q: comment %q", name, tok.Text(src))
			}
		}
	}
	if n != comments {
		t.Fatalf("%q: %d comments, want %d:\n%s", name, n, comments, src)
	}
}

// The layout is the one kcedar's tools have always written.
func TestPolicyLayout(t *testing.T) {
	var f File
	f.Comment("a comment")
	f.Blank()
	long := strings.Repeat("n", 60)
	err := f.Add(&Policy{
		Annotations: []Annotation{{"id", "x"}, {"rule", "0"}},
		Principal:   ScopeIn(types.NewEntityUID("k8s::Group", "dev")),
		Action:      ScopeEq(types.NewEntityUID("k8s::Action", "get")),
		When: []Expr{
			Not(Resource().Is("k8s::NonResourceURL")),
			And(Resource().Has("namespace"), Resource().Attr("namespace").Eq(Str("ns"))),
			Or(Not(Resource().Attr("named")), And(Resource().Attr("named"), OneOf(Resource().Attr("name"), []string{"a", long}))),
			Resource().Attr("path").LikePrefix("/a*b"),
			Resource().Attr("in").Eq(Str("x")),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `// a comment

@id("x")
@rule("0")
permit (
  principal in k8s::Group::"dev",
  action == k8s::Action::"get",
  resource
)
when {
  !(resource is k8s::NonResourceURL) &&
  resource has namespace && resource.namespace == "ns" &&
  (
    !resource.named ||
    (resource.named && ["a", "` + long + `"].contains(resource.name))
  ) &&
  resource.path like "/a\*b*" &&
  resource["in"] == "x"
};
`
	if got := string(f.Bytes()); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	ps, err := cedarlib.NewPolicyListFromBytes("f.cedar", f.Bytes())
	if err != nil || !bytes.Equal(ps[0].MarshalCedar(), f.Built()[0].Text()) {
		t.Errorf("parsed %v, built\n%s", err, f.Built()[0].Text())
	}
}

// What cannot be written exactly is refused, and nothing is written.
func TestAddRefuses(t *testing.T) {
	ok := func() *Policy { return &Policy{Annotations: []Annotation{{"id", "a"}}} }
	cases := map[string]*Policy{
		"no id":            {},
		"bad type":         {Annotations: []Annotation{{"id", "b"}}, Resource: ScopeIs("core::pods\n@id(\"x\")")},
		"reserved type":    {Annotations: []Annotation{{"id", "b"}}, Resource: ScopeIs("in::pods")},
		"entity type":      {Annotations: []Annotation{{"id", "b"}}, Principal: ScopeEq(types.NewEntityUID("k8s::User\"", "x"))},
		"set principal":    {Annotations: []Annotation{{"id", "b"}}, Principal: ScopeInSet([]types.EntityUID{types.NewEntityUID("k8s::User", "x")})},
		"action is":        {Annotations: []Annotation{{"id", "b"}}, Action: ScopeIs("k8s::Action")},
		"annotation key":   {Annotations: []Annotation{{"id", "b"}, {"a b", "x"}}},
		"repeated key":     {Annotations: []Annotation{{"id", "b"}, {"id", "c"}}},
		"zero expression":  {Annotations: []Annotation{{"id", "b"}}, When: []Expr{{}}},
		"invalid in is":    {Annotations: []Annotation{{"id", "b"}}, When: []Expr{Resource().Is("a b")}},
		"invalid string":   {Annotations: []Annotation{{"id", "b"}}, When: []Expr{Not(Resource().Attr("x").Eq(Str("\xff")))}},
		"invalid id":       {Annotations: []Annotation{{"id", "\xff"}}},
		"taken id":         ok(),
		"invalid attr":     {Annotations: []Annotation{{"id", "b"}}, When: []Expr{Resource().Attr("\xff").Eq(Str("x"))}},
		"invalid like":     {Annotations: []Annotation{{"id", "b"}}, When: []Expr{Resource().Attr("x").LikePrefix("\xff")}},
		"invalid has":      {Annotations: []Annotation{{"id", "b"}}, When: []Expr{Resource().Has("\xff")}},
		"empty and":        {Annotations: []Annotation{{"id", "b"}}, When: []Expr{And()}},
		"empty or in set":  {Annotations: []Annotation{{"id", "b"}}, When: []Expr{Set(Or()).Contains(Str("x"))}},
		"invalid entity":   {Annotations: []Annotation{{"id", "b"}}, When: []Expr{Principal().In(Entity(types.NewEntityUID("k8s::Group", "\xc3")))}},
		"invalid contains": {Annotations: []Annotation{{"id", "b"}}, When: []Expr{Set(Str("a")).Contains(Str("\xc3"))}},
	}
	for name, p := range cases {
		var f File
		if err := f.Add(ok()); err != nil {
			t.Fatal(err)
		}
		before := len(f.Bytes())
		if err := f.Add(p); err == nil {
			t.Errorf("%s: written:\n%s", name, f.Bytes())
		} else if len(f.Bytes()) != before || f.Len() != 1 {
			t.Errorf("%s: refused (%v) but written", name, err)
		}
	}
}

// Built.Text is cedar-go's text of the AST: the form a parsed policy has.
func TestBuiltTextIsCedarGos(t *testing.T) {
	var f File
	if err := f.Add(hostilePolicy("x")); err != nil {
		t.Fatal(err)
	}
	var p cedarlib.Policy
	if err := p.UnmarshalCedar(f.Bytes()); err != nil {
		t.Fatal(err)
	}
	if got := (*cedarast.Policy)(p.AST()).MarshalCedar(); !bytes.Equal(got, f.Built()[0].Text()) {
		t.Errorf("parsed\n%s\nbuilt\n%s", got, f.Built()[0].Text())
	}
}
