package schemagen

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/cedar-policy/cedar-go/types"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/kcedar/kcedar/internal/lib/parallel"
)

// OpenAPI extensions kcedar reads.
const (
	extGVK             = "x-kubernetes-group-version-kind"
	extAction          = "x-kubernetes-action"
	extIntOrString     = "x-kubernetes-int-or-string"
	extPreserveUnknown = "x-kubernetes-preserve-unknown-fields"
	extEmbedded        = "x-kubernetes-embedded-resource"

	schemaRefPrefix = "#/components/schemas/"
	objectMetaDef   = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"

	// maxDepth bounds the nesting of an OpenAPI schema kcedar follows.
	maxDepth = 100
)

// openAPIIndex is what Generate takes from the OpenAPI v3 documents.
type openAPIIndex struct {
	defs map[string]*spec.Schema // by definition name; first in sorted path order wins
	// byGVK maps a kind to its definition.
	byGVK map[schema.GroupVersionKind]string
	// connect maps the kind of a connect operation's options (PodExecOptions) to
	// the query parameters of its operations, by name.
	connect map[schema.GroupVersionKind]map[string]*spec.Schema
}

// parseOpenAPI parses every document with kube-openapi's spec3 (in parallel) and
// indexes them. Malformed documents are errors.
func parseOpenAPI(docs map[string][]byte) (*openAPIIndex, error) {
	paths := sortedKeys(docs)
	parsed := make([]*spec3.OpenAPI, len(paths))
	errs := make([]error, len(paths))
	parallel.For(len(paths), func(i int) {
		parsed[i], errs[i] = parseOpenAPIDoc(docs[paths[i]])
	})

	idx := &openAPIIndex{
		defs:    map[string]*spec.Schema{},
		byGVK:   map[schema.GroupVersionKind]string{},
		connect: map[schema.GroupVersionKind]map[string]*spec.Schema{},
	}
	for i, p := range paths {
		if errs[i] != nil {
			return nil, fmt.Errorf("OpenAPI v3 document %s: %w", p, errs[i])
		}
		doc := parsed[i]
		if doc.Components != nil {
			for _, name := range sortedKeys(doc.Components.Schemas) {
				s := doc.Components.Schemas[name]
				if s == nil {
					continue
				}
				if _, ok := idx.defs[name]; ok {
					continue
				}
				idx.defs[name] = s
				for _, gvk := range extensionGVKs(s.Extensions) {
					if _, ok := idx.byGVK[gvk]; !ok {
						idx.byGVK[gvk] = name
					}
				}
			}
		}
		if doc.Paths != nil {
			for _, pp := range sortedKeys(doc.Paths.Paths) {
				item := doc.Paths.Paths[pp]
				if item == nil {
					continue
				}
				for _, op := range []*spec3.Operation{item.Get, item.Put, item.Post, item.Delete, item.Options, item.Head, item.Patch} {
					if op == nil {
						continue
					}
					if a, _ := op.Extensions.GetString(extAction); a != "connect" {
						continue
					}
					for _, gvk := range extensionGVKs(op.Extensions) {
						params := idx.connect[gvk]
						if params == nil {
							params = map[string]*spec.Schema{}
							idx.connect[gvk] = params
						}
						for _, prm := range append(append([]*spec3.Parameter(nil), item.Parameters...), op.Parameters...) {
							if prm == nil || prm.In != "query" || prm.Schema == nil {
								continue
							}
							if _, ok := params[prm.Name]; !ok {
								params[prm.Name] = prm.Schema
							}
						}
					}
				}
			}
		}
	}
	return idx, nil
}

func parseOpenAPIDoc(data []byte) (doc *spec3.OpenAPI, err error) {
	// kube-openapi is not written for hostile input: never let it take the
	// process down.
	defer func() {
		if r := recover(); r != nil {
			doc, err = nil, fmt.Errorf("malformed document: %v", r)
		}
	}()
	doc = &spec3.OpenAPI{}
	if err := json.Unmarshal(data, doc); err != nil {
		return nil, err
	}
	if !strings.HasPrefix(doc.Version, "3.") {
		return nil, fmt.Errorf("not an OpenAPI v3 document (openapi: %q)", doc.Version)
	}
	return doc, nil
}

// extensionGVKs reads x-kubernetes-group-version-kind (a list, or a single object).
func extensionGVKs(ext spec.Extensions) []schema.GroupVersionKind {
	v, ok := ext[extGVK]
	if !ok {
		return nil
	}
	var list []any
	switch v := v.(type) {
	case []any:
		list = v
	case map[string]any:
		list = []any{v}
	}
	var out []schema.GroupVersionKind
	for _, e := range list {
		m, ok := e.(map[string]any)
		if !ok {
			continue
		}
		g, _ := m["group"].(string)
		ver, _ := m["version"].(string)
		k, _ := m["kind"].(string)
		if ver != "" && k != "" {
			out = append(out, schema.GroupVersionKind{Group: g, Version: ver, Kind: k})
		}
	}
	return out
}

// loc is where a schema sits, for warnings and names: an OpenAPI definition (or
// a synthetic root) and the property path below it.
type loc struct {
	def  string
	path []string
}

func (l loc) child(name string) loc {
	p := make([]string, len(l.path), len(l.path)+1)
	copy(p, l.path)
	return loc{def: l.def, path: append(p, name)}
}

func (l loc) String() string {
	if len(l.path) == 0 {
		return l.def
	}
	var b strings.Builder
	b.WriteString(l.def)
	for _, p := range l.path {
		if p == "[]" || p == "{}" {
			b.WriteString(p)
			continue
		}
		b.WriteByte('.')
		b.WriteString(p)
	}
	return b.String()
}

// defState tracks the conversion of one OpenAPI definition.
type defState struct {
	cedar      string // common type name, if it becomes one
	inProgress bool
	done       bool
	referenced bool // referenced while in progress: a recursive definition
	use        Type // what a $ref to it becomes; nil: untyped
	enum       []string
	reason     string // why it is untyped
}

// converter turns OpenAPI schemas into kcedar Types.
type converter struct {
	idx      *openAPIIndex
	state    map[string]*defState
	defs     map[string]Type   // common types by Cedar name
	origin   map[string]string // Cedar name -> definition
	maps     map[types.EntityType]*MapType
	mapKeys  map[types.EntityType]string // canonical form of each map's value type
	warnings []string
}

func newConverter(idx *openAPIIndex) *converter {
	return &converter{
		idx:     idx,
		state:   map[string]*defState{},
		defs:    map[string]Type{},
		origin:  map[string]string{},
		maps:    map[types.EntityType]*MapType{},
		mapKeys: map[types.EntityType]string{},
	}
}

func (c *converter) warnf(l loc, format string, args ...any) {
	c.warnings = append(c.warnings, l.String()+": "+fmt.Sprintf(format, args...))
}

// ref converts a $ref to the definition name: a RefType for records (and
// recursive definitions), the type itself for everything else. ok is false when
// the definition is untyped or missing (reason says why).
func (c *converter) ref(name string) (t Type, enum []string, reason string) {
	st := c.state[name]
	if st == nil {
		s, ok := c.idx.defs[name]
		if !ok {
			return nil, nil, fmt.Sprintf("$ref to unknown definition %q", name)
		}
		st = &defState{}
		c.state[name] = st
		c.convertDef(name, s, st)
	}
	if st.inProgress {
		st.referenced = true
		return &RefType{Name: c.cedarName(name, st)}, nil, ""
	}
	if st.use == nil {
		return nil, nil, st.reason
	}
	return st.use, st.enum, ""
}

// cedarName assigns the definition its common type name, escaping collisions.
func (c *converter) cedarName(def string, st *defState) string {
	if st.cedar != "" {
		return st.cedar
	}
	base := DefinitionTypeName(def)
	name := base
	for i := 2; ; i++ {
		if other, taken := c.origin[name]; !taken || other == def {
			break
		}
		name = fmt.Sprintf("%s_%d", base, i)
	}
	if name != base {
		c.warnf(loc{def: def}, "common type name %s is taken by %s; named %s", base, c.origin[base], name)
	}
	c.origin[name] = def
	st.cedar = name
	return name
}

func (c *converter) convertDef(name string, s *spec.Schema, st *defState) {
	st.inProgress = true
	t, enum, reason := c.convert(s, loc{def: name}, 0)
	st.inProgress = false
	st.done = true
	if t == nil {
		st.reason = reason
		if st.referenced {
			// A recursive definition that turned out untyped: its recursive uses
			// became RefTypes; give it an empty record so they still resolve.
			c.warnf(loc{def: name}, "recursive definition is untyped (%s): typed as an empty record", reason)
			t = &RecordType{Attributes: map[string]*Attribute{}}
		} else {
			return
		}
	}
	_, isRecord := t.(*RecordType)
	if isRecord || st.referenced {
		cn := c.cedarName(name, st)
		c.defs[cn] = t
		st.use = &RefType{Name: cn}
		return
	}
	st.use, st.enum = t, enum
}

func schemaRef(s *spec.Schema) string {
	return s.Ref.String()
}

func hasType(s *spec.Schema) bool {
	return len(s.Type) > 0 || len(s.Properties) > 0 || s.Items != nil || s.AdditionalProperties != nil
}

func isTrue(ext spec.Extensions, key string) bool {
	b, _ := ext.GetBool(key)
	return b
}

// convert maps one schema onto a Type. A nil Type means untyped, with the reason.
func (c *converter) convert(s *spec.Schema, l loc, depth int) (Type, []string, string) {
	if s == nil {
		return nil, nil, "no schema"
	}
	if depth > maxDepth {
		return nil, nil, fmt.Sprintf("nested deeper than %d levels", maxDepth)
	}
	if r := schemaRef(s); r != "" {
		return c.refString(r)
	}
	if !hasType(s) && len(s.AllOf) == 1 {
		if r := schemaRef(&s.AllOf[0]); r != "" {
			return c.refString(r)
		}
	}
	if isTrue(s.Extensions, extIntOrString) || s.Format == "int-or-string" {
		return StringType{}, nil, ""
	}
	if !hasType(s) {
		if alts := append(append([]spec.Schema(nil), s.OneOf...), s.AnyOf...); len(alts) > 0 && allScalar(alts) {
			// resource.Quantity (string or number) and the like: their string form.
			return StringType{}, nil, ""
		}
		switch {
		case len(s.AllOf) > 0:
			return nil, nil, "allOf without a single $ref"
		case len(s.OneOf) > 0 || len(s.AnyOf) > 0:
			return nil, nil, "oneOf/anyOf of non-scalar schemas"
		case isTrue(s.Extensions, extPreserveUnknown):
			return nil, nil, "x-kubernetes-preserve-unknown-fields without a type: any JSON value"
		default:
			return nil, nil, "no type: any JSON value"
		}
	}
	typ, err := singleType(s)
	if err != "" {
		return nil, nil, err
	}
	switch typ {
	case "string":
		if s.Format == "date-time" {
			return DatetimeType{}, nil, ""
		}
		return StringType{}, stringEnum(s.Enum), ""
	case "integer":
		return LongType{}, nil, ""
	case "number":
		return DecimalType{}, nil, ""
	case "boolean":
		return BoolType{}, nil, ""
	case "array":
		if s.Items == nil || s.Items.Schema == nil {
			if s.Items != nil && len(s.Items.Schemas) > 0 {
				return nil, nil, "tuple-typed array"
			}
			return nil, nil, "array without items"
		}
		elem, enum, reason := c.convert(s.Items.Schema, l.child("[]"), depth+1)
		if elem == nil {
			return nil, nil, "array of untyped items (" + reason + ")"
		}
		return &SetType{Element: elem}, enum, ""
	case "object":
		return c.convertObject(s, l, depth)
	default:
		return nil, nil, fmt.Sprintf("unsupported type %q", typ)
	}
}

func (c *converter) refString(r string) (Type, []string, string) {
	name, ok := strings.CutPrefix(r, schemaRefPrefix)
	if !ok {
		return nil, nil, fmt.Sprintf("unsupported $ref %q", r)
	}
	return c.ref(name)
}

// singleType returns the schema's type; properties or items without a type imply
// object or array, and "null" next to one other type is dropped.
func singleType(s *spec.Schema) (string, string) {
	var ts []string
	for _, t := range s.Type {
		if t != "null" {
			ts = append(ts, t)
		}
	}
	switch {
	case len(ts) == 1:
		return ts[0], ""
	case len(ts) > 1:
		return "", fmt.Sprintf("several types %v", []string(s.Type))
	case len(s.Properties) > 0 || s.AdditionalProperties != nil:
		return "object", ""
	case s.Items != nil:
		return "array", ""
	}
	return "", "no type"
}

func allScalar(alts []spec.Schema) bool {
	for i := range alts {
		a := &alts[i]
		if schemaRef(a) != "" || len(a.Type) != 1 {
			return false
		}
		switch a.Type[0] {
		case "string", "integer", "number":
		default:
			return false
		}
	}
	return true
}

func stringEnum(vals []any) []string {
	var out []string
	for _, v := range vals {
		if s, ok := v.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func (c *converter) convertObject(s *spec.Schema, l loc, depth int) (Type, []string, string) {
	embedded := isTrue(s.Extensions, extEmbedded)
	preserve := isTrue(s.Extensions, extPreserveUnknown)
	ap := s.AdditionalProperties
	if len(s.Properties) == 0 && !embedded {
		if ap != nil && (ap.Schema != nil || ap.Allows) {
			if ap.Schema == nil {
				return nil, nil, "map with untyped values (additionalProperties: true)"
			}
			val, _, reason := c.convert(ap.Schema, l.child("{}"), depth+1)
			if val == nil {
				return nil, nil, "map with untyped values (" + reason + ")"
			}
			return c.mapType(val, l), nil, ""
		}
		switch {
		case preserve:
			c.warnf(l, "x-kubernetes-preserve-unknown-fields object without properties: typed as an empty record, its fields are untyped")
		case len(l.path) == 0:
			c.warnf(l, "object without properties: typed as an empty record, its fields are untyped")
		}
		return &RecordType{Attributes: map[string]*Attribute{}}, nil, ""
	}
	rec := &RecordType{Attributes: make(map[string]*Attribute, len(s.Properties)+3)}
	required := map[string]bool{}
	for _, r := range s.Required {
		required[r] = true
	}
	for _, name := range sortedKeys(s.Properties) {
		p := s.Properties[name]
		t, enum, reason := c.convert(&p, l.child(name), depth+1)
		if t == nil {
			c.warnf(l.child(name), "untyped (%s): attribute omitted", reason)
			continue
		}
		rec.Attributes[name] = &Attribute{Type: t, Optional: !required[name] || p.Nullable, Enum: enum}
	}
	for _, name := range sortedKeys(s.Properties) {
		if _, typed := rec.Attributes[name]; typed {
			p := s.Properties[name]
			c.addReading(rec, name, &p, l, depth)
		}
	}
	if embedded {
		// x-kubernetes-embedded-resource: an object with apiVersion, kind, metadata.
		for _, a := range []string{AttrAPIVersion, AttrKind} {
			if _, ok := rec.Attributes[a]; !ok {
				rec.Attributes[a] = &Attribute{Type: StringType{}, Optional: !required[a]}
			}
		}
		if _, ok := rec.Attributes[AttrMetadata]; !ok {
			if meta, _, _ := c.ref(objectMetaDef); meta != nil {
				rec.Attributes[AttrMetadata] = &Attribute{Type: meta, Optional: true}
			}
		}
	}
	if ap != nil && (ap.Schema != nil || ap.Allows) {
		c.warnf(l, "additionalProperties next to properties: only the properties are typed")
	}
	if preserve {
		c.warnf(l, "x-kubernetes-preserve-unknown-fields: only the declared properties are typed")
	}
	return rec, nil, ""
}

// mapType returns the map entity type whose tags have type val, declaring it
// on first use. Names derive from the value type (k8s::StringMap,
// k8s::maps::LongMap, k8s::maps::io::k8s::api::core::v1::FooMap,
// k8s::maps::SetOfStringMap); maps of inline records are named after where they
// appear.
func (c *converter) mapType(val Type, l loc) *MapType {
	ns, base := c.typeLabel(val, l)
	var et string
	switch {
	case len(ns) == 0 && base == "String":
		et = string(StringMapType)
	case len(ns) == 0:
		et = MapsNamespace + "::" + base + "Map"
	default:
		et = MapsNamespace + "::" + strings.Join(ns, "::") + "::" + base + "Map"
	}
	key := typeKey(val)
	name := types.EntityType(et)
	for i := 2; ; i++ {
		prev, ok := c.mapKeys[name]
		if !ok {
			break
		}
		if prev == key {
			return c.maps[name]
		}
		name = types.EntityType(fmt.Sprintf("%s_%d", et, i))
	}
	if string(name) != et {
		c.warnf(l, "map entity type %s already has other tags; named %s", et, name)
	}
	m := &MapType{EntityType: name, Value: val}
	c.maps[name] = m
	c.mapKeys[name] = key
	return m
}

// typeLabel names a type for map entity names: namespace labels and a base name.
func (c *converter) typeLabel(t Type, l loc) ([]string, string) {
	switch t := t.(type) {
	case StringType:
		return nil, "String"
	case LongType:
		return nil, "Long"
	case BoolType:
		return nil, "Bool"
	case DecimalType:
		return nil, "Decimal"
	case DatetimeType:
		return nil, "Datetime"
	case QuantityReadingType:
		return nil, "Quantity"
	case IntOrStringReadingType:
		return nil, "IntOrString"
	case *SetType:
		ns, base := c.typeLabel(t.Element, l.child("[]"))
		return ns, "SetOf" + base
	case *RefType:
		ns, base := splitPath(strings.TrimPrefix(t.Name, OpenAPINamespace+"::"))
		if ns == "" {
			return nil, base
		}
		return strings.Split(ns, "::"), base
	case *MapType:
		p := string(t.EntityType)
		if rest, ok := strings.CutPrefix(p, MapsNamespace+"::"); ok {
			p = rest
		} else {
			p = strings.TrimPrefix(p, Namespace+"::")
		}
		ns, base := splitPath(p)
		if ns == "" {
			return nil, base
		}
		return strings.Split(ns, "::"), base
	default:
		// An inline record: named after its place.
		labels := strings.Split(DefinitionTypeName(l.def), "::")[2:]
		parts := []string{labels[len(labels)-1]}
		for _, p := range l.path {
			switch p {
			case "[]":
				parts = append(parts, "items")
			case "{}":
				parts = append(parts, "values")
			default:
				parts = append(parts, Ident(p))
			}
		}
		return labels[:len(labels)-1], strings.Join(parts, "_")
	}
}

// typeKey is a canonical string form of a type, for comparing map value types.
func typeKey(t Type) string {
	var b strings.Builder
	writeTypeKey(&b, t)
	return b.String()
}

func writeTypeKey(b *strings.Builder, t Type) {
	switch t := t.(type) {
	case StringType:
		b.WriteString("String")
	case LongType:
		b.WriteString("Long")
	case BoolType:
		b.WriteString("Bool")
	case DecimalType:
		b.WriteString("decimal")
	case DatetimeType:
		b.WriteString("datetime")
	case QuantityReadingType:
		b.WriteString(QuantityTypeName)
	case IntOrStringReadingType:
		b.WriteString(IntOrStringTypeName)
	case *SetType:
		b.WriteString("Set<")
		writeTypeKey(b, t.Element)
		b.WriteString(">")
	case *MapType:
		b.WriteString("Map:" + string(t.EntityType))
	case *RefType:
		b.WriteString("Ref:" + t.Name)
	case *RecordType:
		b.WriteString("{")
		names := make([]string, 0, len(t.Attributes))
		for n := range t.Attributes {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			a := t.Attributes[n]
			fmt.Fprintf(b, "%q", n)
			if a.Optional {
				b.WriteString("?")
			}
			b.WriteString(":")
			writeTypeKey(b, a.Type)
			if len(a.Enum) > 0 {
				fmt.Fprintf(b, "%q", a.Enum)
			}
			b.WriteString(",")
		}
		b.WriteString("}")
	default:
		fmt.Fprintf(b, "%T", t)
	}
}
