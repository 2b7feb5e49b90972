package schemagen

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/cedar-policy/cedar-go/types"
	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cedarschema "github.com/kcedar/kcedar/internal/lib/cedarx/schema"
	"github.com/kcedar/kcedar/internal/lib/cedarx/schema/resolved"
)

var (
	defaultOnceT   sync.Once
	defaultSchemaT *Schema
	defaultErrT    error
)

// defaultSchema generates the embedded default once per test binary. Tests
// must not modify it.
func defaultSchema(t testing.TB) *Schema {
	t.Helper()
	defaultOnceT.Do(func() {
		docs, err := Default()
		if err != nil {
			defaultErrT = err
			return
		}
		defaultSchemaT, defaultErrT = Generate(docs)
	})
	if defaultErrT != nil {
		t.Fatal(defaultErrT)
	}
	return defaultSchemaT
}

// resolveBoth prints s in both formats, parses each back with cedar-go and
// resolves it.
func resolveBoth(t testing.TB, s *Schema) (text, js []byte, fromText, fromJSON *resolved.Schema) {
	t.Helper()
	var err error
	if text, err = s.MarshalCedar(); err != nil {
		t.Fatal(err)
	}
	if js, err = s.MarshalJSON(); err != nil {
		t.Fatal(err)
	}
	var ct, cj cedarschema.Schema
	if err := ct.UnmarshalCedar(text); err != nil {
		t.Fatalf("Cedar text does not parse: %v", err)
	}
	if fromText, err = ct.Resolve(); err != nil {
		t.Fatalf("Cedar text does not resolve: %v", err)
	}
	if err := cj.UnmarshalJSON(js); err != nil {
		t.Fatalf("JSON does not parse: %v", err)
	}
	if fromJSON, err = cj.Resolve(); err != nil {
		t.Fatalf("JSON does not resolve: %v", err)
	}
	return text, js, fromText, fromJSON
}

// resolvedAttr walks a resolved schema from an entity type's shape: path
// elements are attribute names, "[]" (set element) and "{}" (the tag type of
// a map entity).
func resolvedAttr(rs *resolved.Schema, et types.EntityType, path ...string) (resolved.IsType, error) {
	e, ok := rs.Entities[et]
	if !ok {
		return nil, fmt.Errorf("no entity type %s", et)
	}
	var t resolved.IsType = e.Shape
	for i, p := range path {
		switch p {
		case "[]":
			st, ok := t.(resolved.SetType)
			if !ok {
				return nil, fmt.Errorf("%s: %T is not a set", strings.Join(path[:i+1], "."), t)
			}
			t = st.Element
		case "{}":
			ref, ok := t.(resolved.EntityType)
			if !ok {
				return nil, fmt.Errorf("%s: %T is not a map entity", strings.Join(path[:i+1], "."), t)
			}
			me, ok := rs.Entities[types.EntityType(ref)]
			if !ok || me.Tags == nil {
				return nil, fmt.Errorf("%s: entity %s has no tags", strings.Join(path[:i+1], "."), ref)
			}
			t = me.Tags
		default:
			rec, ok := t.(resolved.RecordType)
			if !ok {
				return nil, fmt.Errorf("%s: %T is not a record", strings.Join(path[:i+1], "."), t)
			}
			a, ok := rec[types.String(p)]
			if !ok {
				return nil, fmt.Errorf("%s: no attribute %q", strings.Join(path[:i+1], "."), p)
			}
			t = a.Type
		}
	}
	return t, nil
}

// modelAttr walks the model like resolvedAttr, starting at a resource's object
// record for a version ("" for the object record itself).
func modelType(s *Schema, t Type, path ...string) (Type, *Attribute, error) {
	var attr *Attribute
	for i, p := range path {
		if r, ok := t.(*RefType); ok {
			d, ok := s.Definitions[r.Name]
			if !ok {
				return nil, nil, fmt.Errorf("undefined common type %s", r.Name)
			}
			t = d
		}
		where := strings.Join(path[:i+1], ".")
		switch p {
		case "[]":
			st, ok := t.(*SetType)
			if !ok {
				return nil, nil, fmt.Errorf("%s: %T is not a set", where, t)
			}
			t, attr = st.Element, nil
		case "{}":
			mt, ok := t.(*MapType)
			if !ok {
				return nil, nil, fmt.Errorf("%s: %T is not a map", where, t)
			}
			t, attr = mt.Value, nil
		default:
			rec, ok := t.(*RecordType)
			if !ok {
				return nil, nil, fmt.Errorf("%s: %T is not a record", where, t)
			}
			a, ok := rec.Attributes[p]
			if !ok {
				return nil, nil, fmt.Errorf("%s: no attribute %q", where, p)
			}
			t, attr = a.Type, a
		}
	}
	if r, ok := t.(*RefType); ok {
		if d, ok := s.Definitions[r.Name]; ok {
			t = d
		}
	}
	return t, attr, nil
}

// objectField walks a resource's fields in one version.
func objectField(t testing.TB, s *Schema, key ResourceKey, version string, path ...string) (Type, *Attribute) {
	t.Helper()
	r, ok := s.Resources[key]
	if !ok {
		t.Fatalf("no resource %v", key)
	}
	ov, ok := r.Versions[version]
	if !ok {
		t.Fatalf("%v: no version %s (have %v)", key, version, sortedKeys(r.Versions))
	}
	typ, attr, err := modelType(s, ov.Fields, path...)
	if err != nil {
		t.Fatalf("%v %s: %v", key, version, err)
	}
	return typ, attr
}

// fakeResource describes one resource for fakeDocs.
type fakeResource struct {
	group, version, resource, kind string
	namespaced                     bool
	verbs                          []string
	subresources                   []apidiscoveryv2.APISubresourceDiscovery
}

// fakeDocs builds documents from discovery entries and OpenAPI definitions (one
// OpenAPI document per group version, all definitions in each). Each kind's
// definition is named "<group or core>.<version>.<kind>" unless defs already
// carry x-kubernetes-group-version-kind. A minimal ObjectMeta is added unless
// defs define it.
func fakeDocs(t testing.TB, resources []fakeResource, defs map[string]any) *Documents {
	t.Helper()
	schemas := map[string]any{}
	for k, v := range defs {
		schemas[k] = v
	}
	if _, ok := schemas[objectMetaDef]; !ok {
		schemas[objectMetaDef] = map[string]any{
			"type": "object",
			"properties": map[string]any{
				"name":        map[string]any{"type": "string"},
				"namespace":   map[string]any{"type": "string"},
				"labels":      map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "string"}},
				"annotations": map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "string"}},
			},
		}
	}
	docs := &Documents{
		API:     &apidiscoveryv2.APIGroupDiscoveryList{TypeMeta: metav1.TypeMeta{Kind: discoveryKind, APIVersion: "apidiscovery.k8s.io/v2"}},
		APIs:    &apidiscoveryv2.APIGroupDiscoveryList{TypeMeta: metav1.TypeMeta{Kind: discoveryKind, APIVersion: "apidiscovery.k8s.io/v2"}},
		OpenAPI: map[string][]byte{},
	}
	groups := map[string]*apidiscoveryv2.APIGroupDiscovery{}
	var order []string
	for _, r := range resources {
		g, ok := groups[r.group]
		if !ok {
			g = &apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: r.group}}
			groups[r.group] = g
			order = append(order, r.group)
		}
		vi := -1
		for i, v := range g.Versions {
			if v.Version == r.version {
				vi = i
			}
		}
		if vi < 0 {
			g.Versions = append(g.Versions, apidiscoveryv2.APIVersionDiscovery{Version: r.version})
			vi = len(g.Versions) - 1
		}
		scope := apidiscoveryv2.ScopeCluster
		if r.namespaced {
			scope = apidiscoveryv2.ScopeNamespace
		}
		verbs := r.verbs
		if verbs == nil {
			verbs = []string{"create", "delete", "get", "list", "patch", "update", "watch"}
		}
		g.Versions[vi].Resources = append(g.Versions[vi].Resources, apidiscoveryv2.APIResourceDiscovery{
			Resource: r.resource, Scope: scope, Verbs: verbs, Subresources: r.subresources,
			ResponseKind: &metav1.GroupVersionKind{Kind: r.kind},
		})
		defName := r.group
		if defName == "" {
			defName = "core"
		}
		defName += "." + r.version + "." + r.kind
		if d, ok := schemas[defName].(map[string]any); ok {
			if _, has := d[extGVK]; !has {
				d[extGVK] = []any{map[string]any{"group": r.group, "version": r.version, "kind": r.kind}}
			}
		}
	}
	for _, name := range order {
		g := groups[name]
		if name == "" {
			docs.API.Items = append(docs.API.Items, *g)
		} else {
			docs.APIs.Items = append(docs.APIs.Items, *g)
		}
		for _, v := range g.Versions {
			p := "apis/" + name + "/" + v.Version
			if name == "" {
				p = "api/" + v.Version
			}
			doc, err := json.Marshal(map[string]any{
				"openapi":    "3.0.0",
				"info":       map[string]any{"title": "Kubernetes", "version": "v1.37.1"},
				"paths":      map[string]any{},
				"components": map[string]any{"schemas": schemas},
			})
			if err != nil {
				t.Fatal(err)
			}
			docs.OpenAPI[p] = doc
		}
	}
	return docs
}

// obj is shorthand for an OpenAPI object schema with properties.
func obj(props map[string]any, required ...string) map[string]any {
	m := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		m["required"] = required
	}
	return m
}

func str() map[string]any { return map[string]any{"type": "string"} }

func ref(name string) map[string]any { return map[string]any{"$ref": schemaRefPrefix + name} }

func kindDef(spec map[string]any) map[string]any {
	return obj(map[string]any{
		"apiVersion": str(),
		"kind":       str(),
		"metadata":   map[string]any{"allOf": []any{ref(objectMetaDef)}},
		"spec":       spec,
	})
}
