package generate

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"

	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/tools/replay"
)

// A synthesized audit log: realistic request shapes (named reads and
// writes, lists and watches in a namespace and across all, creates,
// subresources, resources the schema does not type, non-resource URLs),
// by users, ServiceAccounts, nodes, system:masters members and the control
// plane, each decided by a given authorizer.

// logResource is a resource the synthesized traffic uses.
type logResource struct {
	group, version, resource string
	namespaced               bool
	// verbs are the verbs used on it; subs its subresources with theirs.
	verbs []string
	subs  map[string][]string
}

var (
	allVerbs     = []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}
	logResources = []logResource{
		{"", "v1", "pods", true, allVerbs, map[string][]string{"exec": {"create", "get"}, "log": {"get"}, "status": {"get", "patch"}, "eviction": {"create"}}},
		{"", "v1", "secrets", true, allVerbs, nil},
		{"", "v1", "configmaps", true, allVerbs, nil},
		{"", "v1", "services", true, []string{"get", "list", "create"}, map[string][]string{"proxy": {"get"}}},
		{"", "v1", "serviceaccounts", true, []string{"get", "list"}, map[string][]string{"token": {"create"}}},
		{"", "v1", "namespaces", false, []string{"get", "list", "watch", "create", "delete"}, nil},
		{"", "v1", "nodes", false, []string{"get", "list", "watch", "patch"}, map[string][]string{"proxy": {"get"}}},
		{"apps", "v1", "deployments", true, allVerbs, map[string][]string{"scale": {"get", "update", "patch"}}},
		{"batch", "v1", "jobs", true, []string{"get", "list", "create", "delete"}, map[string][]string{"status": {"get"}}},
		{"rbac.authorization.k8s.io", "v1", "roles", true, []string{"get", "list", "create"}, nil},
		{"rbac.authorization.k8s.io", "v1", "clusterroles", false, []string{"get", "list"}, nil},
		{"example.com", "v1", "widgets", true, []string{"get", "list", "create", "update"}, map[string][]string{"status": {"get"}}},
		{"example.com", "v1", "gadgets", false, []string{"get", "list"}, nil},
	}
	logPaths     = []string{"/healthz", "/healthz/etcd", "/livez", "/readyz", "/version", "/metrics", "/logs/kube.log", "/openapi/v3", "/custom/thing"}
	logNames     = []string{"web", "db", "cfg", "n1", "alice", "team-a", "x1", "x2", "x3", "x4", "x5", "x6", "x7", "x8"}
	logNamespace = []string{"team-a", "team-b", "team-c", "other"}
)

// logUsers are who makes the requests: people with some of the groups
// generated RBAC binds, ServiceAccounts, and system identities.
func logUsers(r *rand.Rand) []authnv1.UserInfo {
	var users []authnv1.UserInfo
	for _, name := range []string{"alice", "bob", "carol", "dave", "erin", "frank"} {
		u := authnv1.UserInfo{Username: name, UID: name + "-uid"}
		for _, g := range []string{"dev", "ops", "qa", "auditors"} {
			if r.IntN(3) == 0 {
				u.Groups = append(u.Groups, g)
			}
		}
		users = append(users, withAuthenticated(u))
	}
	for _, sa := range [][2]string{{"team-a", "builder"}, {"team-b", "deployer"}, {"team-c", "default"}, {"team-a", "ci"}} {
		users = append(users, withAuthenticated(authnv1.UserInfo{Username: "system:serviceaccount:" + sa[0] + ":" + sa[1],
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + sa[0]}}))
	}
	return append(users,
		withAuthenticated(authnv1.UserInfo{Username: "system:node:n1", Groups: []string{"system:nodes"}}),
		withAuthenticated(authnv1.UserInfo{Username: "root", Groups: []string{"system:masters"}}),
		withAuthenticated(authnv1.UserInfo{Username: "system:kube-scheduler"}),
		withAuthenticated(authnv1.UserInfo{Username: "system:serviceaccount:kube-system:replicaset-controller",
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:kube-system"}}),
	)
}

func withAuthenticated(u authnv1.UserInfo) authnv1.UserInfo {
	u.Groups = append(u.Groups, "system:authenticated")
	return u
}

// drawRequest is a verb and requestURI of a realistic shape.
func drawRequest(r *rand.Rand) (verb, uri string) {
	if r.IntN(8) == 0 {
		verb = []string{"get", "get", "get", "post"}[r.IntN(4)]
		return verb, logPaths[r.IntN(len(logPaths))]
	}
	res := logResources[r.IntN(len(logResources))]
	base := "/api/" + res.version
	if res.group != "" {
		base = "/apis/" + res.group + "/" + res.version
	}
	all := base + "/" + res.resource // across all namespaces
	if res.namespaced {
		base += "/namespaces/" + logNamespace[r.IntN(len(logNamespace))]
	}
	coll := base + "/" + res.resource
	name := logNames[r.IntN(len(logNames))]
	if len(res.subs) > 0 && r.IntN(3) == 0 {
		subs := slices.Sorted(maps.Keys(res.subs))
		sub := subs[r.IntN(len(subs))]
		verbs := res.subs[sub]
		return verbs[r.IntN(len(verbs))], coll + "/" + name + "/" + sub
	}
	switch verb = res.verbs[r.IntN(len(res.verbs))]; verb {
	case "list":
		if r.IntN(4) == 0 {
			coll = all
		}
		return verb, coll + "?limit=500"
	case "watch":
		if r.IntN(4) == 0 {
			coll = all
		}
		return verb, coll + "?watch=true&resourceVersion=1"
	case "create":
		return verb, coll + "?fieldManager=kubectl-client-side-apply"
	case "deletecollection":
		return verb, coll
	}
	return verb, coll + "/" + name
}

// auditLine is one ResponseComplete, Metadata-level event.
func auditLine(t testing.TB, i int, verb, uri string, u authnv1.UserInfo, decision string) []byte {
	t.Helper()
	ts := metav1.NewMicroTime(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Second))
	ev := &auditv1.Event{
		TypeMeta: metav1.TypeMeta{Kind: "Event", APIVersion: "audit.k8s.io/v1"},
		Level:    auditv1.LevelMetadata, AuditID: types.UID("id-" + strconv.Itoa(i)), Stage: auditv1.StageResponseComplete,
		RequestURI: uri, Verb: verb, User: u, SourceIPs: []string{"10.0.0.7"}, UserAgent: "kubectl/v1.37.1 (linux/amd64)",
		ResponseStatus: &metav1.Status{Code: 200}, RequestReceivedTimestamp: ts, StageTimestamp: ts,
		Annotations: map[string]string{"authorization.k8s.io/decision": decision, "authorization.k8s.io/reason": ""},
	}
	data, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return append(data, '\n')
}

// rebuilt is the request replay rebuilds from one line.
func rebuilt(t testing.TB, line []byte) *entities.Request {
	t.Helper()
	var got *entities.Request
	_, err := replay.ReadRecords(context.Background(), bytes.NewReader(line), 8192, func(recs []replay.Record) error {
		if len(recs) == 1 {
			got = recs[0].Request
		}
		return nil
	})
	if err != nil || got == nil {
		t.Fatalf("%s: not rebuilt (%v)", line, err)
	}
	return got
}

// synthesize writes n events of the users' traffic, each decided by
// allows (system:masters members are always allowed, as kube-apiserver's
// privileged group authorizer allows them).
func synthesize(t testing.TB, seed uint64, n int, allows func(*entities.Request) bool) []byte {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 7))
	users := logUsers(r)
	var log bytes.Buffer
	for i := range n {
		u := users[r.IntN(len(users))]
		verb, uri := drawRequest(r)
		// system:masters members are allowed, and left out by the reader.
		decision := "allow"
		if !slices.Contains(u.Groups, "system:masters") && !allows(rebuilt(t, auditLine(t, i, verb, uri, u, "allow"))) {
			decision = "forbid"
		}
		log.Write(auditLine(t, i, verb, uri, u, decision))
	}
	return log.Bytes()
}
