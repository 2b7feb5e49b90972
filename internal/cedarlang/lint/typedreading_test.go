package lint

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/kcedar/kcedar/internal/cedarlang"
)

// Readings the cases below test, by kcedar's names (their types are not
// checked here: the rule works on the parsed policy).
const (
	cpuQ   = "resource.object.v1.spec.cpuQuantity"
	hardQ  = `resource.object.v1.spec.hardQuantity.getTag("cpu")`
	surgeI = "resource.object.v1.spec.maxSurgeIntOrString"
	podCPU = `resource.object.effectiveResources.limits.getTag("cpu")`
)

// parsedSources parses src (one file) without a schema and places its
// policies in it, as Check does.
func parsedSources(t *testing.T, src string) []*policySource {
	t.Helper()
	ps, err := cedarlang.ParsePolicies("w.cedar", []byte(src))
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, src)
	}
	return locatePolicies(newSourceFile("w.cedar", []byte(src)), ps, len(src))
}

// A representability test of a typed reading in positive polarity, in a
// forbid's when or a permit's unless, warns (at its has or attribute); the
// fail-closed forms do not.
func TestTypedReadingFailOpen(t *testing.T) {
	forbidWhen := func(cond string) string {
		return "@id(\"w\")\nforbid (principal, action, resource is core::pods)\nwhen { " + cond + " };"
	}
	cases := []struct {
		name, src string
		want      string // "" for no warning, else the test named in the message
	}{
		{"forbid when has milli", forbidWhen(cpuQ + " has milli && " + cpuQ + ".milli > 4000"), "`has milli`"},
		{"forbid when has milli as a string", forbidWhen(cpuQ + ` has "milli" && ` + cpuQ + ".milli > 4000"), "`has milli`"},
		{"forbid when tag has milli", forbidWhen(hardQ + " has milli && " + hardQ + ".milli > 4000"), "`has milli`"},
		{"forbid when effective limit has milli", forbidWhen(podCPU + " has milli && " + podCPU + ".milli > 4000"), "`has milli`"},
		{"forbid when valid", forbidWhen(cpuQ + ".valid"), "`.valid`"},
		{"forbid when valid == true", forbidWhen(cpuQ + ".valid == true"), "`.valid`"},
		{"forbid when valid != false", forbidWhen("false != " + cpuQ + ".valid"), "`.valid`"},
		{"forbid when has intVal", forbidWhen(surgeI + " has intVal && " + surgeI + ".intVal > 1"), "`has intVal`"},
		{"forbid when has percent", forbidWhen(surgeI + " has percent && " + surgeI + ".percent > 25"), "`has percent`"},
		{"forbid when isInt", forbidWhen(surgeI + ".isInt && " + surgeI + ".intVal > 1"), "`.isInt`"},
		{"forbid when double negation", forbidWhen("!!(" + cpuQ + " has milli) && " + cpuQ + ".milli > 4000"), "`has milli`"},
		{"forbid when has milli in an or", forbidWhen("principal.username == \"x\" || " + cpuQ + " has milli"), "`has milli`"},
		{"forbid when has milli as an if condition", forbidWhen("if " + cpuQ + " has milli then " + cpuQ + ".milli > 4000 else false"), "`has milli`"},
		{"permit unless has milli", "@id(\"w\")\npermit (principal, action, resource is core::pods)\nunless { " + cpuQ + " has milli && " + cpuQ + ".milli > 4000 };", "`has milli`"},

		{"the idiom", "@id(\"w\")\nforbid (principal, action, resource is core::pods)\nwhen { resource.object.v1.spec has cpuQuantity }\nunless { " + cpuQ + " has milli && " + cpuQ + ".milli <= 4000 };", ""},
		{"forbid when not has milli", forbidWhen("!(" + cpuQ + " has milli) || " + cpuQ + ".milli > 4000"), ""},
		{"forbid when not valid", forbidWhen("!" + cpuQ + ".valid"), ""},
		{"forbid when valid == false", forbidWhen(cpuQ + ".valid == false"), ""},
		{"forbid when not isInt", forbidWhen("!" + surgeI + ".isInt || " + surgeI + ".intVal > 1"), ""},
		{"permit when has milli", "@id(\"w\")\npermit (principal, action, resource is core::pods)\nwhen { " + cpuQ + " has milli && " + cpuQ + ".milli <= 4000 };", ""},
		{"permit unless not has milli", "@id(\"w\")\npermit (principal, action, resource is core::pods)\nunless { !(" + cpuQ + " has milli) || " + cpuQ + ".milli > 4000 };", ""},
		{"forbid unless isInt", "@id(\"w\")\nforbid (principal, action, resource is core::pods)\nunless { " + surgeI + ".isInt && " + surgeI + ".intVal <= 1 };", ""},
		{"not a typed reading", forbidWhen("resource.object.v1.spec has milli && resource.object.v1.spec.valid"), ""},
		{"a tag of another map", forbidWhen(`resource.object.v1.metadata.labels.getTag("cpu") has milli`), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srcs := parsedSources(t, tc.src)
			ds := typedReadingDiagnostics(srcs[0])
			if tc.want == "" {
				if len(ds) != 0 {
					t.Fatalf("want no warning, got %v", ds)
				}
				return
			}
			if len(ds) != 1 {
				t.Fatalf("want one warning, got %v", ds)
			}
			d := ds[0]
			if d.Severity != Warning || d.Code != CodeTypedReadingFailOpen || !strings.Contains(d.Message, tc.want) || !strings.Contains(d.Hint, "q has milli && q.milli <= 4000 }") {
				t.Errorf("got %s [%s %s]", d, d.Severity, d.Code)
			}
			// The diagnostic points at the test: `has <attr>` or the attribute.
			word := strings.Trim(tc.want, "`.") // has milli, valid
			word, _, _ = strings.Cut(word, " ")
			if got := tc.src[srcs[0].file.offset(d.Line, d.Column):]; !strings.HasPrefix(got, word) {
				t.Errorf("points at %q, want %q", got[:min(len(got), 20)], word)
			}
		})
	}
}

// With several tests of the same attribute, the warning points at the one
// that fails open, not the first in the text (nor one in a comment).
func TestTypedReadingFailOpenPosition(t *testing.T) {
	src := `@id("w")
forbid (principal, action, resource is core::pods)
// not: ` + cpuQ + ` has milli
when { !(` + cpuQ + ` has milli) ||
       ` + cpuQ + `.valid ||
       ` + cpuQ + `   has   milli };`
	ds := typedReadingDiagnostics(parsedSources(t, src)[0])
	var got []string
	for _, d := range ds {
		got = append(got, fmt.Sprintf("%d:%d %s", d.Line, d.Column, d.Message[strings.Index(d.Message, "(")+1:strings.Index(d.Message, ")")]))
	}
	want := []string{"5:44 `.valid`", "6:46 `has milli`"}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// Through the Checker, against the schema: a fail-open forbid on a
// ResourceQuota's CPU warns, the idiom does not.
func TestTypedReadingFailOpenChecked(t *testing.T) {
	c := testChecker(t)
	// The typed readings (k8s::Quantity, hardQuantity) come with their
	// schema change; until the schema has them these policies do not validate.
	if text, err := c.Schema.MarshalCedar(); err != nil || !bytes.Contains(text, []byte("type Quantity = {")) {
		t.Skip("the schema has no k8s::Quantity yet")
	}
	const guard = `resource has object && resource.object has v1 && resource.object.v1 has spec &&
       resource.object.v1.spec has hardQuantity && resource.object.v1.spec.hardQuantity.hasTag("cpu")`
	const cpu = `resource.object.v1.spec.hardQuantity.getTag("cpu")`
	failOpen := `@id("w")
forbid (principal, action, resource is core::resourcequotas)
when { ` + guard + ` &&
       ` + cpu + ` has milli && ` + cpu + `.milli > 4000 };`
	res := c.Check([]File{{Name: "w.cedar", Data: []byte(failOpen)}})
	if res.Errors() != 0 || len(res.Diagnostics) != 1 || res.Diagnostics[0].Code != CodeTypedReadingFailOpen {
		t.Fatalf("want one %s warning, got %v", CodeTypedReadingFailOpen, res.Diagnostics)
	}
	if d := res.Diagnostics[0]; d.Line != 5 || d.Column != 59 {
		t.Errorf("warning at %d:%d, want 5:59 (the has)", d.Line, d.Column)
	}
	// The validator checks each clause on its own: the unless repeats the
	// guard.
	idiom := `@id("w")
forbid (principal, action, resource is core::resourcequotas)
when { ` + guard + ` }
unless { ` + guard + ` &&
         ` + cpu + ` has milli && ` + cpu + `.milli <= 4000 };`
	if res := c.Check([]File{{Name: "w.cedar", Data: []byte(idiom)}}); len(res.Diagnostics) != 0 {
		t.Fatalf("the idiom: %v", res.Diagnostics)
	}
}
