package generate

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/cedarlang/lint"
	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/testing/embeddedschema"
	"github.com/kcedar/kcedar/internal/testing/testgen"
	"github.com/kcedar/kcedar/internal/tools/rbacconvert"
	"github.com/kcedar/kcedar/internal/tools/replay"
)

// records are the log's requests as replay reads them.
func records(t testing.TB, log []byte) []replay.Record {
	t.Helper()
	var out []replay.Record
	_, err := replay.ReadRecords(context.Background(), bytes.NewReader(log), 0, func(recs []replay.Record) error {
		out = append(out, recs...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// generateFrom runs a Generator over the log.
func generateFrom(t testing.TB, s *schemagen.Schema, opts Options, log []byte) *Result {
	t.Helper()
	g := New(s, opts)
	_, err := replay.ReadRecords(context.Background(), bytes.NewReader(log), 0, func(recs []replay.Record) error {
		batch := make([]Input, len(recs))
		for i, r := range recs {
			batch[i] = Input{Request: r.Request, Allowed: r.Allowed, Time: r.Time, Review: r.Review}
		}
		g.Add(batch)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := g.Policies()
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// valid parses text, checks it as kcedar validate does, and returns its set.
func valid(t testing.TB, s *schemagen.Schema, texts ...[]byte) *cedarlang.PolicySet {
	t.Helper()
	checker, err := lint.NewChecker(s)
	if err != nil {
		t.Fatal(err)
	}
	var files []lint.File
	for i, text := range texts {
		files = append(files, lint.File{Name: "p" + string(rune('0'+i)) + ".cedar", Data: text})
	}
	res := checker.Check(files)
	if res.Errors() > 0 {
		for _, d := range res.Diagnostics {
			if d.Severity == lint.Error {
				t.Error(d)
			}
		}
		t.Fatalf("%d invalid policies", res.Errors())
	}
	set, err := cedarlang.NewPolicySet(res.Policies)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// replayWith replays the log with the set and returns the changes.
func replayWith(t testing.TB, s *schemagen.Schema, set *cedarlang.PolicySet, log []byte) (*replay.Summary, []replay.Change) {
	t.Helper()
	var changes []replay.Change
	r := replay.New(s, set, replay.Options{OnChange: func(c replay.Change) error { changes = append(changes, c); return nil }})
	if err := r.Read(context.Background(), "log", bytes.NewReader(log)); err != nil {
		t.Fatal(err)
	}
	return r.Summary(), changes
}

// checkReplay asserts what replaying the log with set shows: every allowed
// request of a non-system identity allowed, no forbidden request allowed;
// and the same request by request through the engine. It returns the
// allowed requests of the system identities (left out).
func checkReplay(t *testing.T, s *schemagen.Schema, set *cedarlang.PolicySet, log []byte) (allowed, forbidden, system int) {
	t.Helper()
	sum, changes := replayWith(t, s, set, log)
	for _, c := range changes {
		if c.Was == "forbid" {
			t.Errorf("replay: forbidden request newly allowed: %+v", c)
		}
	}
	e := engine.NewEngine(s, set, engine.EngineOptions{})
	var newlyDenied int
	for _, rec := range records(t, log) {
		sys := SystemClass(rec.Request.User) != ""
		got := e.Authorize(context.Background(), rec.Request).IsAllowed()
		switch {
		case !rec.Allowed && got:
			t.Errorf("forbidden request allowed: %s", rec.Request)
		case !rec.Allowed:
			forbidden++
		case sys:
			system++
			if !got {
				newlyDenied++
			}
		case !got:
			t.Errorf("allowed request not allowed: %s", rec.Request)
		default:
			allowed++
		}
	}
	if sum.NewlyDenied != newlyDenied || sum.NewlyAllowed != 0 {
		t.Errorf("replay: %d newly denied (want %d, the system identities' allowed requests), %d newly allowed", sum.NewlyDenied, newlyDenied, sum.NewlyAllowed)
	}
	return allowed, forbidden, system
}

// rbacAllows is the reference RBAC authorizer over o.
func rbacAllows(o *testgen.RBACObjects) func(*entities.Request) bool {
	return func(req *entities.Request) bool {
		ok, _ := o.Allows(req)
		return ok
	}
}

// TestGeneratedPoliciesReplayTheLog: over generated RBAC clusters and
// synthesized logs decided by the reference RBAC authorizer, the generated
// policies alone allow every allowed request but the system identities'
// and none of the forbidden ones, in every names mode and with group
// subjects.
func TestGeneratedPoliciesReplayTheLog(t *testing.T) {
	s := embeddedschema.Schema(t)
	modes := []Options{
		{Names: NamesAuto, MaxNames: 3},
		{Names: NamesAny},
		{Names: NamesExact},
		{Names: NamesAuto, MaxNames: 2, GroupSubjects: []string{"dev", "ops", "system:serviceaccounts:team-a"}},
	}
	for _, seed := range []uint64{1, 2, 3} {
		cluster := testgen.RBACConfig(seed, 40, 80)
		log := synthesize(t, seed, 4000, rbacAllows(cluster))
		for _, opts := range modes {
			res := generateFrom(t, s, opts, log)
			set := valid(t, s, res.Text)
			allowed, forbidden, system := checkReplay(t, s, set, log)
			t.Logf("seed %d, names %s, groups %v: %d policies; %d allowed, %d forbidden, %d of system identities; tightened: %+v",
				seed, opts.Names, opts.GroupSubjects, res.Count, allowed, forbidden, system, res.Outcome)
			if allowed < 200 || forbidden < 200 || system < 50 {
				t.Errorf("the log is too thin to prove anything: %d allowed, %d forbidden, %d system", allowed, forbidden, system)
			}
			if res.Outcome.Conflicting+res.Outcome.Withheld != 0 {
				t.Errorf("RBAC does not change during the log, yet %+v", res.Outcome)
			}
		}
	}
}

// TestOnlyWhatIsMissing: with half of the cluster's bindings converted as
// the existing policies, the union of existing and generated covers the
// log exactly as before, and no generated policy is needed only for
// requests the existing policies allow.
func TestOnlyWhatIsMissing(t *testing.T) {
	s := embeddedschema.Schema(t)
	for _, seed := range []uint64{4, 5} {
		cluster := testgen.RBACConfig(seed, 40, 80)
		log := synthesize(t, seed, 4000, rbacAllows(cluster))
		half := &rbacconvert.Input{Roles: cluster.Roles, ClusterRoles: cluster.ClusterRoles,
			RoleBindings: cluster.RoleBindings[:len(cluster.RoleBindings)/2], ClusterRoleBindings: cluster.ClusterRoleBindings[:len(cluster.ClusterRoleBindings)/2]}
		conv, err := rbacconvert.Convert(s, half)
		if err != nil {
			t.Fatal(err)
		}
		existing := valid(t, s, conv.Policies)
		res := generateFrom(t, s, Options{Existing: existing, Names: NamesAuto, MaxNames: 3}, log)
		union := valid(t, s, conv.Policies, res.Text)
		checkReplay(t, s, union, log)
		alreadyAllowed := checkNoRedundantPolicy(t, s, existing, res.Text, log)
		if res.Stats.AlreadyAllowed != alreadyAllowed || alreadyAllowed < 50 {
			t.Errorf("%d requests counted as allowed by the existing policies, %d are (want at least 50)", res.Stats.AlreadyAllowed, alreadyAllowed)
		}
		t.Logf("seed %d: %d existing policies, %d generated; %d allowed requests already allowed", seed, existing.Len(), res.Count, alreadyAllowed)
	}
}

// checkNoRedundantPolicy asserts that every generated policy allows some
// allowed request of the log that the existing policies do not, and
// returns how many allowed non-system requests the existing set allows.
func checkNoRedundantPolicy(t *testing.T, s *schemagen.Schema, existing *cedarlang.PolicySet, generated []byte, log []byte) int {
	t.Helper()
	ex := engine.NewEngine(s, existing, engine.EngineOptions{})
	var missing []*entities.Request
	already := 0
	for _, rec := range records(t, log) {
		if !rec.Allowed || SystemClass(rec.Request.User) != "" {
			continue
		}
		if ex.Authorize(context.Background(), rec.Request).IsAllowed() {
			already++
		} else {
			missing = append(missing, rec.Request)
		}
	}
	ps, err := cedarlang.ParsePolicies("generated.cedar", generated)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		one, err := cedarlang.NewPolicySet([]*cedarlang.Policy{p})
		if err != nil {
			t.Fatal(err)
		}
		e := engine.NewEngine(s, one, engine.EngineOptions{})
		needed := false
		for _, req := range missing {
			if e.Authorize(context.Background(), req).IsAllowed() {
				needed = true
				break
			}
		}
		if !needed {
			t.Errorf("policy %s allows only requests the existing policies allow", p.ID)
		}
	}
	return already
}

func TestHeaderCountsSystemIdentities(t *testing.T) {
	s := embeddedschema.Schema(t)
	log := synthesize(t, 9, 600, func(*entities.Request) bool { return true })
	res := generateFrom(t, s, Options{}, log)
	if !strings.Contains(string(res.Text), "//   "+SystemMasters+": not read") {
		t.Errorf("the output does not say system:masters members are left out:\n%.600s", res.Text)
	}
	for _, class := range []string{SystemControlPlane, SystemNodes, SystemKubeSystemSA} {
		if res.Stats.System[class] == 0 || !strings.Contains(string(res.Text), "//   "+class+": ") {
			t.Errorf("the output does not count %q:\n%.600s", class, res.Text)
		}
	}
	with := generateFrom(t, s, Options{IncludeSystem: true}, log)
	set := valid(t, s, with.Text)
	e := engine.NewEngine(s, set, engine.EngineOptions{})
	for _, rec := range records(t, log) {
		if !e.Authorize(context.Background(), rec.Request).IsAllowed() {
			t.Fatalf("with --include-system, %s is not allowed", rec.Request)
		}
	}
}
