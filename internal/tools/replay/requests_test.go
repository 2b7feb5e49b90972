package replay

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
)

// ReadRequests passes on exactly the requests Replayer compares or leaves
// conditional or undecidable (each once), over every corpus file.
func TestReadRequestsAgreesWithReplayer(t *testing.T) {
	reach, err := NewReach([]byte(manifestsReach), "")
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "corpus", "*.jsonl"))
	if len(files) < 5 {
		t.Fatalf("corpus: %v", files)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		s, _ := replay(t, testPolicies, Options{Reach: reach}, data)
		seen := map[string]int{}
		var started int
		err = ReadRequests(context.Background(), bytes.NewReader(data), ReadOptions{Reach: reach}, func(e Event) error {
			seen[e.AuditID()]++
			if e.Stage() == stageResponseStarted {
				started++
			}
			if _, err := e.Request(); err != nil {
				t.Errorf("%s: %s: %v", f, e.AuditID(), err)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if want := s.Requests - s.NotSeen; len(seen) != want || started != s.DecidedAtResponseStarted {
			t.Errorf("%s: %d requests (%d at ResponseStarted), want %d (%d): %v", f, len(seen), started, want, s.DecidedAtResponseStarted, seen)
		}
		for id, n := range seen {
			if n != 1 {
				t.Errorf("%s: %s passed on %d times", f, id, n)
			}
		}
	}
}
