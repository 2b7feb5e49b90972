package generate

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	authnv1 "k8s.io/api/authentication/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apiserver/pkg/storage/names"

	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/testing/embeddedschema"
)

// templateHash is a pod-template hash as the Deployment controller
// computes it (k8s.io/kubernetes pkg/controller.ComputeHash: a uint32
// written in decimal, SafeEncodeString'd).
func templateHash(r *rand.Rand) string { return utilrand.SafeEncodeString(fmt.Sprint(r.Uint32())) }

// deploymentNames are realistic Deployment and generateName bases.
var deploymentNames = []string{"web", "api-server", "coredns", "payments-api", "nginx-ingress-controller", "build", "x"}

// TestGeneratedNamesAreRecognized: names made by kube-apiserver's own
// name generator and by the Deployment controller's hash are generalized
// to their base, whenever their generated part holds a digit (else it
// could be a word: such a name is absorbed by its siblings' pattern).
func TestGeneratedNamesAreRecognized(t *testing.T) {
	r := rand.New(rand.NewPCG(44, 1))
	recognized := 0
	for range 3000 {
		base := deploymentNames[r.IntN(len(deploymentNames))]
		hash := templateHash(r)
		hashed := generated(hash, templateHashAlphabet, minTemplateHashLen, maxTemplateHashLen)
		generateName := names.SimpleNameGenerator.GenerateName(base + "-")
		for _, c := range []struct {
			name string
			want []string
			ok   bool // must be recognized
		}{
			{generateName, []string{base + "-", ""}, strings.ContainsAny(generateName[len(base)+1:], "0123456789")},
			{base + "-" + hash, []string{base + "-", ""}, hashed},
			{names.SimpleNameGenerator.GenerateName(base + "-" + hash + "-"), []string{base + "-", "-", ""}, hashed},
		} {
			got, ok := generalizeName(c.name, "alice", false)
			switch {
			case c.ok && (!ok || !slices.Equal(got.literals, c.want)):
				t.Errorf("%q: generalized %v %q, want %q", c.name, ok, got.literals, c.want)
			case ok && !got.matches(c.name):
				t.Errorf("%q: its pattern %q does not match it", c.name, got.text())
			case ok && !strings.HasPrefix(got.literals[0], base+"-"):
				t.Errorf("%q: generalized to %q, which does not keep its base", c.name, got.text())
			case c.ok:
				recognized++
			}
		}
	}
	if recognized < 6000 {
		t.Errorf("only %d of 9000 generated names recognized", recognized)
	}
}

// Names that are not generated stay as requested: words, names with a
// number, a 5-letter word after a dash, names Kubernetes would refuse.
func TestOrdinaryNamesStay(t *testing.T) {
	for _, name := range []string{"web", "db", "nginx-proxy", "web-https", "kube-root-ca.crt", "default-token", "cm-a", "x1", "team-a",
		"build-bcdfg", "web-0", "web-1", "Build-X7K2P", "build-x7k2p\n", "build-*7k2p", "-x7k2p", "alice", "v1.2.3",
		"sha256-4fb8c7d9e0", "x7k2p"} {
		if p, ok := generalizeName(name, "bob", true); ok {
			t.Errorf("%q generalized to %q", name, p.text())
		}
	}
}

// A name holding the requesting member's username is generalized in a
// group's grant only, around whole segments of the name.
func TestUsernameNames(t *testing.T) {
	for _, c := range []struct {
		name, user string
		group      bool
		want       string
	}{
		{"alice-workspace", "alice", true, "*-workspace"},
		{"workspace-alice", "alice", true, "workspace-*"},
		{"jupyter-alice.home", "alice", true, "jupyter-*.home"},
		{"alice-workspace", "Alice", true, "*-workspace"},
		{"alice-workspace", "alice@example.com", true, "*-workspace"},
		{"robot-cache", "system:serviceaccount:team:robot", true, "*-cache"},
		{"alice-workspace", "alice", false, ""},
		{"alice", "alice", true, ""},
		{"malice-workspace", "alice", true, ""},
		{"alicex-workspace", "alice", true, ""},
		{"al-workspace", "al", true, ""},
		{"bob-alice", "alice", true, "bob-*"},
	} {
		p, ok := generalizeName(c.name, c.user, c.group)
		if got := map[bool]string{true: p.text()}[ok]; got != c.want {
			t.Errorf("%q by %q (group %v): %q, want %q", c.name, c.user, c.group, got, c.want)
		}
	}
}

// namePattern.matches agrees with Cedar's like on the same pattern.
func TestPatternMatchesAsCedarLike(t *testing.T) {
	r := rand.New(rand.NewPCG(44, 2))
	word := func() string {
		var b strings.Builder
		for range r.IntN(4) {
			b.WriteByte("ab-"[r.IntN(3)])
		}
		return b.String()
	}
	for range 20000 {
		lits := make([]string, 1+r.IntN(4))
		for i := range lits {
			lits[i] = word()
		}
		var parts []any
		for i, l := range lits {
			if i > 0 {
				parts = append(parts, types.Wildcard{})
			}
			parts = append(parts, types.String(l))
		}
		s := word() + word()
		if got, want := (namePattern{literals: lits}).matches(s), types.NewPattern(parts...).Match(types.String(s)); got != want {
			t.Fatalf("%q matches %q: %v, Cedar says %v", strings.Join(lits, "*"), s, got, want)
		}
	}
}

// podURI is a namespaced core or apps URI of a named object.
func podURI(ns, resource, name, sub string) string {
	base := "/api/v1/namespaces/" + ns + "/"
	if resource == "replicasets" {
		base = "/apis/apps/v1/namespaces/" + ns + "/"
	}
	uri := base + resource + "/" + name
	if sub != "" {
		uri += "/" + sub
	}
	return uri
}

// churnLog is the traffic of a cluster whose pods come and go: users read
// and delete generated pods, ReplicaSets and per-user ConfigMaps in two
// namespaces; they are forbidden the Secrets, and bob deletes in ns-b.
func churnLog(t *testing.T, seed uint64) []byte {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 3))
	users := []authnv1.UserInfo{person("alice", "dev"), person("bob", "dev"), person("carol", "dev", "ops")}
	var reqs []logged
	for range 600 {
		u := users[r.IntN(len(users))]
		ns := []string{"ns-a", "ns-b"}[r.IntN(2)]
		base := deploymentNames[r.IntN(4)]
		var uri, verb string
		switch r.IntN(6) {
		case 0:
			verb, uri = "get", podURI(ns, "pods", names.SimpleNameGenerator.GenerateName(base+"-"+templateHash(r)+"-"), "log")
		case 1:
			verb, uri = "delete", podURI(ns, "pods", names.SimpleNameGenerator.GenerateName(base+"-"), "")
		case 2:
			verb, uri = "get", podURI(ns, "replicasets", base+"-"+templateHash(r), "")
		case 3:
			verb, uri = "get", podURI(ns, "configmaps", u.Username+"-workspace", "")
		case 4:
			verb, uri = "get", podURI(ns, "secrets", names.SimpleNameGenerator.GenerateName("token-"), "")
		default:
			verb, uri = "get", podURI(ns, "configmaps", []string{"settings", "web-https", "db"}[r.IntN(3)], "")
		}
		// Secrets are forbidden, and bob's deletes in ns-b.
		decision := "allow"
		if strings.Contains(uri, "/secrets/") || (u.Username == "bob" && verb == "delete" && ns == "ns-b") {
			decision = "forbid"
		}
		reqs = append(reqs, logged{u, verb, uri, decision})
	}
	return logOf(t, reqs...)
}

// TestGeneralizedNamesStayInTheirNamespace: over logs of generated names,
// in every mode, the policies allow every allowed request and no
// forbidden one; a request they allow in a namespace is of a verb and
// resource some allowed request used there (names widen, namespaces
// never); and fresh names of the same generators are allowed where the
// names were generalized.
func TestGeneralizedNamesStayInTheirNamespace(t *testing.T) {
	s := embeddedschema.Schema(t)
	for _, seed := range []uint64{1, 2} {
		log := churnLog(t, seed)
		for _, opts := range []Options{{}, {GroupSubjects: []string{"dev"}}, {Names: NamesExact}, {Names: NamesExact, GroupSubjects: []string{"dev"}},
			{Names: NamesExact, Generalize: GeneralizeNone}} {
			res := checkExact(t, opts, log)
			gen := decider(t, s, res.Text)
			used := map[string]bool{}
			recs := records(t, log)
			for _, rec := range recs {
				if rec.Allowed {
					used[rec.Request.Verb+" "+rec.Request.Resource+" "+rec.Request.Namespace] = true
				}
			}
			fresh := 0
			for _, rec := range recs {
				probe := *rec.Request
				for _, ns := range []string{"ns-a", "ns-b", "ns-c"} {
					probe.Namespace = ns
					if gen.Authorize(context.Background(), &probe).IsAllowed() && !used[probe.Verb+" "+probe.Resource+" "+ns] {
						t.Errorf("seed %d, %+v: %s allowed in a namespace no allowed %s of %s was in", seed, opts, &probe, probe.Verb, probe.Resource)
					}
				}
				probe.Namespace, probe.Name = rec.Request.Namespace, regenerate(rec.Request.Name)
				if probe.Name != rec.Request.Name && gen.Authorize(context.Background(), &probe).IsAllowed() {
					fresh++
				}
			}
			// With exact names, fresh names are allowed only by patterns.
			freshOK := opts.Names != NamesExact || (opts.Generalize == GeneralizeNone) == (fresh == 0)
			if (res.Outcome.Generalized > 0) != (opts.Generalize != GeneralizeNone) || !freshOK || (opts.Generalize != GeneralizeNone && fresh < 50) {
				t.Errorf("seed %d, %+v: %d grants generalized, %d fresh names allowed:\n%.3000s", seed, opts, res.Outcome.Generalized, fresh, res.Text)
			}
			t.Logf("seed %d, %+v: %d policies, %d fresh names allowed, %+v", seed, opts, res.Count, fresh, res.Outcome)
		}
	}
}

// regenerate is name with its generated suffix made anew ("" unchanged
// when it has none).
func regenerate(name string) string {
	if _, ok := cutGeneratedSuffix(name); !ok {
		return name
	}
	return names.SimpleNameGenerator.GenerateName(name[:len(name)-generatedSuffixLen])
}

// Where a pattern would allow a forbidden request, the names stay as
// requested; a group's member names become a pattern that a new member's
// own name matches, and the comment says so.
func TestGeneralizationIsTightenedAndShown(t *testing.T) {
	alice, bob := person("alice", "dev"), person("bob", "dev")
	res := checkExact(t, Options{}, logOf(t,
		logged{alice, "get", podURI("ci", "pods", "build-x7k2p", "log"), "allow"},
		logged{alice, "get", podURI("ci", "pods", "build-q9z4m", "log"), "allow"},
		logged{alice, "get", podURI("ci", "pods", "build-zz9zz", "log"), "forbid"},
	))
	if res.Outcome.KeptLiteral != 1 || res.Outcome.Generalized != 0 || strings.Contains(string(res.Text), "build-*") {
		t.Errorf("want the names kept as requested: %+v\n%s", res.Outcome, res.Text)
	}
	res = checkExact(t, Options{GroupSubjects: []string{"dev"}}, logOf(t,
		logged{alice, "get", podURI("team", "configmaps", "alice-workspace", ""), "allow"},
		logged{bob, "get", podURI("team", "configmaps", "bob-workspace", ""), "allow"},
		logged{bob, "get", podURI("team", "configmaps", "settings", ""), "allow"},
	))
	if !strings.Contains(string(res.Text), `resource.name == "settings" || resource.name like "*-workspace"`) {
		t.Errorf("want the workspaces as one pattern:\n%s", res.Text)
	}
	if !strings.Contains(string(res.Text), "// names generalized (--generalize-names=none keeps them as requested): *-workspace (the member's username, e.g. alice-workspace)") {
		t.Errorf("the comment does not show the generalization:\n%s", res.Text)
	}
	gen := decider(t, embeddedschema.Schema(t), res.Text)
	carol := &entities.Request{User: entities.UserInfo{Name: "carol", Groups: []string{"dev", "system:authenticated"}}, Verb: "get",
		ResourceRequest: true, APIVersion: "v1", Resource: "configmaps", Namespace: "team", Name: "carol-workspace"}
	if !gen.Authorize(context.Background(), carol).IsAllowed() {
		t.Errorf("a new member's workspace is not allowed:\n%s", res.Text)
	}
	carol.Namespace = "other"
	if gen.Authorize(context.Background(), carol).IsAllowed() {
		t.Errorf("the pattern reaches another namespace:\n%s", res.Text)
	}
}
