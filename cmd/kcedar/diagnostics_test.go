package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/*.golden")

// One diagnostic engine: serve's policy store reports the broken files of
// testdata/broken exactly as validate does (same positions, messages and
// hints), one log record per finding, and /readyz's text (the store's error)
// lists them all. validate's output is pinned in testdata/broken.golden.
func TestServeAndValidateDiagnosticsAgree(t *testing.T) {
	t.Chdir("testdata")
	checker := testChecker(t)
	var out bytes.Buffer
	err := runValidate(&out, checker, []string{"broken"}, validateOptions{output: "json"})
	if err == nil {
		t.Fatal("validate accepted the broken files")
	}
	var rep validateReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, d := range rep.Diagnostics {
		if d.Severity == "error" {
			want = append(want, d.String())
		}
	}
	if len(want) < 4 {
		t.Fatalf("only %d findings: %v", len(want), want)
	}

	var logs bytes.Buffer
	store := newPolicyStore(checker, []string{"broken"}, slog.New(slog.NewJSONHandler(&logs, nil)))
	if store.Load() == nil {
		t.Fatal("the store loaded the broken files")
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var rec struct {
			Msg     string `json:"msg"`
			Finding *struct {
				File, Policy, Message, Hint string
				Line, Column                int
			} `json:"finding"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Msg != "policy error" {
			continue
		}
		if rec.Finding == nil {
			t.Fatalf("a policy error without a structured finding: %s", line)
		}
		f := rec.Finding
		s := fmt.Sprintf("%s:%d:%d: ", f.File, f.Line, f.Column)
		if f.Policy != "" {
			s += "policy " + f.Policy + ": "
		}
		s += f.Message
		if f.Hint != "" {
			s += "\n    hint: " + f.Hint
		}
		got = append(got, s)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("serve logged:\n%s\nvalidate reports:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	readyz := store.LastError().Error()
	for _, w := range want {
		if !strings.Contains(readyz, strings.ReplaceAll(w, "\n", "\n  ")) {
			t.Errorf("/readyz text lacks %q:\n%s", w, readyz)
		}
	}

	var text bytes.Buffer
	runValidate(&text, checker, []string{"broken"}, validateOptions{output: "text"})
	if *updateGolden {
		if err := os.WriteFile("broken.golden", text.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	golden, err := os.ReadFile("broken.golden")
	if err != nil {
		t.Fatal(err)
	}
	if text.String() != string(golden) {
		t.Errorf("validate output differs from testdata/broken.golden (go test ./cmd/kcedar -run Diagnostics -update):\n%s", text.String())
	}
}
