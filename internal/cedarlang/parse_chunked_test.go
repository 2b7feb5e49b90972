package cedarlang_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	cedarlib "github.com/cedar-policy/cedar-go"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/testing/testgen/zoo"
)

// ParsePolicies parses large files in chunks (parseChunked); the result must
// be what cedar-go gives for the whole file: the same policies, in order,
// with the same positions, and the same error when there is one.
func TestParseChunkedEqualsWholeFile(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	// Separators between policies: newlines, none, CRLF, comments holding
	// semicolons and braces, multi-byte runes before a policy on its line.
	seps := []string{"\n", "\n\n", " ", "", "\r\n", "\n// a ; comment {\n", "/* ; } */", " /* é ; ü */ ", "\n\t\t", "\n/* multi\nline ; */ "}
	bodies := strings.SplitAfter(zoo.Policies(600, 3), ";\n")
	for trial := range 60 {
		var b strings.Builder
		n := 1 + rng.IntN(200)
		for i := range n {
			body := strings.TrimSpace(bodies[rng.IntN(len(bodies))])
			if body == "" {
				continue
			}
			// Unique ids, so the comparison also sees the order.
			body = strings.Replace(body, `@id("`, fmt.Sprintf(`@id("t%d-%d-`, trial, i), 1)
			b.WriteString(body)
			b.WriteString(seps[rng.IntN(len(seps))])
		}
		src := b.String()
		if trial%5 == 4 { // break one policy somewhere
			at := rng.IntN(len(src))
			src = src[:at] + "permit(" + src[at:]
		}
		compareWithWhole(t, fmt.Sprintf("trial %d", trial), []byte(src))
	}
}

func compareWithWhole(t *testing.T, name string, src []byte) {
	t.Helper()
	got, gotErr := cedarlang.ParsePolicies("f.cedar", src)
	list, wantErr := cedarlib.NewPolicyListFromBytes("f.cedar", src)
	if _, nerr := cedarlang.CheckNestingForTest(src); nerr != nil {
		return // refused before parsing either way
	}
	if (gotErr == nil) != (wantErr == nil) {
		t.Fatalf("%s: chunked error %v, whole-file error %v", name, gotErr, wantErr)
	}
	if wantErr != nil {
		if gotErr.Error() != cedarlang.ParseErrorForTest("f.cedar", wantErr).Error() {
			t.Fatalf("%s: error %q, want %q", name, gotErr, cedarlang.ParseErrorForTest("f.cedar", wantErr))
		}
		return
	}
	if len(got) != len(list) {
		t.Fatalf("%s: %d policies, want %d", name, len(got), len(list))
	}
	for i, cp := range list {
		pos := cp.Position()
		if want := fmt.Sprintf("f.cedar:%d:%d", pos.Line, pos.Column); got[i].Source != want {
			t.Fatalf("%s: policy %d at %s, want %s", name, i, got[i].Source, want)
		}
		if !bytes.Equal(got[i].Text(), cp.MarshalCedar()) {
			t.Fatalf("%s: policy %d differs:\n%s\nwant\n%s", name, i, got[i].Text(), cp.MarshalCedar())
		}
	}
}
