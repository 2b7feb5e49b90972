package schemagen

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/cedar-policy/cedar-go/types"
	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kcedar/kcedar/internal/lib/cedarx/schema/resolved"
)

var widgetKey = ResourceKey{Group: "example.com", Resource: "widgets"}

// widgetSchema generates a schema with one resource, example.com/v1 widgets,
// whose spec is the given schema.
func widgetSchema(t *testing.T, spec map[string]any, defs map[string]any) *Schema {
	t.Helper()
	all := map[string]any{"example.com.v1.Widget": kindDef(spec)}
	for k, v := range defs {
		all[k] = v
	}
	s, err := Generate(fakeDocs(t, []fakeResource{{group: "example.com", version: "v1", resource: "widgets", kind: "Widget", namespaced: true}}, all))
	if err != nil {
		t.Fatal(err)
	}
	resolveBoth(t, s) // every schema must print, parse and resolve
	return s
}

func hasWarning(s *Schema, substrings ...string) bool {
	for _, w := range s.Warnings {
		ok := true
		for _, sub := range substrings {
			ok = ok && strings.Contains(w, sub)
		}
		if ok {
			return true
		}
	}
	return false
}

func TestTypeMapping(t *testing.T) {
	spec := obj(map[string]any{
		"s":        str(),
		"ts":       map[string]any{"type": "string", "format": "date-time"},
		"b64":      map[string]any{"type": "string", "format": "byte"},
		"i":        map[string]any{"type": "integer", "format": "int64"},
		"n":        map[string]any{"type": "number", "format": "double"},
		"bool":     map[string]any{"type": "boolean"},
		"enum":     map[string]any{"type": "string", "enum": []any{"A", "B|C", ""}},
		"ienum":    map[string]any{"type": "integer", "enum": []any{1, 2}},
		"strs":     map[string]any{"type": "array", "items": str()},
		"enums":    map[string]any{"type": "array", "items": map[string]any{"type": "string", "enum": []any{"x", "y"}}},
		"objs":     map[string]any{"type": "array", "items": obj(map[string]any{"a": str()}, "a")},
		"nested":   map[string]any{"type": "array", "items": map[string]any{"type": "array", "items": map[string]any{"type": "integer"}}},
		"req":      str(),
		"nullable": map[string]any{"type": "string", "nullable": true},
		"reqnull":  map[string]any{"type": "string", "nullable": true},
		"smap":     map[string]any{"type": "object", "additionalProperties": str()},
		"qmap":     map[string]any{"type": "object", "additionalProperties": ref("io.k8s.apimachinery.pkg.api.resource.Quantity")},
		"lmap":     map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "integer"}},
		"setmap":   map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "array", "items": str()}},
		"refmap":   map[string]any{"type": "object", "additionalProperties": ref("example.com.v1.Item")},
		"objmap":   map[string]any{"type": "object", "additionalProperties": obj(map[string]any{"x": str()})},
		"mapmap":   map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "object", "additionalProperties": str()}},
		"ios":      map[string]any{"x-kubernetes-int-or-string": true, "anyOf": []any{map[string]any{"type": "integer"}, str()}},
		"ios2":     ref("io.k8s.apimachinery.pkg.util.intstr.IntOrString"),
		"qty":      ref("io.k8s.apimachinery.pkg.api.resource.Quantity"),
		"time":     map[string]any{"allOf": []any{ref("io.k8s.apimachinery.pkg.apis.meta.v1.Time")}, "default": map[string]any{}},
		"item":     map[string]any{"allOf": []any{ref("example.com.v1.Item")}},
		"enumref":  ref("example.com.v1.Mode"),
		"props":    map[string]any{"properties": map[string]any{"a": str()}},
		"validated": map[string]any{"type": "object", "properties": map[string]any{"a": str()},
			"allOf": []any{map[string]any{"required": []any{"a"}}}, "oneOf": []any{map[string]any{"required": []any{"a"}}}},
		"nulltype": map[string]any{"type": []any{"string", "null"}},
	}, "req", "reqnull")
	defs := map[string]any{
		"io.k8s.apimachinery.pkg.api.resource.Quantity":     map[string]any{"oneOf": []any{str(), map[string]any{"type": "number"}}},
		"io.k8s.apimachinery.pkg.util.intstr.IntOrString":   map[string]any{"format": "int-or-string", "oneOf": []any{map[string]any{"type": "integer"}, str()}},
		"io.k8s.apimachinery.pkg.apis.meta.v1.Time":         map[string]any{"type": "string", "format": "date-time"},
		"example.com.v1.Item":                               obj(map[string]any{"name": str()}, "name"),
		"example.com.v1.Mode":                               map[string]any{"type": "string", "enum": []any{"On", "Off"}},
		"example.com.v1.Unused":                             obj(map[string]any{"name": str()}),
		"io.k8s.apimachinery.pkg.apis.meta.v1.UnusedToo":    obj(map[string]any{"x": str()}),
		"io.k8s.apimachinery.pkg.apis.meta.v1.ManagedField": obj(map[string]any{"x": str()}),
	}
	s := widgetSchema(t, spec, defs)
	for path, want := range map[string]string{
		"s":              "String",
		"ts":             "datetime",
		"b64":            "String",
		"i":              "Long",
		"n":              "decimal",
		"bool":           "Bool",
		"enum":           "String",
		"ienum":          "Long",
		"strs":           "Set<String>",
		"enums":          "Set<String>",
		"objs":           `Set<{"a":String,}>`,
		"nested":         "Set<Set<Long>>",
		"smap":           "Map:k8s::StringMap",
		"qmap":           "Map:k8s::StringMap",
		"lmap":           "Map:k8s::maps::LongMap",
		"setmap":         "Map:k8s::maps::SetOfStringMap",
		"refmap":         "Map:k8s::maps::example::com::v1::ItemMap",
		"objmap":         "Map:k8s::maps::example::com::v1::Widget_spec_objmapMap",
		"mapmap":         "Map:k8s::maps::StringMapMap",
		"ios":            "String",
		"ios2":           "String",
		"qty":            "String",
		"time":           "datetime",
		"item":           `{"name":String,}`,
		"enumref":        "String",
		"props":          `{"a"?:String,}`,
		"validated":      `{"a"?:String,}`,
		"nulltype":       "String",
		"refmap.{}":      `{"name":String,}`,
		"objmap.{}":      `{"x"?:String,}`,
		"mapmap.{}":      "Map:k8s::StringMap",
		"setmap.{}":      "Set<String>",
		"objs.[].a":      "String",
		"nested.[].[]":   "Long",
		"item.name":      "String",
		"refmap.{}.name": "String",
		"mapmap.{}.{}":   "String",
		"qmap.{}":        "String",
		"lmap.{}":        "Long",
		"smap.{}":        "String",
		"enums.[]":       "String",
		"objmap.{}.x":    "String",
		"props.a":        "String",
		"validated.a":    "String",
	} {
		typ, _ := objectField(t, s, widgetKey, "v1", append([]string{"spec"}, strings.Split(path, ".")...)...)
		if got := typeKey(typ); got != want {
			t.Errorf("%s: %s, want %s", path, got, want)
		}
	}
	attr := func(name string) *Attribute {
		_, a := objectField(t, s, widgetKey, "v1", "spec", name)
		return a
	}
	if a := attr("req"); a.Optional {
		t.Error("required attribute is optional")
	}
	if a := attr("reqnull"); !a.Optional {
		t.Error("nullable required attribute is not optional")
	}
	if a := attr("s"); !a.Optional {
		t.Error("attribute not in required is not optional")
	}
	if a := attr("enum"); !slices.Equal(a.Enum, []string{"A", "B|C", ""}) {
		t.Errorf("enum %q", a.Enum)
	}
	if a := attr("enums"); !slices.Equal(a.Enum, []string{"x", "y"}) {
		t.Errorf("set enum %q", a.Enum)
	}
	if a := attr("enumref"); !slices.Equal(a.Enum, []string{"On", "Off"}) {
		t.Errorf("enum of a referenced definition %q", a.Enum)
	}
	if a := attr("ienum"); a.Enum != nil {
		t.Errorf("integer enum kept as %q", a.Enum)
	}
	// Only reachable definitions become common types; scalars are inlined.
	for name, o := range s.OpenAPINames {
		if strings.Contains(o, "Unused") || strings.Contains(o, "ManagedField") || strings.Contains(o, "Quantity") || strings.Contains(o, "Time") || strings.Contains(o, "Mode") {
			t.Errorf("common type %s (%s) should not exist", name, o)
		}
	}
	if _, ok := s.Definitions[DefinitionTypeName("example.com.v1.Item")]; !ok {
		t.Error("example.com.v1.Item is not a common type")
	}
	if len(s.Warnings) != 0 {
		t.Errorf("warnings: %q", s.Warnings)
	}
	// Enums survive printing (with their "|" and empty values).
	p := roundTripModel(t, s)
	_, a, _ := modelType(p, p.Resources[widgetKey].Versions["v1"].Fields, "spec", "enum")
	if !slices.Equal(a.Enum, []string{"A", "B|C", ""}) {
		t.Errorf("printed enum %q", a.Enum)
	}
}

// roundTripModel prints s in both formats and checks that ParseSchema rebuilds
// it; it returns the model parsed from the Cedar text.
func roundTripModel(t *testing.T, s *Schema) *Schema {
	t.Helper()
	text, js, _, _ := resolveBoth(t, s)
	var out *Schema
	for _, in := range [][]byte{text, js} {
		p, err := ParseSchema(in)
		if err != nil {
			t.Fatal(err)
		}
		p.Warnings = s.Warnings
		if !reflect.DeepEqual(p, s) {
			t.Fatalf("ParseSchema does not rebuild the model")
		}
		if out == nil {
			out = p
		}
	}
	return out
}

func TestUntypedAndPartlyTyped(t *testing.T) {
	spec := obj(map[string]any{
		"any":      map[string]any{},
		"anyPUF":   map[string]any{"x-kubernetes-preserve-unknown-fields": true},
		"emptyObj": map[string]any{"type": "object"},
		"pufObj":   map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true},
		"pufProps": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": map[string]any{"a": str()}},
		"embedded": map[string]any{"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true},
		"anyMap":   map[string]any{"type": "object", "additionalProperties": true},
		"anyMap2":  map[string]any{"type": "object", "additionalProperties": map[string]any{}},
		"both":     map[string]any{"type": "object", "properties": map[string]any{"a": str()}, "additionalProperties": str()},
		"anyItems": map[string]any{"type": "array", "items": map[string]any{}},
		"noItems":  map[string]any{"type": "array"},
		"tuple":    map[string]any{"type": "array", "items": []any{str(), str()}},
		"mixed":    map[string]any{"oneOf": []any{str(), obj(map[string]any{"a": str()})}},
		"allOf2":   map[string]any{"allOf": []any{ref("example.com.v1.A"), ref("example.com.v1.A")}},
		"badRef":   ref("nope.Missing"),
		"remote":   map[string]any{"$ref": "other.json#/x"},
		"twoTypes": map[string]any{"type": []any{"string", "integer"}},
		"weird":    map[string]any{"type": "file"},
		"raw":      ref("io.k8s.apimachinery.pkg.runtime.RawExtension"),
	})
	s := widgetSchema(t, spec, map[string]any{
		"example.com.v1.A": obj(map[string]any{"a": str()}),
		"io.k8s.apimachinery.pkg.runtime.RawExtension": map[string]any{"type": "object"},
	})
	fields, _, _ := modelType(s, s.Resources[widgetKey].Versions["v1"].Fields, "spec")
	attrs := fields.(*RecordType).Attributes
	for _, gone := range []string{"any", "anyPUF", "anyMap", "anyMap2", "anyItems", "noItems", "tuple", "mixed", "allOf2", "badRef", "remote", "twoTypes", "weird"} {
		if _, ok := attrs[gone]; ok {
			t.Errorf("%s is typed", gone)
		}
		if !hasWarning(s, "example.com.v1.Widget.spec."+gone+":", "attribute omitted") {
			t.Errorf("no warning for %s: %q", gone, s.Warnings)
		}
	}
	for path, want := range map[string]string{
		"emptyObj": "{}",
		"pufObj":   "{}",
		"pufProps": `{"a"?:String,}`,
		"embedded": `{"apiVersion"?:String,"kind"?:String,"metadata"?:Ref:` + DefinitionTypeName(objectMetaDef) + `,}`,
		"both":     `{"a"?:String,}`,
		"raw":      "{}",
	} {
		typ, _ := objectField(t, s, widgetKey, "v1", "spec", path)
		if got := typeKey(typ); got != want {
			t.Errorf("%s: %s, want %s", path, got, want)
		}
	}
	for _, w := range [][]string{
		{"spec.pufObj:", "preserve-unknown-fields"},
		{"spec.pufProps:", "preserve-unknown-fields"},
		{"spec.embedded:", "preserve-unknown-fields"},
		{"spec.both:", "additionalProperties"},
		{"RawExtension:", "empty record"},
	} {
		if !hasWarning(s, w...) {
			t.Errorf("no warning %q in %q", w, s.Warnings)
		}
	}
	if hasWarning(s, "spec.emptyObj") {
		t.Error("an empty object of a structural schema is exact, not worth a warning")
	}
}

// Recursive definitions are cut deterministically, with a warning per cut,
// and recursion through maps (entity tags) is kept.
func TestRecursionCut(t *testing.T) {
	defs := map[string]any{
		"example.com.v1.Node": obj(map[string]any{
			"name":     str(),
			"children": map[string]any{"type": "array", "items": ref("example.com.v1.Node")},
			"next":     ref("example.com.v1.Node"),
			"byName":   map[string]any{"type": "object", "additionalProperties": ref("example.com.v1.Node")},
			"other":    ref("example.com.v1.Other"),
		}),
		"example.com.v1.Other": obj(map[string]any{
			"back": ref("example.com.v1.Node"),
			"x":    str(),
		}),
	}
	var first []byte
	for i := range 3 {
		s := widgetSchema(t, obj(map[string]any{"root": ref("example.com.v1.Node"), "other": ref("example.com.v1.Other")}), defs)
		node := s.Definitions[DefinitionTypeName("example.com.v1.Node")].(*RecordType)
		other := s.Definitions[DefinitionTypeName("example.com.v1.Other")].(*RecordType)
		// DFS from Node (sorted first): Node.children and Node.next are back
		// edges, then Node.other -> Other.back -> Node is a back edge.
		for _, a := range []string{"children", "next"} {
			if _, ok := node.Attributes[a]; ok {
				t.Errorf("Node.%s not cut", a)
			}
			if !hasWarning(s, "example.com.v1.Node."+a+":", "recursive reference to example.com.v1.Node cut") {
				t.Errorf("no warning for Node.%s: %q", a, s.Warnings)
			}
		}
		if _, ok := other.Attributes["back"]; ok {
			t.Error("Other.back not cut")
		}
		for _, a := range []string{"name", "byName", "other"} {
			if _, ok := node.Attributes[a]; !ok {
				t.Errorf("Node.%s cut", a)
			}
		}
		if typ, _ := objectField(t, s, widgetKey, "v1", "spec", "root", "byName", "{}", "byName", "{}", "name"); typeKey(typ) != "String" {
			t.Error("recursion through a map is not typed")
		}
		out, _ := s.MarshalCedar()
		if i == 0 {
			first = out
		} else if string(out) != string(first) {
			t.Fatal("cuts are not deterministic")
		}
		roundTripModel(t, s)
	}
}

// Attribute names are JSON property names, whatever they are: the printers
// quote what is not an identifier and the parsers read it back.
func TestAttributeNames(t *testing.T) {
	names := []string{"$ref", "x-kubernetes-foo", "if", "in", "true", "__cedar", "a b", "ünïcödé", "quote\"d", `back\slash`,
		"new\nline", "tab\t", "", "1abc", "principal", "namespace", "entity", "type", "String", "Set", "@x", "a::b", "is"}
	props := map[string]any{}
	for _, n := range names {
		props[n] = str()
	}
	s := widgetSchema(t, obj(props, "if", ""), nil)
	_, _, fromText, fromJSON := resolveBoth(t, s)
	for _, rs := range []*resolved.Schema{fromText, fromJSON} {
		for _, n := range names {
			if _, err := resolvedAttr(rs, ResourceEntityType("example.com", "widgets", ""), "object", "v1", "spec", n); err != nil {
				t.Errorf("%q: %v", n, err)
			}
		}
	}
	roundTripModel(t, s)
}

// API groups that would map into kcedar's namespaces are escaped, and odd
// group, resource and version names still give a valid schema.
func TestGroupEscapes(t *testing.T) {
	cases := []struct {
		group, resource, sub string
		want                 types.EntityType
	}{
		{"", "pods", "", "core::pods"},
		{"", "pods", "exec", "core::pods_exec"},
		{"apps", "deployments", "scale", "apps::deployments_scale"},
		{"networking.k8s.io", "ingresses", "", "io::k8s::networking::ingresses"},
		{"cert-manager.io", "certificates", "", "io::cert_manager::certificates"},
		{"resource.k8s.io", "resourceclaims", "", "io::k8s::resource::resourceclaims"},
		{"k8s", "things", "", "_k8s::things"},
		{"core", "things", "", "_core::things"},
		{"x.k8s", "things", "", "_k8s::x::things"},
		{"openapi.k8s", "things", "", "_k8s::openapi::things"},
		{"x.core", "things", "", "_core::x::things"},
		{"1password.com", "items", "", "com::_1password::items"},
		{"if.example", "ins", "is", "example::_if::ins__is"},
		{"example.com", "true", "", "com::example::_true"},
		{"example.com", "String", "", "com::example::_String"},
	}
	var res []fakeResource
	defs := map[string]any{}
	for _, c := range cases {
		if got := ResourceEntityType(c.group, c.resource, c.sub); got != c.want {
			t.Errorf("%s/%s/%s: %s, want %s", c.group, c.resource, c.sub, got, c.want)
		}
		if c.sub != "" {
			continue
		}
		kind := "K" + strings.ReplaceAll(Ident(c.group+c.resource), "_", "")
		res = append(res, fakeResource{group: c.group, version: "v1", resource: c.resource, kind: kind, namespaced: true})
		g := c.group
		if g == "" {
			g = "core"
		}
		defs[g+".v1."+kind] = kindDef(obj(map[string]any{"a": str()}))
	}
	// Subresources and odd versions.
	res = append(res, fakeResource{group: "if.example", version: "v1", resource: "ins", kind: "Ins",
		subresources: []apidiscoveryv2.APISubresourceDiscovery{{Subresource: "is", Verbs: []string{"get"}, ResponseKind: &metav1.GroupVersionKind{Kind: "Ins"}}}})
	defs["if.example.v1.Ins"] = kindDef(obj(map[string]any{"a": str()}))
	res = append(res, fakeResource{group: "example.com", version: "v1-beta.2", resource: "odd", kind: "Odd"})
	defs["example.com.v1-beta.2.Odd"] = kindDef(obj(map[string]any{"a": str()}))
	s, err := Generate(fakeDocs(t, res, defs))
	if err != nil {
		t.Fatal(err)
	}
	_, _, rs, _ := resolveBoth(t, s)
	for _, c := range cases {
		if c.sub != "" && c.group != "if.example" {
			continue
		}
		if _, ok := rs.Entities[c.want]; !ok {
			t.Errorf("%s missing from the printed schema", c.want)
		}
	}
	// Nothing but kcedar's own types lives in k8s::.
	for et := range rs.Entities {
		if strings.HasPrefix(string(et), "k8s::") {
			e := rs.Entities[et]
			if _, isRes := e.Annotations[AnnotationResource]; isRes {
				t.Errorf("resource entity %s in kcedar's namespace", et)
			}
		}
	}
	if _, err := resolvedAttr(rs, ResourceEntityType("example.com", "odd", ""), "object", "v1-beta.2"); err != nil {
		t.Error(err)
	}
	roundTripModel(t, s)
}

func TestNameCollisions(t *testing.T) {
	// Two definitions whose Cedar names collide, and two maps of different
	// inline records that get the same name.
	defs := map[string]any{
		"example.com.v1.a-b": obj(map[string]any{"x": str()}),
		"example.com.v1.a_b": obj(map[string]any{"y": str()}),
	}
	spec := obj(map[string]any{
		"one": ref("example.com.v1.a-b"),
		"two": ref("example.com.v1.a_b"),
		"m-x": map[string]any{"type": "object", "additionalProperties": obj(map[string]any{"p": str()})},
		"m_x": map[string]any{"type": "object", "additionalProperties": obj(map[string]any{"q": str()})},
	})
	s := widgetSchema(t, spec, defs)
	one, _ := objectField(t, s, widgetKey, "v1", "spec", "one", "x")
	two, _ := objectField(t, s, widgetKey, "v1", "spec", "two", "y")
	if one == nil || two == nil {
		t.Fatal("colliding definitions lost")
	}
	if !hasWarning(s, "common type name") || !hasWarning(s, "map entity type") {
		t.Errorf("collisions not reported: %q", s.Warnings)
	}
	p, _ := objectField(t, s, widgetKey, "v1", "spec", "m-x", "{}", "p")
	q, _ := objectField(t, s, widgetKey, "v1", "spec", "m_x", "{}", "q")
	if p == nil || q == nil {
		t.Fatal("colliding maps lost")
	}
	roundTripModel(t, s)
}

func TestMalformedInput(t *testing.T) {
	good := func() *Documents {
		return fakeDocs(t, []fakeResource{{group: "example.com", version: "v1", resource: "widgets", kind: "Widget"}},
			map[string]any{"example.com.v1.Widget": kindDef(obj(map[string]any{"a": str()}))})
	}
	if _, err := Generate(good()); err != nil {
		t.Fatal(err)
	}
	cases := map[string]func(d *Documents){
		"not JSON":      func(d *Documents) { d.OpenAPI["apis/example.com/v1"] = []byte("{nope") },
		"not an object": func(d *Documents) { d.OpenAPI["apis/example.com/v1"] = []byte(`[1,2]`) },
		"OpenAPI v2":    func(d *Documents) { d.OpenAPI["apis/example.com/v1"] = []byte(`{"swagger":"2.0","definitions":{}}`) },
		"wrong field types": func(d *Documents) {
			d.OpenAPI["apis/example.com/v1"] = []byte(`{"openapi":"3.0.0","components":{"schemas":{"a":{"type":{"x":1}}}}}`)
		},
		"bad properties": func(d *Documents) {
			d.OpenAPI["apis/example.com/v1"] = []byte(`{"openapi":"3.0.0","components":{"schemas":{"a":{"properties":[1]}}}}`)
		},
		"no ObjectMeta": func(d *Documents) {
			d.OpenAPI["apis/example.com/v1"] = []byte(`{"openapi":"3.0.0","components":{"schemas":{}}}`)
		},
		"no groups":       func(d *Documents) { d.API, d.APIs = nil, nil },
		"no version name": func(d *Documents) { d.APIs.Items[0].Versions[0].Version = "" },
		"bad resource":    func(d *Documents) { d.APIs.Items[0].Versions[0].Resources[0].Resource = "a/b" },
		"bad scope":       func(d *Documents) { d.APIs.Items[0].Versions[0].Resources[0].Scope = "Galaxy" },
		"empty resource":  func(d *Documents) { d.APIs.Items[0].Versions[0].Resources[0].Resource = "" },
		"bad subresource": func(d *Documents) {
			d.APIs.Items[0].Versions[0].Resources[0].Subresources = []apidiscoveryv2.APISubresourceDiscovery{{Subresource: ""}}
		},
	}
	for name, mutate := range cases {
		d := good()
		mutate(d)
		if _, err := Generate(d); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := Generate(nil); err == nil {
		t.Error("nil documents: no error")
	}
	// Deep nesting is cut, not a stack overflow.
	deep := map[string]any{"type": "string"}
	for range 1000 {
		deep = obj(map[string]any{"d": deep})
	}
	s := widgetSchema(t, deep, nil)
	if !hasWarning(s, "nested deeper than") {
		t.Error("deep nesting not reported")
	}
	// A resource whose kind has no definition keeps its entity, without object.
	d := fakeDocs(t, []fakeResource{{group: "example.com", version: "v1", resource: "ghosts", kind: "Ghost"}}, nil)
	s, err := Generate(d)
	if err != nil {
		t.Fatal(err)
	}
	if r := s.Resources[ResourceKey{Group: "example.com", Resource: "ghosts"}]; r == nil || len(r.Versions) != 0 {
		t.Errorf("ghosts: %+v", r)
	}
	if !hasWarning(s, "Ghost", "no object type") {
		t.Errorf("no warning: %q", s.Warnings)
	}
	resolveBoth(t, s)
}

func TestReadDirErrors(t *testing.T) {
	valid, _ := json.Marshal(map[string]any{"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "items": []any{}})
	for name, files := range map[string]map[string]string{
		"empty":              {},
		"no openapi":         {"discovery/apis.json": string(valid)},
		"bad discovery":      {"discovery/apis.json": `{"kind":"APIGroupList"}`, "openapi/v3/apis.json": `{}`},
		"garbage discovery":  {"discovery/api.json": `{`, "openapi/v3/apis.json": `{}`},
		"garbage openapi":    {"discovery/apis.json": string(valid), "openapi/v3/apis/x/v1.json": `{`},
		"empty openapi tree": {"discovery/apis.json": string(valid), "openapi/v3/README": `x`},
	} {
		fsys := fstestMap(files)
		if _, err := ReadDir(fsys); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func fstestMap(files map[string]string) fstest.MapFS {
	m := fstest.MapFS{}
	for name, data := range files {
		m[name] = &fstest.MapFile{Data: []byte(data)}
	}
	return m
}

func TestParseSchemaBoundsNesting(t *testing.T) {
	deep := "namespace k8s { entity User { a: " + strings.Repeat("Set<", 100000) + "String" + strings.Repeat(">", 100000) + " }; }"
	if _, err := ParseSchema([]byte(deep)); err == nil || !strings.Contains(err.Error(), "nested deeper") {
		t.Fatalf("deep nesting: %v", err)
	}
	deepJSON := strings.Repeat(`{"a":`, 100000) + "1" + strings.Repeat("}", 100000)
	if _, err := ParseSchema([]byte(deepJSON)); err == nil || !strings.Contains(err.Error(), "nested deeper") {
		t.Fatalf("deep JSON nesting: %v", err)
	}
	// Brackets in strings and comments do not count.
	if err := checkNesting([]byte(`"{{{{" // [[[[
{ "\"{" }`), 2); err != nil {
		t.Error(err)
	}
	// Block comments (cedar-go's schema parser reads them) hide brackets too,
	// closers included: "/* >>>> */" must not buy depth.
	if err := checkNesting([]byte("/* [[[[\n{{{{ */ { /* \" */ }"), 2); err != nil {
		t.Error(err)
	}
	if err := checkNesting([]byte("/* >>>> */ {{{"), 2); err == nil {
		t.Error("closers in a block comment lowered the depth")
	}
	if err := checkNesting([]byte("{ /* [[[ "), 2); err == nil {
		t.Error("unterminated block comment accepted")
	}
}

func TestCustomVerbs(t *testing.T) {
	s, err := Generate(fakeDocs(t, []fakeResource{
		{group: "example.com", version: "v1", resource: "widgets", kind: "Widget", verbs: []string{"get", "frobnicate"},
			subresources: []apidiscoveryv2.APISubresourceDiscovery{{Subresource: "poke", Verbs: []string{"poke"}, ResponseKind: &metav1.GroupVersionKind{Kind: "Widget"}}}},
	}, map[string]any{"example.com.v1.Widget": kindDef(obj(map[string]any{"a": str()}))}))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"frobnicate", "poke"} {
		if !slices.Contains(s.Verbs, v) {
			t.Errorf("verb %s missing from %v", v, s.Verbs)
		}
	}
	_, _, rs, _ := resolveBoth(t, s)
	a, ok := rs.Actions[ActionUID("frobnicate")]
	if !ok || !slices.Contains(a.AppliesTo.Resources, ResourceEntityType("example.com", "widgets", "")) ||
		slices.Contains(a.AppliesTo.Resources, NonResourceURLType) {
		t.Errorf("frobnicate: %+v", a.AppliesTo)
	}
	if a, ok := rs.Actions[ActionUID("poke")]; !ok || !slices.Contains(a.AppliesTo.Resources, ResourceEntityType("example.com", "widgets", "poke")) {
		t.Errorf("poke: %+v", a.AppliesTo)
	}
}
