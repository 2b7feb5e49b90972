package schemagen

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	cedarlib "github.com/cedar-policy/cedar-go"
	"github.com/cedar-policy/cedar-go/types"
	"k8s.io/client-go/rest"

	xast "github.com/kcedar/kcedar/internal/lib/cedarx/ast"
	cedarschema "github.com/kcedar/kcedar/internal/lib/cedarx/schema"
	"github.com/kcedar/kcedar/internal/lib/cedarx/schema/resolved"
	"github.com/kcedar/kcedar/internal/lib/cedarx/schema/validate"
)

// Every resource and subresource of the embedded discovery has its entity type,
// in the model and in both printed formats.
func TestDefaultCoversDiscovery(t *testing.T) {
	s := defaultSchema(t)
	_, _, fromText, fromJSON := resolveBoth(t, s)
	docs, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[ResourceKey]bool{}
	for _, g := range docs.Groups() {
		for _, v := range g.Versions {
			for _, r := range v.Resources {
				keys := []ResourceKey{{Group: g.Name, Resource: r.Resource}}
				for _, sr := range r.Subresources {
					keys = append(keys, ResourceKey{Group: g.Name, Resource: r.Resource, Subresource: sr.Subresource})
				}
				for _, k := range keys {
					seen[k] = true
					res, ok := s.Lookup(k.Group, k.Resource, k.Subresource)
					if !ok {
						t.Errorf("%v: no resource", k)
						continue
					}
					if res.Virtual {
						t.Errorf("%v: discovered resource marked virtual", k)
					}
					if want := ResourceEntityType(k.Group, k.Resource, k.Subresource); res.EntityType != want {
						t.Errorf("%v: entity type %s, want %s", k, res.EntityType, want)
					}
					for _, rs := range []*resolved.Schema{fromText, fromJSON} {
						e, ok := rs.Entities[res.EntityType]
						if !ok {
							t.Errorf("%v: entity %s not in the printed schema", k, res.EntityType)
							continue
						}
						if e.Annotations[AnnotationResource] != types.String(k.Resource) || e.Annotations[AnnotationAPIGroup] != types.String(k.Group) ||
							e.Annotations[AnnotationSubresource] != types.String(k.Subresource) {
							t.Errorf("%v: annotations %v", k, e.Annotations)
						}
						for _, a := range []string{AttrAPIGroup, AttrResource, AttrName, AttrNamed} {
							if _, ok := e.Shape[types.String(a)]; !ok {
								t.Errorf("%v: no %s attribute", k, a)
							}
						}
						// Namespaced: a namespace; cluster-scoped: an optional
						// one (the namespace a request names).
						ns, hasNS := e.Shape[AttrNamespace]
						if !hasNS || ns.Optional != (r.Scope != "Namespaced") {
							t.Errorf("%v: namespace attribute %v (optional %v), scope %s", k, hasNS, ns.Optional, r.Scope)
						}
						_, hasSub := e.Shape[AttrSubresource]
						if hasSub != (k.Subresource != "") {
							t.Errorf("%v: subresource attribute %v", k, hasSub)
						}
					}
				}
			}
		}
	}
	if len(seen) < 100 {
		t.Fatalf("only %d resources and subresources in the embedded discovery", len(seen))
	}
	st := s.Stats()
	t.Logf("%d resources and subresources in discovery; stats:\n%s", len(seen), st)
	if st.Resources+st.Subresources-st.VirtualResources != len(seen) {
		t.Errorf("%d typed non-virtual resources for %d in discovery", st.Resources+st.Subresources-st.VirtualResources, len(seen))
	}
}

// Both formats parse back, resolve, and describe the same schema as the model.
func TestDefaultRoundTrip(t *testing.T) {
	s := defaultSchema(t)
	text, js, fromText, fromJSON := resolveBoth(t, s)
	if !reflect.DeepEqual(fromText, fromJSON) {
		t.Error("the resolved text and JSON schemas differ")
	}
	for name, in := range map[string][]byte{"cedar": text, "json": js} {
		var cs cedarschema.Schema
		var err error
		if name == "json" {
			err = cs.UnmarshalJSON(in)
		} else {
			err = cs.UnmarshalCedar(in)
		}
		if err != nil {
			t.Fatal(err)
		}
		// Re-printing what was parsed gives the same text: nothing was lost.
		again, err := cs.MarshalCedar()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again, text) {
			t.Errorf("%s: re-printed Cedar text differs from the original", name)
		}
		// And the model rebuilt from it equals the generated one.
		p, err := ParseSchema(in)
		if err != nil {
			t.Fatalf("%s: ParseSchema: %v", name, err)
		}
		p.Warnings = s.Warnings
		if !reflect.DeepEqual(p, s) {
			t.Errorf("%s: ParseSchema does not rebuild the generated model", name)
		}
	}
}

// resource.object.v1.spec.nodeName on core::pods is a typed String, and
// metadata.labels is a map entity with String tags, in both formats.
func TestDefaultPodTypes(t *testing.T) {
	s := defaultSchema(t)
	_, _, fromText, fromJSON := resolveBoth(t, s)
	pods := ResourceEntityType("", "pods", "")
	if pods != "core::pods" {
		t.Fatalf("pods entity type %s", pods)
	}
	for name, rs := range map[string]*resolved.Schema{"cedar": fromText, "json": fromJSON} {
		nn, err := resolvedAttr(rs, pods, "object", "v1", "spec", "nodeName")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, ok := nn.(resolved.StringType); !ok {
			t.Errorf("%s: nodeName is %T", name, nn)
		}
		for _, old := range []string{"object", "oldObject"} {
			labels, err := resolvedAttr(rs, pods, old, "metadata", "labels")
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if labels != resolved.EntityType(StringMapType) {
				t.Errorf("%s: %s.metadata.labels is %v", name, old, labels)
			}
			tags, err := resolvedAttr(rs, pods, old, "metadata", "labels", "{}")
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if _, ok := tags.(resolved.StringType); !ok {
				t.Errorf("%s: label tags are %T", name, tags)
			}
		}
		// Containers are a set of records with typed fields.
		img, err := resolvedAttr(rs, pods, "object", "v1", "spec", "containers", "[]", "image")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, ok := img.(resolved.StringType); !ok {
			t.Errorf("%s: image is %T", name, img)
		}
		ts, err := resolvedAttr(rs, pods, "object", "metadata", "creationTimestamp")
		if err != nil {
			t.Fatal(err)
		}
		if ts != resolved.ExtensionType("datetime") {
			t.Errorf("%s: creationTimestamp is %v", name, ts)
		}
	}
}

// Policies in the style of docs/schema.md validate in strict mode, and
// mistakes are caught.
func TestDefaultValidatesPolicies(t *testing.T) {
	s := defaultSchema(t)
	_, _, rs, _ := resolveBoth(t, s)
	v := validate.New(rs)
	good := map[string]string{
		"nodeName": `permit(principal, action == k8s::Action::"create", resource is core::pods)
			when { resource has object && resource.object has v1 && resource.object.v1 has spec &&
			       resource.object.v1.spec has nodeName && resource.object.v1.spec.nodeName == "n1" };`,
		"labels": `forbid(principal, action in [k8s::Action::"create", k8s::Action::"update"], resource is apps::deployments)
			unless { resource has object && resource.object.metadata has labels &&
			         resource.object.metadata.labels.hasTag("team") &&
			         resource.object.metadata.labels.getTag("team") == principal.getTag("team").isEmpty().toString() };`,
		"groups": `permit(principal in k8s::Group::"dev", action in k8s::Action::"*", resource is core::configmaps)
			when { resource.namespace == "dev" && principal.groups.contains("dev") };`,
		"exec": `forbid(principal is k8s::ServiceAccount, action == k8s::Action::"create", resource is core::pods_exec)
			when { resource has object && resource.object has v1 && resource.object.v1 has command &&
			       resource.object.v1.command.contains("sh") };`,
		"impersonate": `permit(principal, action == k8s::Action::"impersonate", resource is io::k8s::authentication::userextras)
			when { resource.subresource == "scopes" && resource.name == "view" };`,
		"nonresource": `permit(principal, action == k8s::Action::"get", resource is k8s::NonResourceURL)
			when { resource.path like "/healthz*" };`,
		"fallback": `permit(principal, action == k8s::Action::"list", resource is k8s::Resource)
			when { resource.apiGroup == "example.com" && resource has namespace && resource.namespace == "x" };`,
		"datetime": `forbid(principal, action == k8s::Action::"delete", resource is core::namespaces)
			when { resource has oldObject && resource.oldObject.metadata has creationTimestamp &&
			       resource.oldObject.metadata.creationTimestamp < datetime("2024-01-01") };`,
		"namespaceObject": `permit(principal, action in [k8s::Action::"list", k8s::Action::"get"], resource is core::pods)
			when { resource has namespaceObject && resource.namespaceObject.metadata has labels &&
			       resource.namespaceObject.metadata.labels.hasTag("team") &&
			       resource.namespaceObject.metadata.labels.getTag("team") == "a" &&
			       resource.namespaceObject has v1 && resource.namespaceObject.v1 has status &&
			       resource.namespaceObject.v1.status has phase && resource.namespaceObject.v1.status.phase == "Active" };`,
		"namespaceObject-fallback": `forbid(principal, action, resource is k8s::Resource)
			when { resource has namespaceObject && resource.namespaceObject.metadata has labels &&
			       resource.namespaceObject.metadata.labels.hasTag("restricted") };`,
		"decimal-and-long": `permit(principal, action == k8s::Action::"update", resource is apps::deployments_scale)
			when { resource has object && resource.object has v1 && resource.object.v1 has spec &&
			       resource.object.v1.spec has replicas && resource.object.v1.spec.replicas <= 10 };`,
	}
	for name, src := range good {
		good[name] = strings.ReplaceAll(src, `principal.getTag("team").isEmpty().toString()`, `"x"`)
	}
	bad := map[string]string{
		"unknown attribute": `permit(principal, action == k8s::Action::"create", resource is core::pods)
			when { resource has object && resource.object has v1 && resource.object.v1 has spec && resource.object.v1.spec.nodeNam == "n1" };`,
		"wrong type": `permit(principal, action == k8s::Action::"create", resource is core::pods)
			when { resource has object && resource.object has v1 && resource.object.v1 has spec && resource.object.v1.spec has nodeName && resource.object.v1.spec.nodeName == 1 };`,
		"no has guard": `permit(principal, action == k8s::Action::"create", resource is core::pods)
			when { resource.object.v1.spec.nodeName == "n1" };`,
		"namespaceObject without has": `permit(principal, action == k8s::Action::"list", resource is core::pods)
			when { resource.namespaceObject.metadata.labels.getTag("team") == "a" };`,
		"namespaceObject on a cluster-scoped resource": `permit(principal, action == k8s::Action::"list", resource is core::nodes)
			when { resource.namespaceObject.metadata.name == "x" };`,
		"verb not served": `permit(principal, action == k8s::Action::"deletecollection", resource is core::pods_exec);`,
	}
	for name, src := range good {
		if err := validatePolicy(v, src); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	for name, src := range bad {
		if err := validatePolicy(v, src); err == nil {
			t.Errorf("%s: validated", name)
		}
	}
}

func validatePolicy(v *validate.Validator, src string) error {
	ps, err := cedarlib.NewPolicyListFromBytes("test.cedar", []byte(src))
	if err != nil {
		return err
	}
	for _, p := range ps {
		if err := v.Policy("p", (*xast.Policy)(p.AST())); err != nil {
			return err
		}
	}
	return nil
}

func TestDeterminism(t *testing.T) {
	var outs [2][2][]byte
	for i := range outs {
		docs, err := Default()
		if err != nil {
			t.Fatal(err)
		}
		s, err := Generate(docs)
		if err != nil {
			t.Fatal(err)
		}
		if outs[i][0], err = s.MarshalCedar(); err != nil {
			t.Fatal(err)
		}
		if outs[i][1], err = s.MarshalJSON(); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(outs[0][0], outs[1][0]) || !bytes.Equal(outs[0][1], outs[1][1]) {
		t.Fatal("two generations from the same documents differ")
	}
	// Warnings are sorted and stable too.
	s := defaultSchema(t)
	if !slices.IsSorted(s.Warnings) {
		t.Error("warnings are not sorted")
	}
}

func TestDefaultObjects(t *testing.T) {
	s := defaultSchema(t)
	cases := []struct {
		key        ResourceKey
		apiVersion string
		kind       string
	}{
		{ResourceKey{"", "pods", ""}, "v1", "Pod"},
		{ResourceKey{"", "pods", "status"}, "v1", "Pod"},
		{ResourceKey{"", "pods", "exec"}, "v1", "PodExecOptions"},
		{ResourceKey{"", "pods", "attach"}, "v1", "PodAttachOptions"},
		{ResourceKey{"", "pods", "portforward"}, "v1", "PodPortForwardOptions"},
		{ResourceKey{"", "pods", "proxy"}, "v1", "PodProxyOptions"},
		{ResourceKey{"", "services", "proxy"}, "v1", "ServiceProxyOptions"},
		{ResourceKey{"", "nodes", "proxy"}, "v1", "NodeProxyOptions"},
		{ResourceKey{"", "pods", "eviction"}, "policy/v1", "Eviction"},
		{ResourceKey{"", "pods", "binding"}, "v1", "Binding"},
		{ResourceKey{"", "serviceaccounts", "token"}, "authentication.k8s.io/v1", "TokenRequest"},
		{ResourceKey{"apps", "deployments", "scale"}, "autoscaling/v1", "Scale"},
		{ResourceKey{"", "replicationcontrollers", "scale"}, "autoscaling/v1", "Scale"},
	}
	for _, c := range cases {
		r, ok := s.Lookup(c.key.Group, c.key.Resource, c.key.Subresource)
		if !ok {
			t.Errorf("%v: missing", c.key)
			continue
		}
		ov := r.Versions["v1"]
		if ov == nil {
			t.Errorf("%v: no v1 object", c.key)
			continue
		}
		if ov.APIVersion != c.apiVersion || ov.Kind != c.kind {
			t.Errorf("%v: object %s %s, want %s %s", c.key, ov.APIVersion, ov.Kind, c.apiVersion, c.kind)
		}
		if v, ok := r.VersionOf(c.apiVersion, c.kind, ""); !ok || v != "v1" {
			t.Errorf("%v: VersionOf = %q %v", c.key, v, ok)
		}
		for _, a := range []string{AttrAPIVersion, AttrKind, AttrMetadata} {
			if _, ok := ov.Fields.Attributes[a]; ok {
				t.Errorf("%v: fields contain %s", c.key, a)
			}
		}
	}
	if typ, _ := objectField(t, s, ResourceKey{"", "pods", "exec"}, "v1", "command"); typeKey(typ) != "Set<String>" {
		t.Errorf("PodExecOptions.command is %s", typeKey(typ))
	}
	if typ, _ := objectField(t, s, ResourceKey{"", "pods", "exec"}, "v1", "stdin"); typeKey(typ) != "Bool" {
		t.Errorf("PodExecOptions.stdin is %s", typeKey(typ))
	}
	if typ, _ := objectField(t, s, ResourceKey{"", "pods", "portforward"}, "v1", "ports"); typeKey(typ) != "Set<Long>" {
		t.Errorf("PodPortForwardOptions.ports is %s", typeKey(typ))
	}
	// Quantities and int-or-string are strings; enums are kept.
	if typ, _ := objectField(t, s, ResourceKey{"", "pods", ""}, "v1", "spec", "containers", "[]", "resources", "limits", "{}"); typeKey(typ) != "String" {
		t.Errorf("resource limits are %s", typeKey(typ))
	}
	if typ, _ := objectField(t, s, ResourceKey{"", "services", ""}, "v1", "spec", "ports", "[]", "targetPort"); typeKey(typ) != "String" {
		t.Errorf("targetPort is %s", typeKey(typ))
	}
	_, attr := objectField(t, s, ResourceKey{"", "pods", ""}, "v1", "spec", "restartPolicy")
	if !slices.Contains(attr.Enum, "Always") {
		t.Errorf("restartPolicy enum %v", attr.Enum)
	}
	// Optional vs required follows the OpenAPI "required" list.
	if _, attr := objectField(t, s, ResourceKey{"", "pods", ""}, "v1", "spec", "containers"); attr.Optional {
		t.Error("PodSpec.containers is optional")
	}
	if _, attr := objectField(t, s, ResourceKey{"", "pods", ""}, "v1", "spec", "nodeName"); !attr.Optional {
		t.Error("PodSpec.nodeName is required")
	}
	// ObjectMeta is the common type.
	if r, ok := s.ObjectMeta.(*RefType); !ok || s.OpenAPINames[r.Name] != objectMetaDef {
		t.Errorf("ObjectMeta is %#v", s.ObjectMeta)
	}
}

func TestVirtualResourcesAndActions(t *testing.T) {
	s := defaultSchema(t)
	for _, c := range []struct {
		group, resource, sub string
		verbs                []string
		virtual              bool
	}{
		{"", "users", "", []string{"impersonate"}, true},
		{"", "groups", "", []string{"impersonate"}, true},
		{"authentication.k8s.io", "uids", "", []string{"impersonate"}, true},
		{"authentication.k8s.io", "userextras", "scopes", []string{"impersonate"}, true},
		{"certificates.k8s.io", "signers", "", []string{"approve", "attest", "sign"}, true},
		{"", "serviceaccounts", "", []string{"impersonate", "get", "create"}, false},
		{"rbac.authorization.k8s.io", "roles", "", []string{"bind", "escalate", "get"}, false},
		{"rbac.authorization.k8s.io", "clusterroles", "", []string{"bind", "escalate"}, false},
		{"", "nodes", "metrics", []string{"get"}, true},
	} {
		r, ok := s.Lookup(c.group, c.resource, c.sub)
		if !ok {
			t.Errorf("%s/%s/%s: missing", c.group, c.resource, c.sub)
			continue
		}
		if r.Virtual != c.virtual {
			t.Errorf("%s/%s: virtual %v", c.group, c.resource, r.Virtual)
		}
		for _, v := range c.verbs {
			if !slices.Contains(r.Verbs, v) {
				t.Errorf("%s/%s: no verb %s in %v", c.group, c.resource, v, r.Verbs)
			}
		}
	}
	ue, _ := s.Lookup("authentication.k8s.io", "userextras", "anything")
	if !ue.AnySubresource || !ue.HasSubresourceAttr() || ue.Namespaced {
		t.Errorf("userextras: %+v", ue)
	}
	if _, ok := s.Lookup("", "pods", "nosuch"); ok {
		t.Error("Lookup found pods/nosuch")
	}
	if signers, _ := s.Lookup("certificates.k8s.io", "signers", ""); signers.Namespaced {
		t.Error("signers are namespaced")
	}

	_, _, rs, _ := resolveBoth(t, s)
	all := types.NewEntityUID(ActionType, AllVerbs)
	if _, ok := rs.Actions[all]; !ok {
		t.Fatal(`no k8s::Action::"*"`)
	}
	for _, v := range append(slices.Clone(StandardVerbs), NonResourceVerbs...) {
		if !slices.Contains(s.Verbs, v) {
			t.Errorf("verb %s missing", v)
		}
	}
	for _, v := range s.Verbs {
		a, ok := rs.Actions[ActionUID(v)]
		if !ok {
			t.Errorf("no action %s", v)
			continue
		}
		for _, p := range ActionParents(v) {
			if !a.Entity.Parents.Contains(ActionUID(p)) {
				t.Errorf("action %s is not in %s", v, p)
			}
		}
		if !ActionIn(v, AllVerbs) {
			t.Errorf("action %s is not in *", v)
		}
		if a.AppliesTo == nil || len(a.AppliesTo.Principals) != len(ActionPrincipals(v)) || len(a.AppliesTo.Context) != 1 || a.AppliesTo.Context[AttrVerb].Optional {
			t.Errorf("action %s appliesTo %+v", v, a.AppliesTo)
			continue
		}
		if !slices.Contains(a.AppliesTo.Resources, ResourceType) {
			t.Errorf("action %s does not apply to k8s::Resource", v)
		}
		if IsNonResourceAction(v) != slices.Contains(a.AppliesTo.Resources, NonResourceURLType) {
			t.Errorf("action %s: NonResourceURL %v", v, a.AppliesTo.Resources)
		}
		for _, r := range s.Resources {
			if slices.Contains(r.Verbs, v) != slices.Contains(a.AppliesTo.Resources, r.EntityType) {
				t.Errorf("action %s and %s disagree (verbs %v)", v, r.EntityType, r.Verbs)
			}
		}
	}
}

func TestPrincipals(t *testing.T) {
	_, _, rs, _ := resolveBoth(t, defaultSchema(t))
	for et, extra := range map[types.EntityType][]string{
		UserType:           nil,
		ServiceAccountType: {AttrNamespace, AttrName},
		NodeType:           {AttrName},
	} {
		e := rs.Entities[et]
		if !slices.Equal(e.ParentTypes, []types.EntityType{GroupType}) {
			t.Errorf("%s parents %v", et, e.ParentTypes)
		}
		if e.Tags != (resolved.SetType{Element: resolved.StringType{}}) {
			t.Errorf("%s tags %v", et, e.Tags)
		}
		want := append([]string{AttrUsername, AttrGroups, AttrUID}, extra...)
		if len(e.Shape) != len(want) {
			t.Errorf("%s shape %v", et, e.Shape)
		}
		for _, a := range want {
			attr, ok := e.Shape[types.String(a)]
			if !ok || attr.Optional != (a == AttrUID) {
				t.Errorf("%s.%s: %+v %v", et, a, attr, ok)
			}
		}
	}
	if e := rs.Entities[ResourceType]; len(e.Shape) != 7 || !e.Shape[AttrSubresource].Optional || e.Shape[AttrNamed].Optional || !e.Shape[AttrNamespaceObject].Optional || e.Shape[AttrAPIGroup].Optional {
		t.Errorf("k8s::Resource shape %v", e.Shape)
	}
	if e := rs.Entities[NonResourceURLType]; len(e.Shape) != 1 {
		t.Errorf("k8s::NonResourceURL shape %v", e.Shape)
	}
}

func TestWriteDirReadDir(t *testing.T) {
	docs, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	dir1, dir2 := t.TempDir(), t.TempDir()
	// A stale file from an earlier capture disappears.
	if err := os.MkdirAll(filepath.Join(dir1, "openapi", "v3", "apis", "gone.example.com"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir1, "openapi", "v3", "apis", "gone.example.com", "v1.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := docs.WriteDir(dir1); err != nil {
		t.Fatal(err)
	}
	back, err := ReadDir(os.DirFS(dir1))
	if err != nil {
		t.Fatal(err)
	}
	if err := back.WriteDir(dir2); err != nil {
		t.Fatal(err)
	}
	// The embedded default is itself WriteDir output: writing is a fixed point.
	for _, d := range []string{dir1, dir2} {
		err := filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
			if err != nil || e.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(d, p)
			got, _ := os.ReadFile(p)
			want, err := defaultFS.ReadFile("default/" + filepath.ToSlash(rel))
			if err != nil {
				t.Errorf("%s: %s is not in the embedded default", d, rel)
				return nil
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s: %s differs from the embedded default", d, rel)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir1, "openapi", "v3", "apis", "gone.example.com")); !os.IsNotExist(err) {
		t.Error("stale file kept")
	}
}

func TestNormalizeKeepsData(t *testing.T) {
	in := []byte(`{"openapi":"3.0.0","description":"x","paths":{"/a":{"get":{"description":"d","x-kubernetes-action":"get"}},
		"/api/v1/namespaces/{namespace}/pods/{name}/exec":{"post":{"description":"d","x-kubernetes-action":"connect"},"parameters":[{"name":"command","in":"query","description":"strip me","schema":{"type":"string"}}]}},
		"components":{"schemas":{"description":{"description":"strip","type":"object","properties":{"description":{"type":"string","description":"strip"}},
		"default":{"description":"keep"},"x-kubernetes-foo":{"description":"keep"},"enum":[{"description":"keep"}]}}}}`)
	out, err := normalizeJSON(in, normalizeOpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	if strings.Contains(s, "strip") || strings.Contains(s, `"/a"`) || !strings.Contains(s, "connect") {
		t.Errorf("not normalized:\n%s", s)
	}
	if strings.Count(s, `"keep"`) != 3 || !strings.Contains(s, `"description": {`) {
		t.Errorf("data or property names stripped:\n%s", s)
	}
	again, _ := normalizeJSON(out, normalizeOpenAPI)
	if !bytes.Equal(again, out) {
		t.Error("normalization is not idempotent")
	}
}

func TestWriteDirRejectsBadPaths(t *testing.T) {
	for _, p := range []string{"../x", "a/../../b", "/abs", "a//b", `a\b`, "", "a/./b", "a b"} {
		docs := &Documents{OpenAPI: map[string][]byte{p: []byte(`{"openapi":"3.0.0"}`)}}
		if err := docs.WriteDir(t.TempDir()); err == nil {
			t.Errorf("%q: written", p)
		}
	}
}

func TestParseSchemaRejectsForeignSchemas(t *testing.T) {
	for name, src := range map[string]string{
		"empty":          ``,
		"bare":           `entity User;`,
		"no principals":  `namespace k8s { entity Foo; }`,
		"syntax":         `namespace k8s {`,
		"unresolvable":   `namespace k8s { entity User { a: Nope }; }`,
		"json garbage":   `{"k8s": 1}`,
		"unknown common": `namespace k8s { entity User; entity ServiceAccount; entity Node; entity Group; entity Resource; entity NonResourceURL; type T = String; }`,
	} {
		if _, err := ParseSchema([]byte(src)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestLoadSources(t *testing.T) {
	ctx := context.Background()
	s, err := Load(ctx, Source{})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := s.MarshalCedar()

	dir := t.TempDir()
	docs, _ := Default()
	if err := docs.WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	fromDir, err := Load(ctx, Source{FromDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := fromDir.MarshalCedar(); !bytes.Equal(got, want) {
		t.Error("--from-dir differs from the default")
	}

	for _, format := range []string{"cedar", "json"} {
		f := filepath.Join(dir, "schema."+format)
		data, _ := s.MarshalCedar()
		if format == "json" {
			data, _ = s.MarshalJSON()
		}
		if err := os.WriteFile(f, data, 0o644); err != nil {
			t.Fatal(err)
		}
		fromFile, err := Load(ctx, Source{SchemaFile: f})
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := fromFile.MarshalCedar(); !bytes.Equal(got, want) {
			t.Errorf("--schema (%s) differs from the default", format)
		}
	}

	for name, src := range map[string]Source{
		"two sources":       {FromDir: dir, SchemaFile: "x"},
		"live and dir":      {Config: &rest.Config{Host: "https://127.0.0.1:1"}, FromDir: dir},
		"missing dir":       {FromDir: filepath.Join(dir, "nope")},
		"dir without docs":  {FromDir: t.TempDir()},
		"missing schema":    {SchemaFile: filepath.Join(dir, "nope")},
		"schema not a file": {SchemaFile: dir},
	} {
		if _, err := Load(ctx, src); err == nil {
			t.Errorf("%s: loaded", name)
		}
	}
	if _, err := LoadDocuments(ctx, Source{SchemaFile: "x"}); err == nil {
		t.Error("LoadDocuments of a schema file")
	}
}
