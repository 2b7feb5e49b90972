package engine

import (
	"context"
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/entities"
)

// teamSet is issue 23's team-and-namespace shape: ~70% team permits, each
// pinning one of a fixed few hundred groups and its namespace, with
// multi-type `is` disjunctions (so one (group, namespace, verb, type) key
// holds more policies as n grows, and they are all satisfied); ServiceAccount
// permits pinning namespace and name; user permits; non-resource permits;
// forbids on secrets in kube-system.
func teamSet(n int) []string {
	rng := rand.New(rand.NewSource(23))
	var files []string
	var b strings.Builder
	for i := 0; i < n; i++ {
		if i > 0 && i%10000 == 0 {
			files = append(files, b.String())
			b.Reset()
		}
		team := rng.Intn(300)
		switch k := rng.Intn(10); {
		case k < 7:
			fmt.Fprintf(&b, "@id(\"team-%d\")\npermit(principal in k8s::Group::\"team-%d\", action in [k8s::Action::\"get\", k8s::Action::\"list\", k8s::Action::\"watch\"], resource)\nwhen { (resource is core::pods || resource is core::configmaps || resource is apps::deployments) && resource.namespace == \"ns-%d\" };\n", i, team, team)
		case k == 7:
			fmt.Fprintf(&b, "@id(\"sa-%d\")\npermit(principal == k8s::ServiceAccount::\"system:serviceaccount:ns-%d:sa-%d\", action == k8s::Action::\"get\", resource is core::secrets)\nwhen { resource.namespace == \"ns-%d\" && resource has name && resource.name == \"s-%d\" };\n", i, team, i, team, i)
		case k == 8:
			fmt.Fprintf(&b, "@id(\"user-%d\")\npermit(principal == k8s::User::\"user-%d\", action, resource is core::pods) when { resource.namespace == \"ns-%d\" };\n", i, i, team)
		default:
			fmt.Fprintf(&b, "@id(\"url-%d\")\npermit(principal in k8s::Group::\"team-%d\", action == k8s::Action::\"get\", resource is k8s::NonResourceURL) when { resource.path == \"/metrics/%d\" };\n", i, team, i)
		}
	}
	b.WriteString("@id(\"no-kube-system-secrets\")\nforbid(principal, action, resource is core::secrets) when { resource.namespace == \"kube-system\" };\n")
	return append(files, b.String())
}

func benchTeamSet(b *testing.B, n int) {
	var ps []*cedarlang.Policy
	for i, f := range teamSet(n) {
		part, err := cedarlang.ParsePolicies(fmt.Sprintf("team-%d.cedar", i), []byte(f))
		if err != nil {
			b.Fatal(err)
		}
		ps = append(ps, part...)
	}
	set, err := cedarlang.NewPolicySet(ps)
	if err != nil {
		b.Fatal(err)
	}
	e := NewEngine(embedded(b), set, NewCodec(RandomKeyring()), EngineOptions{})
	var reqs []*entities.Request
	for i := 0; i < 256; i++ {
		team := i % 300
		reqs = append(reqs, &entities.Request{User: entities.UserInfo{Name: fmt.Sprintf("u%d", i), Groups: []string{fmt.Sprintf("team-%d", team), "system:authenticated"}},
			Verb: "get", ResourceRequest: true, APIVersion: "v1", Resource: "pods", Namespace: fmt.Sprintf("ns-%d", team), Name: "p"})
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		e.Authorize(context.Background(), reqs[i%len(reqs)])
	}
}

// go test -run '^$' -bench TeamSet -benchtime 20000x ./internal/engine
func BenchmarkTeamSet1000(b *testing.B)   { benchTeamSet(b, 1000) }
func BenchmarkTeamSet10000(b *testing.B)  { benchTeamSet(b, 10000) }
func BenchmarkTeamSet100000(b *testing.B) { benchTeamSet(b, 100000) }
