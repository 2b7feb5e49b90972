package testgen

import (
	"fmt"
	"math/rand"

	"github.com/kcedar/kcedar/internal/entities"
)

// teams is the fixed number of teams (groups, each with its namespace) of
// TeamAndNamespace: as the set grows, each team's key holds more policies.
const teams = 300

// TeamAndNamespace is the team-and-namespace shape, n policies (one
// string each, in order): ~70% team permits, each pinning one of a fixed
// few hundred groups and its namespace, with multi-type `is` disjunctions
// (so one (group, namespace, verb, type) key holds more policies as n
// grows, and they are all satisfied); ServiceAccount permits pinning
// namespace and name; user permits; non-resource permits; and a forbid on
// secrets in kube-system.
func TeamAndNamespace(n int) []string {
	rng := rand.New(rand.NewSource(23))
	out := make([]string, 0, n+1)
	for i := 0; i < n; i++ {
		team := rng.Intn(teams)
		var p string
		switch k := rng.Intn(10); {
		case k < 7:
			p = fmt.Sprintf("@id(\"team-%d\")\npermit(principal in k8s::Group::\"team-%d\", action in [k8s::Action::\"get\", k8s::Action::\"list\", k8s::Action::\"watch\"], resource)\nwhen { (resource is core::pods || resource is core::configmaps || resource is apps::deployments) && resource.namespace == \"ns-%d\" };\n", i, team, team)
		case k == 7:
			p = fmt.Sprintf("@id(\"sa-%d\")\npermit(principal == k8s::ServiceAccount::\"system:serviceaccount:ns-%d:sa-%d\", action == k8s::Action::\"get\", resource is core::secrets)\nwhen { resource.namespace == \"ns-%d\" && resource has name && resource.name == \"s-%d\" };\n", i, team, i, team, i)
		case k == 8:
			p = fmt.Sprintf("@id(\"user-%d\")\npermit(principal == k8s::User::\"user-%d\", action, resource is core::pods) when { resource.namespace == \"ns-%d\" };\n", i, i, team)
		default:
			p = fmt.Sprintf("@id(\"url-%d\")\npermit(principal in k8s::Group::\"team-%d\", action == k8s::Action::\"get\", resource is k8s::NonResourceURL) when { resource.path == \"/metrics/%d\" };\n", i, team, i)
		}
		out = append(out, p)
	}
	return append(out, "@id(\"no-kube-system-secrets\")\nforbid(principal, action, resource is core::secrets) when { resource.namespace == \"kube-system\" };\n")
}

// TeamRequests are n requests of TeamAndNamespace's teams: a member of
// team-i gets a pod in ns-i, which the team's permits allow.
func TeamRequests(n int) []*entities.Request {
	out := make([]*entities.Request, 0, n)
	for i := 0; i < n; i++ {
		team := i % teams
		out = append(out, &entities.Request{User: entities.UserInfo{Name: fmt.Sprintf("u%d", i), Groups: []string{fmt.Sprintf("team-%d", team), "system:authenticated"}},
			Verb: "get", ResourceRequest: true, APIVersion: "v1", Resource: "pods", Namespace: fmt.Sprintf("ns-%d", team), Name: "p"})
	}
	return out
}
