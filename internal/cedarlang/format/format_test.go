package format

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/lib/cedarlex"
	"github.com/kcedar/kcedar/internal/testing/testgen"
	"github.com/kcedar/kcedar/internal/testing/testgen/zoo"
)

// golden cases: input and its canonical layout.
var fmtGolden = []struct{ name, in, want string }{
	{"scope fits", `permit(principal,action,resource);`, "permit (principal, action, resource);\n"},
	{"annotations", `@id("a") @reason("r")  @audit permit(principal,action,resource)when{true};`,
		"@id(\"a\")\n@reason(\"r\")\n@audit\npermit (principal, action, resource)\nwhen { true };\n"},
	{"long scope", `forbid(principal in k8s::Group::"system:authenticated", action in [k8s::Action::"create", k8s::Action::"delete"], resource is core::pods);`,
		"forbid (\n  principal in k8s::Group::\"system:authenticated\",\n  action in [k8s::Action::\"create\", k8s::Action::\"delete\"],\n  resource is core::pods\n);\n"},
	{"long condition", `permit(principal,action,resource)when{resource.namespace=="kube-system"&&principal.name=="system:kube-scheduler"||principal.name=="alice"};`,
		"permit (principal, action, resource)\nwhen {\n  resource.namespace == \"kube-system\" &&\n  principal.name == \"system:kube-scheduler\" ||\n  principal.name == \"alice\"\n};\n"},
	{"long and chain", `permit(principal,action,resource)when{resource.namespace=="kube-system"&&principal.name=="system:kube-scheduler"&&resource.name=="x"};`,
		"permit (principal, action, resource)\nwhen {\n  resource.namespace == \"kube-system\" &&\n  principal.name == \"system:kube-scheduler\" &&\n  resource.name == \"x\"\n};\n"},
	{"comments", "// before\n\n// doc\npermit(principal, // p\n action, /* a */ resource) // end\nwhen { /* in */ true // t\n};\n// tail\n",
		"// before\n\n// doc\npermit (\n  principal, // p\n  action,\n  /* a */ resource\n) // end\nwhen {\n  /* in */ true // t\n};\n\n// tail\n"},
	{"comment before operator", "permit(principal,action,resource)when{true\n// why\n&& false};",
		"permit (principal, action, resource)\nwhen {\n  true\n  // why\n  &&\n  false\n};\n"},
	{"comments only", "// just\n  // comments\n", "// just\n// comments\n"},
	{"like and escapes", `permit(principal,action,resource)when{resource.name like "a\*b*\"c" && principal.name == "é\u{1F600}\n\t"};`,
		"permit (principal, action, resource)\nwhen { resource.name like \"a\\*b*\\\"c\" && principal.name == \"é\\u{1F600}\\n\\t\" };\n"},
	{"is in, has quoted", `permit(principal is k8s::User in k8s::Group::"a\"b",action,resource is core::pods)when{resource has object&&resource.object.v1.spec has "x-y"&&resource.object.v1.spec["x-y"]==-1};`,
		"permit (\n  principal is k8s::User in k8s::Group::\"a\\\"b\",\n  action,\n  resource is core::pods\n)\nwhen {\n  resource has object &&\n  resource.object.v1.spec has \"x-y\" &&\n  resource.object.v1.spec[\"x-y\"] == -1\n};\n"},
	{"sets records if", `permit(principal,action,resource)when{if [1,2,3].contains(-2) then {a:1,"b c":[true]}has a else !(1+2*3<4)};`,
		"permit (principal, action, resource)\nwhen {\n  if [1, 2, 3].contains(-2)\n  then {a: 1, \"b c\": [true]} has a\n  else !(1 + 2 * 3 < 4)\n};\n"},
	{"extensions", `permit(principal,action,resource)when{ip("10.0.0.1").isInRange(ip("10.0.0.0/8"))&&decimal("1.5").lessThan(decimal("2.0"))};`,
		"permit (principal, action, resource)\nwhen {\n  ip(\"10.0.0.1\").isInRange(ip(\"10.0.0.0/8\")) &&\n  decimal(\"1.5\").lessThan(decimal(\"2.0\"))\n};\n"},
	{"two policies", "permit(principal,action,resource);\n\n\n\nforbid(principal,action,resource)unless{false};",
		"permit (principal, action, resource);\n\nforbid (principal, action, resource)\nunless { false };\n"},
	{"empty", "\n\n", ""},
}

func TestFmtGolden(t *testing.T) {
	for _, c := range fmtGolden {
		t.Run(c.name, func(t *testing.T) {
			res, err := Source("g.cedar", []byte(c.in))
			if err != nil {
				t.Fatal(err)
			}
			if string(res.Text) != c.want {
				t.Errorf("got\n%s\nwant\n%s", res.Text, c.want)
			}
			checkFormatted(t, "g.cedar", []byte(c.in), res.Text)
		})
	}
}

func TestFmtErrors(t *testing.T) {
	for in, want := range map[string]string{
		"permit(principal == ?principal, action, resource);": "t.cedar:1:21: templates",
		"permit(principal, action, resource)\nwhen { 1 + };": "t.cedar:2:",
		"permit(principal, action, resource) when { \"x };":  "t.cedar:1:44",
	} {
		if _, err := Source("t.cedar", []byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want an error with %q", in, err, want)
		}
	}
}

func TestFmtWarnsWithoutID(t *testing.T) {
	res, err := Source("w.cedar", []byte("@id(\"x\") permit(principal,action,resource);\npermit(principal,action,resource);\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Warnings) != 1 || !strings.HasPrefix(res.Warnings[0], "w.cedar:2: policy without @id") || !strings.Contains(res.Warnings[0], "add @id") {
		t.Errorf("warnings: %q", res.Warnings)
	}
}

// checkFormatted checks out, the formatting of in: the same policies (by
// cedar-go's canonical text, and ids), every comment of in in the same
// order, and formatting out again changes nothing.
func checkFormatted(t *testing.T, name string, in, out []byte) {
	t.Helper()
	before, err := cedarlang.ParsePolicies(name, in)
	if err != nil {
		t.Fatal(err)
	}
	after, err := cedarlang.ParsePolicies(name, out)
	if err != nil {
		t.Fatalf("output does not parse: %v\n%s", err, out)
	}
	if len(before) != len(after) {
		t.Fatalf("%d policies became %d", len(before), len(after))
	}
	for i := range before {
		a, b := before[i], after[i]
		if string(a.Text()) != string(b.Text()) {
			t.Errorf("policy %d changed:\n%s\n%s", i, a.Text(), b.Text())
		}
		if (a.ID == a.Source) != (b.ID == b.Source) || a.ID != a.Source && a.ID != b.ID {
			t.Errorf("policy %d: id %s became %s", i, a.ID, b.ID)
		}
	}
	if got, want := comments(t, out), comments(t, in); strings.Join(got, "\x00") != strings.Join(want, "\x00") {
		t.Errorf("comments changed:\n%q\n%q", want, got)
	}
	again, err := Source(name, out)
	if err != nil {
		t.Fatal(err)
	}
	if string(again.Text) != string(out) {
		t.Errorf("not idempotent:\n%s\nthen\n%s", out, again.Text)
	}
}

// comments are the comment tokens of src, trailing blanks trimmed, line
// breaks in line comments escaped as fmt writes them.
func comments(t *testing.T, src []byte) []string {
	toks, err := cedarlex.Tokens(src)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, tok := range toks {
		switch tok.Kind {
		case cedarlex.LineComment:
			out = append(out, cedarlex.EscapeLineBreaks(strings.TrimRight(tok.Text(src), " \t\r")))
		case cedarlex.BlockComment:
			out = append(out, strings.TrimRight(tok.Text(src), " \t\r"))
		}
	}
	return out
}

func TestFmtLibraryPolicies(t *testing.T) {
	var files []string
	err := filepath.WalkDir("../../../policies", func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".cedar") {
			files = append(files, p)
		}
		return err
	})
	if err != nil || len(files) == 0 {
		t.Fatalf("no library policies: %v", err)
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		res, err := Source(f, src)
		if err != nil {
			t.Fatal(err)
		}
		checkFormatted(t, f, src, res.Text)
	}
}

func TestFmtGeneratedPolicies(t *testing.T) {
	texts := []string{testgen.RBACLike(300), zoo.Policies(300, 7)}
	for seed := range uint64(300) {
		texts = append(texts, randomFile(rand.New(rand.NewPCG(seed, 22))))
	}
	for i, src := range texts {
		name := fmt.Sprintf("gen%d.cedar", i)
		res, err := Source(name, []byte(src))
		if err != nil {
			t.Fatalf("%v\n%s", err, src)
		}
		checkFormatted(t, name, []byte(src), res.Text)
		if t.Failed() {
			t.Fatalf("input:\n%s", src)
		}
	}
}

// A line comment holding a carriage return, U+2028, U+2029, U+0085, a
// vertical tab or a form feed is one comment to cedar-go, but other
// readers end it there and read the rest as code: fmt writes those runes
// as escapes, so that every reader sees the one comment cedar-go saw.
func TestFmtEscapesLineBreaksInComments(t *testing.T) {
	hidden := `@id("hidden") permit (principal, action, resource);`
	for _, brk := range []string{"\r", "\u2028", "\u2029", "\u0085", "\v", "\f"} {
		in := "@id(\"a\")\npermit (principal, action, resource is core::pods); // note" + brk + hidden + "\n// own" + brk + hidden + "\n"
		res, err := Source("c.cedar", []byte(in))
		if err != nil {
			t.Fatalf("%q: %v", brk, err)
		}
		checkFormatted(t, "c.cedar", []byte(in), res.Text)
		if strings.ContainsAny(string(res.Text), "\r\v\f\u0085\u2028\u2029") {
			t.Errorf("%q: a line break other than \\n is left:\n%q", brk, res.Text)
		}
		// Read as a reader that ends lines at every break would: still the
		// one policy.
		asLines := strings.NewReplacer("\r", "\n", "\u2028", "\n", "\u2029", "\n", "\u0085", "\n", "\v", "\n", "\f", "\n").Replace(string(res.Text))
		ps, err := cedarlang.ParsePolicies("c.cedar", []byte(asLines))
		if err != nil || len(ps) != 1 || ps[0].ID != "a" {
			t.Errorf("%q: read with every break a newline: %d policies, %v\n%s", brk, len(ps), err, res.Text)
		}
	}
}
