package entities

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	cedarlib "github.com/cedar-policy/cedar-go"
	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/testing/oracle"
	"github.com/kcedar/kcedar/internal/testing/schematest"
)

func TestPrincipalEntity(t *testing.T) {
	get := func(e types.Entity, attr string) types.Value {
		v, _ := e.Attributes.Get(types.String(attr))
		return v
	}
	sa := PrincipalEntity(UserInfo{Name: "system:serviceaccount:team-a:builder", UID: "u-1", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:team-a", "system:serviceaccounts"}})
	if sa.UID != types.NewEntityUID(schemagen.ServiceAccountType, "system:serviceaccount:team-a:builder") {
		t.Fatalf("uid %s", sa.UID)
	}
	for attr, want := range map[string]types.Value{
		"username":  types.String("system:serviceaccount:team-a:builder"),
		"uid":       types.String("u-1"),
		"namespace": types.String("team-a"),
		"name":      types.String("builder"),
		"groups":    types.NewSet(types.String("system:serviceaccounts"), types.String("system:serviceaccounts:team-a")),
	} {
		if got := get(sa, attr); got == nil || !got.Equal(want) {
			t.Errorf("service account %s = %v, want %v", attr, got, want)
		}
	}
	if sa.Parents.Len() != 2 || !sa.Parents.Contains(types.NewEntityUID(schemagen.GroupType, "system:serviceaccounts:team-a")) {
		t.Errorf("parents %v", sa.Parents)
	}
	if sa.Tags.Len() != 0 {
		t.Errorf("tags without extra: %v", sa.Tags)
	}

	node := PrincipalEntity(UserInfo{Name: "system:node:n1", Groups: []string{"system:nodes"}})
	if node.UID.Type != schemagen.NodeType || !get(node, "name").Equal(types.String("n1")) || get(node, "namespace") != nil || get(node, "uid") != nil {
		t.Errorf("node %v", node)
	}

	anon := PrincipalEntity(UserInfo{Name: "system:anonymous", Groups: []string{"system:unauthenticated"}})
	if anon.UID.Type != schemagen.UserType || get(anon, "name") != nil || get(anon, "namespace") != nil || get(anon, "uid") != nil {
		t.Errorf("anonymous %v", anon)
	}
	// A malformed service account name is a plain user: no namespace/name.
	bad := PrincipalEntity(UserInfo{Name: "system:serviceaccount:ns:a:b"})
	if bad.UID.Type != schemagen.UserType || get(bad, "namespace") != nil || !get(bad, "groups").Equal(types.NewSet()) || bad.Parents.Len() != 0 {
		t.Errorf("malformed service account %v", bad)
	}

	alice := PrincipalEntity(UserInfo{Name: "alice", Groups: []string{"dev"}, Extra: map[string][]string{
		"scopes": {"read", "write"}, "authentication.kubernetes.io/credential-id": {"JTI=1"}, "empty": {},
	}})
	for k, want := range map[string]types.Value{
		"scopes": types.NewSet(types.String("read"), types.String("write")),
		"authentication.kubernetes.io/credential-id": types.NewSet(types.String("JTI=1")),
		"empty": types.NewSet(),
	} {
		if got, ok := alice.Tags.Get(types.String(k)); !ok || !got.Equal(want) {
			t.Errorf("tag %s = %v, want %v", k, got, want)
		}
	}

	// The contract, end to end: groups as parents and as a set, extra as tags.
	ents := &Entities{Principal: alice, Resource: types.Entity{UID: types.NewEntityUID("core::pods", "")}}
	ps := parseWithIDs(t, `
@id("in-group") permit(principal in k8s::Group::"dev", action, resource);
@id("groups-set") permit(principal, action, resource) when { principal.groups.contains("dev") };
@id("tag") permit(principal, action, resource) when { principal.hasTag("scopes") && principal.getTag("scopes").contains("write") };
@id("any-verb") permit(principal, action in k8s::Action::"*", resource);
@id("not-in-other") permit(principal in k8s::Group::"other", action, resource);
@id("no-tag") permit(principal, action, resource) when { principal.hasTag("nope") };
`)
	res := oracle.Evaluate(ps, ents, alice.UID, schemagen.ActionUID("frob"), ents.Resource.UID)
	if res.Decision != "Allow" || strings.Join(res.Policies, ",") != "any-verb,groups-set,in-group,tag" || len(res.Errors) != 0 {
		t.Fatalf("got %v %v %v", res.Decision, res.Policies, res.Errors)
	}
}

func TestEntitiesGet(t *testing.T) {
	p := PrincipalEntity(UserInfo{Name: "alice", Groups: []string{"dev"}})
	r := types.Entity{UID: types.NewEntityUID("core::pods", ""), Attributes: types.NewRecord(types.RecordMap{"name": types.String("x")})}
	m := types.NewEntityUID("k8s::StringMap", "sha256:0")
	e := &Entities{Principal: p, Resource: r, Maps: map[types.EntityUID]types.Entity{m: {UID: m}}}
	if got, ok := e.Get(p.UID); !ok || got.UID != p.UID || got.Parents.Len() != 1 {
		t.Error("principal")
	}
	if got, ok := e.Get(r.UID); !ok || got.Attributes.Len() != 1 {
		t.Error("resource")
	}
	if got, ok := e.Get(types.NewEntityUID(schemagen.GroupType, "anything")); !ok || got.Parents.Len() != 0 {
		t.Error("groups exist, without parents")
	}
	if got, ok := e.Get(schemagen.ActionUID("get")); !ok || !got.Parents.Contains(schemagen.AllVerbsAction) {
		t.Error("verb actions are in k8s::Action::\"*\"")
	}
	if got, ok := e.Get(schemagen.AllVerbsAction); !ok || got.Parents.Len() != 0 {
		t.Error("k8s::Action::\"*\" has no parents")
	}
	if _, ok := e.Get(m); !ok {
		t.Error("map entity")
	}
	if _, ok := e.Get(types.NewEntityUID(schemagen.UserType, "bob")); ok {
		t.Error("another user exists")
	}
	if _, ok := (&Entities{Principal: p}).Get(types.EntityUID{}); ok {
		t.Error("the zero uid exists when no resource is set")
	}
}

const podJSON = `{
  "apiVersion": "v1",
  "kind": "Pod",
  "metadata": {
    "name": "web-1",
    "namespace": "team-a",
    "uid": "d3b07384-d113-4ec4-8d6b-000000000001",
    "labels": {"app": "web", "tier": "frontend"},
    "annotations": {"note": "x"},
    "creationTimestamp": "2024-05-01T10:00:00Z",
    "generation": 3,
    "finalizers": ["a", "b"],
    "managedFields": [{"manager": "kubectl"}]
  },
  "spec": {
    "nodeName": "n1",
    "serviceAccountName": "builder",
    "priority": "high",
    "nodeSelector": {"tier": "frontend", "app": "web"},
    "containers": [
      {
        "name": "app",
        "image": "nginx:1.27",
        "resources": {"limits": {"cpu": 2, "memory": "128Mi"}, "requests": {"cpu": 0.5, "memory": 1e3}},
        "securityContext": {"privileged": "yes"},
        "ports": [{"containerPort": 80}]
      }
    ],
    "unknownSpecField": {"deep": [1, 2, 3]}
  },
  "status": {"phase": "Running"}
}`

func decodeUseNumber(t *testing.T, s string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil {
		t.Fatal(err)
	}
	return obj
}

func attr(t *testing.T, v types.Value, path ...string) types.Value {
	t.Helper()
	for _, p := range path {
		rec, ok := v.(types.Record)
		if !ok {
			t.Fatalf("%s: %T is not a record", strings.Join(path, "."), v)
		}
		v, ok = rec.Get(types.String(p))
		if !ok {
			t.Fatalf("%s: no attribute %s", strings.Join(path, "."), p)
		}
	}
	return v
}

func hasAttr(v types.Value, path ...string) bool {
	for _, p := range path {
		rec, ok := v.(types.Record)
		if !ok {
			return false
		}
		if v, ok = rec.Get(types.String(p)); !ok {
			return false
		}
	}
	return true
}

func TestObjectConverterPod(t *testing.T) {
	schema := schematest.Schema()
	pods := schema.Resources[schemagen.ResourceKey{Resource: "pods"}]
	c := NewObjectConverter(schema)
	obj := c.Object(pods, decodeUseNumber(t, podJSON))

	if !attr(t, obj, "apiVersion").Equal(types.String("v1")) || !attr(t, obj, "kind").Equal(types.String("Pod")) {
		t.Fatalf("apiVersion/kind: %v", obj)
	}
	md := attr(t, obj, "metadata")
	if !attr(t, md, "name").Equal(types.String("web-1")) || !attr(t, md, "generation").Equal(types.Long(3)) {
		t.Errorf("metadata %v", md)
	}
	ts := attr(t, md, "creationTimestamp")
	if dt, ok := ts.(types.Datetime); !ok || !dt.Equal(types.NewDatetime(time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC))) {
		t.Errorf("creationTimestamp %v (%T)", ts, ts)
	}
	if !attr(t, md, "finalizers").Equal(types.NewSet(types.String("a"), types.String("b"))) {
		t.Errorf("finalizers %v", attr(t, md, "finalizers"))
	}
	// Unknown fields are dropped: uid and managedFields are not in the test
	// schema's ObjectMeta, status and unknownSpecField not in the pod.
	for _, path := range [][]string{{"metadata", "uid"}, {"metadata", "managedFields"}, {"v1", "status"}, {"v1", "spec", "unknownSpecField"}, {"v1", "spec", "containers", "ports"}} {
		if hasAttr(obj, path...) {
			t.Errorf("%s is not in the schema but was kept", strings.Join(path, "."))
		}
	}

	// Maps are content-addressed entities.
	labels, ok := attr(t, md, "labels").(types.EntityUID)
	if !ok || labels.Type != schematest.StringMap.EntityType {
		t.Fatalf("labels %v", attr(t, md, "labels"))
	}
	le, ok := c.Maps[labels]
	if !ok {
		t.Fatal("labels entity missing")
	}
	if v, _ := le.Tags.Get("app"); v == nil || !v.Equal(types.String("web")) || le.Tags.Len() != 2 {
		t.Errorf("label tags %v", le.Tags)
	}
	spec := attr(t, obj, "v1", "spec")
	if sel := attr(t, spec, "nodeSelector"); sel != labels {
		t.Errorf("equal maps (keys in another order) are different entities: %v and %v", sel, labels)
	}
	if ann := attr(t, md, "annotations"); ann == labels {
		t.Error("different maps are the same entity")
	}

	// int-or-string and quantities written as numbers become strings.
	containers, ok := attr(t, spec, "containers").(types.Set)
	if !ok || containers.Len() != 1 {
		t.Fatalf("containers %v", attr(t, spec, "containers"))
	}
	var container types.Value
	for v := range containers.All() {
		container = v
	}
	limits := c.Maps[attr(t, container, "resources", "limits").(types.EntityUID)]
	requests := c.Maps[attr(t, container, "resources", "requests").(types.EntityUID)]
	for _, tc := range []struct {
		tags types.Record
		key  string
		want string
	}{{limits.Tags, "cpu", "2"}, {limits.Tags, "memory", "128Mi"}, {requests.Tags, "cpu", "0.5"}, {requests.Tags, "memory", "1e3"}} {
		if v, _ := tc.tags.Get(types.String(tc.key)); v == nil || !v.Equal(types.String(tc.want)) {
			t.Errorf("%s = %v, want %q", tc.key, v, tc.want)
		}
	}

	// Values that do not fit their type are kept as invalid values: present,
	// of another type (so reading them errors), with a warning.
	if _, isString := attr(t, spec, "priority").(types.String); !isString {
		t.Errorf("misfit priority is %v, want an invalid value (a String)", attr(t, spec, "priority"))
	}
	if _, isString := attr(t, container, "securityContext", "privileged").(types.String); !isString {
		t.Errorf("misfit privileged is %v, want an invalid value (a String)", attr(t, container, "securityContext", "privileged"))
	}
	warnings := strings.Join(c.Warnings, "\n")
	for _, w := range []string{"priority", "privileged"} {
		if !strings.Contains(warnings, w) {
			t.Errorf("no warning about %s in %q", w, warnings)
		}
	}

	// A second pod with the same labels shares the entity; other labels do not.
	other := decodeUseNumber(t, `{"apiVersion": "v1", "kind": "Pod", "metadata": {"labels": {"tier": "frontend", "app": "web"}}}`)
	if got := attr(t, c.Object(pods, other), "metadata", "labels"); got != labels {
		t.Errorf("same labels in another object: %v, want %v", got, labels)
	}
	third := decodeUseNumber(t, `{"apiVersion": "v1", "kind": "Pod", "metadata": {"labels": {"app": "db"}}}`)
	if got := attr(t, c.Object(pods, third), "metadata", "labels"); got == labels {
		t.Error("different labels, same entity")
	}

	// An apiVersion the resource does not serve has no version attribute.
	foreign := c.Object(pods, decodeUseNumber(t, `{"apiVersion": "v2", "kind": "Pod", "spec": {"nodeName": "n1"}}`))
	if hasAttr(foreign, "v1") {
		t.Errorf("v2 object has a v1 attribute: %v", foreign)
	}

	// Policies see it all through the entities.
	ents := &Entities{
		Principal: PrincipalEntity(UserInfo{Name: "alice"}),
		Resource:  types.Entity{UID: types.NewEntityUID(pods.EntityType, ""), Attributes: types.NewRecord(types.RecordMap{"object": obj})},
		Maps:      c.Maps,
	}
	ps := parseWithIDs(t, `
@id("label") permit(principal, action, resource) when {
  resource.object.metadata.labels.hasTag("app") && resource.object.metadata.labels.getTag("app") == "web" };
@id("same-maps") permit(principal, action, resource) when { resource.object.metadata.labels == resource.object.v1.spec.nodeSelector };
@id("time") permit(principal, action, resource) when { resource.object.metadata.creationTimestamp < datetime("2025-01-01T00:00:00Z") };
@id("missing") permit(principal, action, resource) when { resource.object.v1.spec.priority > 0 };
`)
	res := oracle.Evaluate(ps, ents, ents.Principal.UID, schemagen.ActionUID("create"), ents.Resource.UID)
	if res.Decision != "Allow" || strings.Join(res.Policies, ",") != "label,same-maps,time" || len(res.Errors) != 1 || !strings.Contains(res.Errors[0], "policy missing") {
		t.Fatalf("got %v %v %v", res.Decision, res.Policies, res.Errors)
	}
}

// parseWithIDs parses policies named by their @id annotations for the
// one-phase oracle (plain cedar-go: these tests check the entities, not the
// policy language).
func parseWithIDs(t *testing.T, src string) *oracle.Policies {
	t.Helper()
	list, err := cedarlib.NewPolicyListFromBytes("test.cedar", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	ps := &oracle.Policies{}
	for _, p := range list {
		ps.Add(string(p.Annotations()["id"]), p)
	}
	return ps
}
