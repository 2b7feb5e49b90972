package accessmatrix

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kcedar/kcedar/internal/accessreview"
	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/testing/embeddedschema"
	"github.com/kcedar/kcedar/internal/testing/testgen/zoo"
)

// TestMatrixAgreesWithWhoCan draws matrices of generated (zoo) and library
// policy sets, in the cluster and in namespaces, and checks every cell
// against the who-can answer of its resource and verb: each who-can entry
// is in its subject's cell (in the cluster, in the row of the namespaces
// its condition starts by restricting, with the rest of the condition),
// each cell entry of the subject's own is a who-can entry, a forbid through
// a selector or another scope is a who-can forbid of a subject that covers
// the row's, and a single principal or group is allowed in its row for
// every namespace exactly when who-can lists it in users or groups.
func TestMatrixAgreesWithWhoCan(t *testing.T) {
	s := embeddedschema.Schema(t)
	sets := map[string]*cedarlang.PolicySet{"library": librarySet(t)}
	for seed := uint64(1); seed <= 3; seed++ {
		ps, err := zoo.PolicySet(150, seed)
		if err != nil {
			t.Fatal(err)
		}
		sets[fmt.Sprintf("zoo-%d", seed)] = ps
	}
	cells, states := 0, map[State]int{}
	for name, ps := range sets {
		az := engine.NewEngine(s, ps, engine.EngineOptions{})
		for _, ns := range []string{"", "ns-1", "team-a-dev", "kube-system"} {
			m, err := Build(context.Background(), az, s, Query{Namespace: ns})
			if err != nil {
				t.Fatal(err)
			}
			for _, res := range m.Resources {
				for _, verb := range m.Applies[res] {
					cells += checkAgainstWhoCan(t, fmt.Sprintf("%s -n %q: %s %s", name, ns, verb, res), az, s, m, res, verb, states)
				}
			}
		}
	}
	t.Logf("%d cells agree with who-can: %v", cells, states)
	for _, st := range []State{StateAllowed, StateConditional, StateDenied, StateForbidOnly} {
		if states[st] == 0 {
			t.Errorf("no %s cell: the policy sets do not exercise it", st)
		}
	}
}

// checkAgainstWhoCan compares the matrix's cells for one resource and verb
// with who-can's answer and counts the cells.
func checkAgainstWhoCan(t *testing.T, what string, az engine.RuleResolver, s *schemagen.Schema, m *Matrix, res, verb string, states map[State]int) int {
	t.Helper()
	r := resourceByName(t, s, res)
	resp, err := accessreview.WhoCan(context.Background(), az, review(m.Namespace, r.Key, verb))
	if err != nil {
		t.Fatal(err)
	}
	own := map[string]int{}
	for _, list := range [][]engine.SubjectAccess{resp.Allowed, resp.Conditional, resp.Denied} {
		for _, a := range list {
			scope, cond := "", a.Condition
			if sc, rest, ok := namespaceScope(cond); ok && m.Namespace == "" {
				scope, cond = sc, rest
			}
			kind := entryKind(sameList(list, resp.Denied), cond)
			own[entryKey(a.Subject, scope, kind, cond, a.Case, a.Policies)]++
		}
	}
	n := 0
	for _, row := range m.Rows {
		c := row.Cell(res, verb)
		if c == nil {
			continue
		}
		n++
		states[c.State]++
		for _, e := range c.Entries {
			if e.Via != "" {
				if e.Kind != Denied && e.Kind != DeniedWhen || !coveredByWhoCanForbid(row.Subject, e, resp.Denied) {
					t.Errorf("%s: %s has %+v, which no forbid of who-can covers", what, row.Label, e)
				}
				continue
			}
			k := entryKey(row.Subject, row.Namespaces, e.Kind, e.Condition, e.Case, e.Policies)
			if own[k] == 0 {
				t.Errorf("%s: %s has %+v, which who-can does not list", what, row.Label, e)
			}
			own[k]--
		}
		checkListed(t, what, row, c, resp)
	}
	for k, left := range own {
		if left > 0 {
			t.Errorf("%s: who-can's entry %q is in no cell", what, k)
		}
	}
	return n
}

// checkListed: a single principal or group is allowed exactly when who-can
// lists it in users or groups.
func checkListed(t *testing.T, what string, row *Row, c *Cell, resp *accessreview.ResourceAccessReviewResponse) {
	t.Helper()
	var listed bool
	switch {
	case row.Subject.PrincipalType != "" || row.Namespaces != "":
		return
	case row.Subject.Kind == engine.SubjectGroup:
		listed = slices.Contains(resp.Groups, row.Subject.Name)
	case row.Subject.Kind == engine.SubjectUser, row.Subject.Kind == engine.SubjectServiceAccount, row.Subject.Kind == engine.SubjectNode:
		listed = slices.Contains(resp.Users, row.Subject.Name)
	default:
		return
	}
	if listed != (c.State == StateAllowed) {
		t.Errorf("%s: %s's cell is %s, who-can lists it: %v", what, row.Label, c.State, listed)
	}
}

func sameList(a, b []engine.SubjectAccess) bool { return len(a) > 0 && len(b) > 0 && &a[0] == &b[0] }

func coveredByWhoCanForbid(sub engine.Subject, e Entry, denied []engine.SubjectAccess) bool {
	for _, d := range denied {
		if strings.HasPrefix(e.Via, d.Subject.String()) && d.Case == e.Case && slices.Equal(d.Policies, e.Policies) && (d.Subject == sub || d.Subject.Covers(sub)) {
			return true
		}
	}
	return false
}

func entryKey(sub engine.Subject, scope string, kind Kind, cond, kase string, policies []string) string {
	return fmt.Sprintf("%+v|%s|%s|%s|%s|%s", sub, scope, kind, cond, kase, strings.Join(policies, ","))
}

func resourceByName(t *testing.T, s *schemagen.Schema, name string) *schemagen.Resource {
	t.Helper()
	for _, k := range s.SortedResourceKeys() {
		if ResourceName(k) == name {
			return s.Resources[k]
		}
	}
	t.Fatalf("no resource %s", name)
	return nil
}

// librarySet is every policy of policies/library.
func librarySet(t *testing.T) *cedarlang.PolicySet {
	t.Helper()
	files, err := filepath.Glob("../../../policies/library/*/*.cedar")
	if err != nil || len(files) == 0 {
		t.Fatalf("no library policies: %v", err)
	}
	var all []*cedarlang.Policy
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		ps, err := cedarlang.ParsePolicies(f, text)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, ps...)
	}
	ps, err := cedarlang.NewPolicySet(all)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

// A request that stands for several cases (a resource kcedar's schema does
// not type) is allowed only when a permit without a condition applies in
// every case; an unconditional forbid in any case denies.
func TestSummarizeCases(t *testing.T) {
	allow := func(kase string) Entry { return Entry{Kind: Allowed, Case: kase} }
	for _, tc := range []struct {
		entries []Entry
		cases   int
		want    State
	}{
		{[]Entry{allow("")}, 1, StateAllowed},
		{[]Entry{allow("get"), allow("get, no name")}, 2, StateAllowed},
		{[]Entry{allow("get")}, 2, StateConditional},
		{[]Entry{allow("get"), allow("get"), {Kind: Conditional, Case: "get, no name"}}, 2, StateConditional},
		{[]Entry{allow("get"), allow("get, no name"), {Kind: Denied, Case: "get, no name"}}, 2, StateDenied},
		{[]Entry{allow(""), {Kind: DeniedWhen}}, 1, StateAllowed},
		{[]Entry{{Kind: DeniedWhen}}, 1, StateForbidOnly},
	} {
		if got := summarize(tc.entries, tc.cases); got != tc.want {
			t.Errorf("%+v in %d cases: %s, want %s", tc.entries, tc.cases, got, tc.want)
		}
	}
}
