package store

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kcedar/kcedar/internal/cedarlang"
)

// loadIncrementally loads s and fails unless the load was built by the
// change (ReloadResult.Incremental).
func loadIncrementally(t *testing.T, s *Store, rec *recorder) {
	t.Helper()
	if err := s.Load(); err != nil {
		t.Fatal(err)
	}
	if !rec.last(t).Incremental {
		t.Fatal("the load was built from scratch, not by the change")
	}
}

// A reload by the change keeps the store's rules: an invalid edit keeps the
// last good set (and the next good edit is built by the change from it); an
// edit that empties the set is refused; --max-policy-loss and
// --keep-forbids refuse what they refused before; only the policies parsed
// anew are validated.
func TestIncrementalReloadKeepsTheRules(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.cedar"), filepath.Join(dir, "b.cedar")
	var many []string
	for i := range 20 {
		many = append(many, policy(fmt.Sprintf("p%d", i)))
	}
	forbid := "@id(\"no-secrets\")\nforbid(principal, action, resource is core::secrets);\n"
	writeFile(t, a, strings.Join(many, ""))
	writeFile(t, b, forbid)
	v := &countedPolicies{}
	s, rec := newStore(t, []string{dir}, v)
	if err := s.Load(); err != nil {
		t.Fatal(err)
	}
	v.n = 0

	// One policy added: one validated, built by the change.
	writeFile(t, a, strings.Join(many, "")+policy("added"))
	loadIncrementally(t, s, rec)
	if v.n != 1 || s.Current().Len() != 22 {
		t.Fatalf("validated %d policies for one added; %d serve", v.n, s.Current().Len())
	}

	// An invalid edit: the last good set keeps serving...
	good := s.Current()
	writeFile(t, a, strings.Join(many, "")+policy("bad-one"))
	if err := s.Load(); err == nil || s.Current() != good {
		t.Fatalf("an invalid edit: %v; serving replaced: %v", err, s.Current() != good)
	}
	// ... and the next good edit is built by the change from it.
	writeFile(t, a, strings.Join(many, "")+policy("added")+policy("more"))
	loadIncrementally(t, s, rec)
	if got := ids(s.Current()); len(got) != 23 || got[21] != "more" {
		t.Fatalf("serving %v", got)
	}

	// Removing the forbid, with --keep-forbids: refused.
	s.KeepForbids = true
	writeFile(t, b, "")
	if err := s.Load(); err == nil || !strings.Contains(err.Error(), "no-secrets") {
		t.Fatalf("--keep-forbids: %v", err)
	}
	s.KeepForbids = false

	// Removing most policies, with --max-policy-loss: refused.
	s.MaxPolicyLoss = 0.5
	writeFile(t, b, forbid)
	writeFile(t, a, policy("p0"))
	if err := s.Load(); err == nil || !strings.Contains(err.Error(), "max-policy-loss") {
		t.Fatalf("--max-policy-loss: %v", err)
	}
	s.MaxPolicyLoss = 0

	// Emptying every file: refused, whatever built it.
	writeFile(t, a, "")
	writeFile(t, b, "// nothing\n")
	if err := s.Load(); err == nil || !strings.Contains(err.Error(), "no policies") {
		t.Fatalf("an empty set: %v", err)
	}
	if s.Current().Len() != 23 {
		t.Fatalf("after the refusals %d policies serve, want 23", s.Current().Len())
	}
}

// An insert above policies without @id (named by their position) moves
// them: they are not parsed or validated again, and serve under the names
// of their new positions, as a fresh load names them.
func TestIncrementalInsertMovesPositionalPolicies(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a.cedar")
	anon := "permit(principal, action, resource is core::pods);\n"
	writeFile(t, a, anon+anon+anon)
	v := &countedPolicies{}
	s, rec := newStore(t, []string{dir}, v)
	if err := s.Load(); err != nil {
		t.Fatal(err)
	}
	before := s.Current().Policies
	v.n = 0
	writeFile(t, a, policy("first")+anon+anon+anon)
	loadIncrementally(t, s, rec)
	fresh, _ := newStore(t, []string{dir}, nil)
	if err := fresh.Load(); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(ids(s.Current()), " "), strings.Join(ids(fresh.Current()), " "); got != want {
		t.Fatalf("serving %s, a fresh load %s", got, want)
	}
	if v.n != 1 {
		t.Fatalf("validated %d policies for one inserted", v.n)
	}
	if moved := s.Current().Policies[1]; moved.ID == before[0].ID || moved.AST.Principal != before[0].AST.Principal {
		t.Fatalf("policy 1 is %s, was %s", moved.ID, before[0].ID)
	}
}

// An insert above policies without @id renames them (their position is
// their name) but removes none: --max-policy-loss and --keep-forbids count
// the policies a change removes, not the names it moves.
func TestInsertAbovePositionalPoliciesRemovesNone(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a.cedar")
	anon := "permit(principal, action, resource is core::pods);\n"
	anonForbid := "forbid(principal, action == k8s::Action::\"delete\", resource is core::pods);\n"
	writeFile(t, a, anon+anonForbid+anon)
	s, rec := newStore(t, []string{dir}, &countedPolicies{})
	if err := s.Load(); err != nil {
		t.Fatal(err)
	}
	s.MaxPolicyLoss, s.KeepForbids = 0.3, true
	writeFile(t, a, policy("first")+anon+anonForbid+anon)
	loadIncrementally(t, s, rec)
	if got := strings.Join(ids(s.Current()), " "); !strings.Contains(got, "a.cedar:3:1") {
		t.Fatalf("serving %s: the forbid was not renamed by its new position", got)
	}
	// Removing the forbid is still a removal.
	writeFile(t, a, policy("first")+anon+anon)
	if err := s.Load(); err == nil || !strings.Contains(err.Error(), "keep-forbids") {
		t.Fatalf("removing a forbid without @id: %v", err)
	}
}

// countedPolicies counts the policies it validates, and refuses those
// whose id starts with "bad".
type countedPolicies struct{ n int }

func (v *countedPolicies) Validate(ps []*cedarlang.Policy) []error {
	v.n += len(ps)
	return (&countingValidator{}).Validate(ps)
}
