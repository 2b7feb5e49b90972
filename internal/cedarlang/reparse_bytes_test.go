package cedarlang_test

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/testing/testgen/zoo"
)

// fragments are what a byte-level edit inserts: pieces of policies, and
// the characters that change how everything after them reads (a quote, a
// comment opener, a bracket, a semicolon).
var fragments = []string{`"`, `/*`, `*/`, `//`, "\n", ";", "(", ")", "{", "}", " ", "é",
	`permit (principal, action, resource);`, "\n@id(\"x\")\n", "forbid", `resource.name == "a;b"`, `"//"`,
	"\n// a comment; with a semicolon\n", "/* a; block */", "\npermit (principal, action, resource) when { \"/*\" == \"x\" };\n",
	"\n\n\n", "  "}

// byteEdit changes src in one place: deletes a span, inserts a fragment,
// or both, anywhere (inside a string, a comment, an annotation).
func byteEdit(rng *rand.Rand, src []byte) []byte {
	at := rng.IntN(len(src) + 1)
	cut := 0
	if rng.IntN(2) == 0 {
		cut = rng.IntN(min(40, len(src)-at) + 1)
	}
	ins := ""
	if rng.IntN(3) != 0 {
		ins = fragments[rng.IntN(len(fragments))]
	}
	return slices.Concat(src[:at], []byte(ins), src[at+cut:])
}

// Reparse after an edit anywhere in a file, at byte level, gives exactly
// what ParsePolicies gives: the same policies (ids, positions, texts,
// where each ends) or the same error. Edits that open a string or a
// comment change how the rest of the file reads, so the re-read cannot stop
// early; edits that leave the file broken must fail as a whole parse does.
func TestReparseByteEditsEqualWholeParse(t *testing.T) {
	steps := 600
	if testing.Short() {
		steps = 150
	}
	rng := rand.New(rand.NewPCG(5, 11))
	blocks := strings.SplitAfter(zoo.Policies(60, 3), "\n\n")
	for i := range blocks {
		if i%4 == 1 { // some without @id: named by their position
			if _, rest, ok := strings.Cut(blocks[i], "\n"); ok && strings.HasPrefix(blocks[i], "@id(") {
				blocks[i] = rest
			}
		}
	}
	good := []byte(strings.Join(blocks, ""))
	prev, err := cedarlang.ParsePolicies("f.cedar", good)
	if err != nil {
		t.Fatal(err)
	}
	cur, failed := good, 0
	for step := range steps {
		next := byteEdit(rng, cur)
		got, fresh, gotErr := cedarlang.Reparse("f.cedar", next, "f.cedar", cur, prev)
		want, wantErr := cedarlang.ParsePolicies("f.cedar", next)
		if (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error() {
			t.Fatalf("step %d: Reparse error %v, ParsePolicies error %v", step, gotErr, wantErr)
		}
		if wantErr != nil {
			failed++
			continue // the serving text stays
		}
		if diff := samePolicies(got, want); diff != "" {
			t.Fatalf("step %d: %s", step, diff)
		}
		if len(fresh) > len(got) {
			t.Fatalf("step %d: %d fresh of %d", step, len(fresh), len(got))
		}
		cur, prev = next, got
		if len(cur) > 4*len(good) || len(prev) < 10 {
			cur, prev = good, mustParse(t, good) // keep the file a realistic size
		}
	}
	t.Logf("%d byte edits, %d leaving the file broken", steps, failed)
	if failed == 0 || failed == steps {
		t.Fatalf("%d of %d edits broke the file: the test needs both kinds", failed, steps)
	}
}

func mustParse(t *testing.T, src []byte) []*cedarlang.Policy {
	ps, err := cedarlang.ParsePolicies("f.cedar", src)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}
