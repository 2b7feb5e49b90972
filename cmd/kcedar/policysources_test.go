package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"sigs.k8s.io/yaml"

	"github.com/kcedar/kcedar/internal/accessreview"
	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/cedarlang/lint"
	"github.com/kcedar/kcedar/internal/cluster/policyobjects"
	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/entities"
)

// The vocabulary of the generated policy objects and requests.
var (
	genNamespaces = []string{"team-a", "team-b"}
	genPrincipals = []string{"principal", `principal == k8s::User::"alice"`, `principal in k8s::Group::"dev"`, "principal is k8s::ServiceAccount"}
	genActions    = []string{"action", `action == k8s::Action::"get"`, `action in [k8s::Action::"list", k8s::Action::"delete"]`}
	genResources  = []string{"resource", "resource is core::pods", "resource is core::secrets", "resource is core::namespaces", "resource is apps::deployments", "resource is k8s::Resource"}
	genConditions = []string{
		`resource has name && resource.name == "x"`,
		`resource has namespace && resource.namespace == "team-b"`, // reaches outside team-a
		`resource has namespace && resource.namespace != "team-a"`,
		`principal.username == "bob"`,
		`principal has namespace && resource has namespace && principal.namespace == resource.namespace`,
		"true",
	}
	genUsers = []entities.UserInfo{
		{Name: "alice", Groups: []string{"dev"}},
		{Name: "bob", Groups: []string{"ops"}},
		{Name: "erin"},
		{Name: "system:serviceaccount:team-a:sa", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:team-a"}},
	}
	genRequestNamespaces = []string{"", "team-a", "team-b", "default"}
	genVerbs             = []string{"get", "list", "create", "delete"}
	genTargets           = []struct{ group, resource string }{{"", "pods"}, {"", "secrets"}, {"", "configmaps"}, {"apps", "deployments"}, {"", "namespaces"}, {"", "nodes"}}
)

// genPolicy writes one policy: a permit, or a forbid when forbid is set.
func genPolicy(r *rand.Rand, id string, forbid bool) string {
	effect := "permit"
	if forbid {
		effect = "forbid"
	}
	text := fmt.Sprintf("@id(%q)\n%s(%s, %s, %s)", id, effect, genPrincipals[r.Intn(len(genPrincipals))], genActions[r.Intn(len(genActions))], genResources[r.Intn(len(genResources))])
	for n := r.Intn(3); n > 0; n-- {
		kw := "when"
		if r.Intn(4) == 0 {
			kw = "unless"
		}
		text += fmt.Sprintf(" %s { %s }", kw, genConditions[r.Intn(len(genConditions))])
	}
	return text + ";\n"
}

// genObjects draws a set of policy objects: NamespacedCedarPolicy objects
// with permits (some reaching outside their namespace), some that serve
// must refuse (a forbid, a syntax error), and a CedarPolicy or two.
func genObjects(r *rand.Rand) []*unstructured.Unstructured {
	var objs []*unstructured.Unstructured
	for i := 0; i < 1+r.Intn(4); i++ {
		var text strings.Builder
		for j := 0; j < 1+r.Intn(3); j++ {
			text.WriteString(genPolicy(r, fmt.Sprintf("p%d", j), false))
		}
		switch r.Intn(6) {
		case 0:
			text.WriteString(genPolicy(r, "f", true)) // refused: namespaced forbid
		case 1:
			text.WriteString("permit(principal, action, resource") // refused: syntax
		}
		objs = append(objs, genObject(policyobjects.KindNamespaced, genNamespaces[r.Intn(len(genNamespaces))], fmt.Sprintf("n%d", i), text.String()))
	}
	for i := 0; i < r.Intn(3); i++ {
		objs = append(objs, genObject(policyobjects.KindCluster, "", fmt.Sprintf("c%d", i), genPolicy(r, fmt.Sprintf("c%d", i), r.Intn(2) == 0)))
	}
	return objs
}

func genObject(kind, ns, name, content string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": policyobjects.GroupVersion.String(),
		"kind":       kind,
		"metadata":   map[string]any{"name": name},
		"spec":       map[string]any{"content": content},
	}}
	if ns != "" {
		u.SetNamespace(ns)
	}
	return u
}

// servedSet is the set kcedar serve loads from objs: its policy object
// Source (informers on a fake cluster) feeding serve's store. Also the
// objects whose status would say Accepted=False.
func servedSet(t *testing.T, checker *lint.Checker, objs []*unstructured.Unstructured) (*cedarlang.PolicySet, []string) {
	t.Helper()
	var ros []runtime.Object
	for _, u := range objs {
		ros = append(ros, u.DeepCopy())
	}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		policyobjects.ClusterResource:    policyobjects.KindCluster + "List",
		policyobjects.NamespacedResource: policyobjects.KindNamespaced + "List",
	}, ros...)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	st := newPolicyStore(checker, nil, quiet)
	synced := make(chan struct{})
	src := &policyobjects.Source{Store: st, Checker: policyobjects.NewCheckerFrom(checker), Client: client, Logger: quiet, OnSynced: func() { close(synced) }}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = src.Run(ctx) }()
	select {
	case <-synced:
	case <-time.After(10 * time.Second):
		t.Fatal("the policy object source did not sync")
	}
	var refused []string
	for _, s := range src.Statuses() {
		if s.Status.Conditions[0].Reason == "Invalid" {
			refused = append(refused, policyobjects.SourceName(s.Kind, s.Namespace, s.Name))
		}
	}
	return st.Current(), refused
}

// offlineSet is the set the offline tools load from objs written as
// kubectl get -o yaml writes them (a List, or documents), through
// --policy-objects.
func offlineSet(t *testing.T, checker *lint.Checker, objs []*unstructured.Unstructured, asList bool) (*cedarlang.PolicySet, []string) {
	t.Helper()
	var buf bytes.Buffer
	if asList {
		items := make([]any, len(objs))
		for i, u := range objs {
			items[i] = u.Object
		}
		data, err := yaml.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(data)
	} else {
		for _, u := range objs {
			data, err := yaml.Marshal(u.Object)
			if err != nil {
				t.Fatal(err)
			}
			buf.WriteString("---\n")
			buf.Write(data)
		}
	}
	file := filepath.Join(t.TempDir(), "objects.yaml")
	if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	o := policySourceOptions{objects: file}
	ps, err := o.policySet(context.Background(), io.Discard, checker, nil)
	if err != nil {
		return nil, nil
	}
	var refused []string
	for _, r := range o.refused {
		refused = append(refused, r.Object)
	}
	return ps, refused
}

// Offline equals served, as a property: for generated policy objects, the
// offline tools (--policy-objects) and kcedar serve's policy object source
// load the same policies, refuse the same objects, and give the same
// decisions, who-can and can-i answers over a universe of requests. A
// NamespacedCedarPolicy never allows outside its namespace.
func TestOfflinePolicyObjectsDecideAsServe(t *testing.T) {
	checker, err := loadChecker(context.Background(), schemaSource{})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewSource(25))
	sets := 60
	if testing.Short() {
		sets = 15
	}
	decisions, reviews, allowedInside, refused := 0, 0, 0, 0
	for i := 0; i < sets; i++ {
		objs := genObjects(r)
		served, servedRefused := servedSet(t, checker, objs)
		offline, offlineRefused := offlineSet(t, checker, objs, i%2 == 0)
		slices.Sort(servedRefused)
		slices.Sort(offlineRefused)
		if !slices.Equal(servedRefused, offlineRefused) {
			t.Fatalf("set %d: serve refuses %v, offline %v", i, servedRefused, offlineRefused)
		}
		refused += len(servedRefused)
		if (served == nil) != (offline == nil) {
			t.Fatalf("set %d: serve loads %v, offline %v", i, served != nil, offline != nil)
		}
		if served == nil {
			continue
		}
		if got, want := policyTexts(offline), policyTexts(served); got != want {
			t.Fatalf("set %d: offline policies\n%s\nserved\n%s", i, got, want)
		}
		sEngine := engine.NewEngine(checker.Schema, served, engine.EngineOptions{})
		oEngine := engine.NewEngine(checker.Schema, offline, engine.EngineOptions{})
		n, inside := compareDecisions(t, i, sEngine, oEngine)
		decisions += n
		allowedInside += inside
		reviews += compareReviews(t, i, r, sEngine, oEngine)
	}
	t.Logf("%d sets: %d objects refused; %d decisions, %d who-can and can-i answers compared; %d allowed by namespaced policies in their namespace", sets, refused, decisions, reviews, allowedInside)
	if allowedInside == 0 || refused == 0 {
		t.Error("no namespaced policy ever allowed, or none refused: the generator does not exercise them")
	}
}

// policyTexts lists a set's policy ids and texts, sorted.
func policyTexts(ps *cedarlang.PolicySet) string {
	var out []string
	for _, p := range ps.Policies {
		out = append(out, p.ID+" "+p.Source+": "+string(p.Text()))
	}
	slices.Sort(out)
	return strings.Join(out, "\n")
}

// compareDecisions decides the universe of requests with both engines; it
// returns how many, and how many namespaced policies allowed (checking they
// allow only in their namespace).
func compareDecisions(t *testing.T, set int, served, offline engine.Authorizer) (n, inside int) {
	ctx := context.Background()
	for _, u := range genUsers {
		for _, ns := range genRequestNamespaces {
			for _, verb := range genVerbs {
				for _, tg := range genTargets {
					for _, name := range []string{"", "x"} {
						req := &entities.Request{User: u, ResourceRequest: true, Verb: verb, APIGroup: tg.group, Resource: tg.resource, Namespace: ns, Name: name}
						want, got := served.Authorize(ctx, req), offline.Authorize(ctx, req)
						if want.Type() != got.Type() || want.Reason() != got.Reason() || want.EvaluationError() != got.EvaluationError() {
							t.Fatalf("set %d %s: served %v (%s), offline %v (%s)", set, req, want.Type(), want.Reason(), got.Type(), got.Reason())
						}
						n++
						if !got.IsAllowed() {
							continue
						}
						for _, p := range got.Policies() {
							if rest, ok := strings.CutPrefix(p.ID, policyobjects.KindNamespaced+"/"); ok {
								if !strings.HasPrefix(rest, ns+"/") || ns == "" {
									t.Fatalf("set %d %s: %s allows outside its namespace", set, req, p.ID)
								}
								inside++
							}
						}
					}
				}
			}
		}
	}
	return n, inside
}

// compareReviews asks both engines a few who-can and can-i questions and
// compares the answers as the endpoints and the CLI print them.
func compareReviews(t *testing.T, set int, r *rand.Rand, served, offline engine.RuleResolver) int {
	ctx := context.Background()
	n := 0
	for k := 0; k < 4; k++ {
		tg := genTargets[r.Intn(len(genTargets))]
		rar := &accessreview.ResourceAccessReview{APIVersion: accessreview.APIVersion, Kind: "ResourceAccessReview"}
		rar.AuthorizationAttributes.Verb = genVerbs[r.Intn(len(genVerbs))]
		rar.AuthorizationAttributes.ResourceGroup, rar.AuthorizationAttributes.Resource = tg.group, tg.resource
		rar.AuthorizationAttributes.Namespace = genRequestNamespaces[r.Intn(len(genRequestNamespaces))]
		want, err1 := accessreview.WhoCan(ctx, served, rar)
		got, err2 := accessreview.WhoCan(ctx, offline, rar)
		compareJSON(t, fmt.Sprintf("set %d who-can %+v", set, rar.AuthorizationAttributes), want, got, err1, err2)
		n++
	}
	for k := 0; k < 2; k++ {
		u := genUsers[r.Intn(len(genUsers))]
		srr := &accessreview.SubjectRulesReview{APIVersion: accessreview.APIVersion, Kind: "SubjectRulesReview",
			Spec: accessreview.SubjectRulesReviewSpec{User: u.Name, Groups: u.Groups, Namespace: genRequestNamespaces[r.Intn(len(genRequestNamespaces))]}}
		want, err1 := accessreview.WhatCan(ctx, served, srr)
		got, err2 := accessreview.WhatCan(ctx, offline, srr)
		compareJSON(t, fmt.Sprintf("set %d can-i %+v", set, srr.Spec), want, got, err1, err2)
		n++
	}
	return n
}

func compareJSON(t *testing.T, what string, want, got any, err1, err2 error) {
	t.Helper()
	if err1 != nil || err2 != nil {
		t.Fatalf("%s: %v, %v", what, err1, err2)
	}
	var w, g bytes.Buffer
	if err := writeJSON(&w, want); err != nil {
		t.Fatal(err)
	}
	if err := writeJSON(&g, got); err != nil {
		t.Fatal(err)
	}
	if w.String() != g.String() {
		t.Fatalf("%s: served\n%s\noffline\n%s", what, w.String(), g.String())
	}
}

// objectsYAML is the case: erin's NamespacedCedarPolicy in team-a,
// a namespaced forbid serve refuses, a cluster forbid for frank, and a
// document that is no policy object.
const objectsYAML = `apiVersion: v1
kind: List
items:
- apiVersion: kcedar.dev/v1alpha1
  kind: NamespacedCedarPolicy
  metadata: {name: team-read, namespace: team-a}
  spec:
    content: |
      @id("erin-reads-configmaps")
      permit(principal == k8s::User::"erin", action == k8s::Action::"get", resource is core::configmaps);
- apiVersion: kcedar.dev/v1alpha1
  kind: NamespacedCedarPolicy
  metadata: {name: sneaky, namespace: team-a}
  spec:
    content: forbid(principal, action, resource);
---
apiVersion: kcedar.dev/v1alpha1
kind: CedarPolicy
metadata: {name: no-secrets-for-frank}
spec:
  content: |
    @id("frank-no-secrets")
    forbid(principal == k8s::User::"frank", action, resource is core::secrets);
---
apiVersion: v1
kind: ConfigMap
metadata: {name: x}
`

// Every offline tool takes --policy-objects, confines namespaced objects as
// serve does and reports the objects it does not use.
func TestPolicyObjectsFlagOnEveryTool(t *testing.T) {
	dir := t.TempDir()
	objs := writeFile(t, dir, "objects.yaml", objectsYAML)
	refusedBoth := func(t *testing.T, out string) {
		t.Helper()
		if !strings.Contains(out, "NamespacedCedarPolicy/team-a/sneaky") || !strings.Contains(out, "may only permit") || !strings.Contains(out, "not a policy object") {
			t.Errorf("refusals not reported:\n%s", out)
		}
	}
	out, code := run(t, newWhoCanCmd(), "get", "configmaps", "-n", "default", "--policy-objects", objs)
	if code != 0 || strings.Contains(out, "erin") {
		t.Errorf("who-can in default: %d\n%s", code, out)
	}
	refusedBoth(t, out)
	if out, code := run(t, newWhoCanCmd(), "get", "configmaps", "-n", "team-a", "--policy-objects", objs); code != 0 || !strings.Contains(out, "NamespacedCedarPolicy/team-a/team-read/erin-reads-configmaps") {
		t.Errorf("who-can in team-a: %d\n%s", code, out)
	}
	if out, code := run(t, newCanICmd(), "--list", "--as", "erin", "-n", "default", "--policy-objects", objs); code != 0 || strings.Contains(out, "configmaps") {
		t.Errorf("can-i erin in default: %d\n%s", code, out)
	}
	if out, code := run(t, newCanICmd(), "--list", "--as", "frank", "--policy-objects", objs); code != 0 || !strings.Contains(out, "DENIED") || !strings.Contains(out, "frank-no-secrets") {
		t.Errorf("can-i frank: %d\n%s", code, out)
	}
	for ns, want := range map[string]string{"default": "decision: NoOpinion", "team-a": "decision: Allow"} {
		if out, code := run(t, newAuthorizeCmd(), "--user", "erin", "--verb", "get", "--resource", "configmaps", "-n", ns, "--name", "c", "--policy-objects", objs); code != 0 || !strings.Contains(out, want) {
			t.Errorf("authorize in %s: %d, want %s\n%s", ns, code, want, out)
		}
	}
	writeFile(t, dir, "erin_test.yaml", `policies: [extra.cedar]
tests:
- name: erin reads configmaps in team-a only
  request: {user: erin, verb: get, resource: configmaps, namespace: team-a, name: c}
  expect: Allow
- name: not in default
  request: {user: erin, verb: get, resource: configmaps, namespace: default, name: c}
  expect: NoOpinion
`)
	writeFile(t, dir, "extra.cedar", `@id("extra") permit(principal == k8s::User::"zed", action, resource is core::pods);`)
	if out, code := run(t, newTestCmd(), "--policy-objects", objs, filepath.Join(dir, "erin_test.yaml")); code != 0 || !strings.Contains(out, "2 passed, 0 failed") {
		t.Errorf("test: %d\n%s", code, out)
	}
	out, code = run(t, newValidateCmd(), "--policy-objects", objs, "-o", "json")
	if code != 1 || !strings.Contains(out, `"policyObjects": 2`) || !strings.Contains(out, `"refusedPolicyObjects"`) {
		t.Errorf("validate: %d\n%s", code, out)
	}
	refusedBoth(t, out)
	if out, code := run(t, newWhoCanCmd(), "get", "pods", "--policy-objects", "-", "--cluster"); code != 2 || !strings.Contains(out, "not both") {
		t.Errorf("--policy-objects with --cluster: %d\n%s", code, out)
	}
	if out, code := run(t, newAuthorizeCmd(), "-f", "-", "--policy-objects", "-"); code != 2 || !strings.Contains(out, "stdin") {
		t.Errorf("two stdins: %d\n%s", code, out)
	}
}

// A duplicate id across cluster objects fails the set offline, as serve
// refuses to load it.
func TestPolicyObjectsSetErrors(t *testing.T) {
	dir := t.TempDir()
	objs := writeFile(t, dir, "objects.yaml", `apiVersion: kcedar.dev/v1alpha1
kind: CedarPolicy
metadata: {name: a}
spec: {content: '@id("same") permit(principal, action, resource is core::pods);'}
---
apiVersion: kcedar.dev/v1alpha1
kind: CedarPolicy
metadata: {name: b}
spec: {content: '@id("same") permit(principal, action, resource is core::pods);'}
`)
	if out, code := run(t, newWhoCanCmd(), "get", "pods", "--policy-objects", objs); code != 1 || !strings.Contains(out, "same") {
		t.Errorf("who-can: %d\n%s", code, out)
	}
	if out, code := run(t, newValidateCmd(), "--policy-objects", objs); code != 1 || !strings.Contains(out, "do not load as one set") {
		t.Errorf("validate: %d\n%s", code, out)
	}
}

// --cluster lists the objects through the kubeconfig's connection
// (--kubeconfig here; the schema from --schema), as serve's informers see
// them.
func TestPolicyObjectsFromCluster(t *testing.T) {
	lists := map[string]string{
		"/apis/kcedar.dev/v1alpha1/cedarpolicies": `{"apiVersion":"kcedar.dev/v1alpha1","kind":"CedarPolicyList","metadata":{},"items":[]}`,
		"/apis/kcedar.dev/v1alpha1/namespacedcedarpolicies": `{"apiVersion":"kcedar.dev/v1alpha1","kind":"NamespacedCedarPolicyList","metadata":{},"items":[
 {"apiVersion":"kcedar.dev/v1alpha1","kind":"NamespacedCedarPolicy","metadata":{"name":"team-read","namespace":"team-a"},
  "spec":{"content":"@id(\"erin\") permit(principal == k8s::User::\"erin\", action == k8s::Action::\"get\", resource is core::configmaps);"}}]}`,
	}
	// No RBAC: who-can reads the cluster's to answer for kcedar, then RBAC.
	for _, kind := range []string{"Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"} {
		lists["/apis/rbac.authorization.k8s.io/v1/"+strings.ToLower(kind)+"s"] = `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"` + kind + `List","metadata":{},"items":[]}`
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := lists[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, body)
	}))
	defer srv.Close()
	dir := t.TempDir()
	kubeconfig := writeFile(t, dir, "kubeconfig", fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, srv.URL))
	out, code := run(t, newSchemaExportCmd())
	if code != 0 {
		t.Fatalf("schema export: %d", code)
	}
	schemaFile := writeFile(t, dir, "schema.cedar", out)
	for ns, want := range map[string]bool{"team-a": true, "default": false} {
		out, code := run(t, newWhoCanCmd(), "get", "configmaps", "-n", ns, "--cluster", "--kubeconfig", kubeconfig, "--schema", schemaFile)
		if code != 0 || strings.Contains(out, "NamespacedCedarPolicy/team-a/team-read/erin") != want {
			t.Errorf("who-can in %s: %d\n%s", ns, code, out)
		}
	}
}

// writeJSONRefusals appends refusedPolicyObjects to the document, keeping
// it valid JSON in the command's order, and changes nothing without them.
func TestWriteJSONRefusals(t *testing.T) {
	refused := []policyobjects.Refusal{{Object: "CedarPolicy/a", Reason: "x < y\nz"}}
	for _, v := range []any{map[string]any{}, struct {
		B string `json:"b"`
		A int    `json:"a"`
	}{"<&>", 1}} {
		var buf bytes.Buffer
		if err := writeJSONRefusals(&buf, v, refused); err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
			t.Fatalf("%v\n%s", err, buf.String())
		}
		if _, ok := got["refusedPolicyObjects"]; !ok || strings.Index(buf.String(), `"b"`) > strings.Index(buf.String(), `"a"`) {
			t.Errorf("%s", buf.String())
		}
	}
	var plain, with bytes.Buffer
	_ = writeJSON(&plain, map[string]int{"a": 1})
	_ = writeJSONRefusals(&with, map[string]int{"a": 1}, nil)
	if plain.String() != with.String() {
		t.Errorf("without refusals: %q, want %q", with.String(), plain.String())
	}
}
