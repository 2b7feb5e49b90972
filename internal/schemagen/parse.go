package schemagen

import (
	"bytes"
	"fmt"
	"sort"
	"strings"

	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/lib/cedarlex"
	cedarschema "github.com/kcedar/kcedar/internal/lib/cedarx/schema"
	"github.com/kcedar/kcedar/internal/lib/cedarx/schema/ast"
)

// Bounds on the schema files ParseSchema accepts: Cedar's parsers have no
// nesting limit (deep enough nesting overflows the stack, which is fatal), and
// kcedar's own exports are far below both.
const (
	maxSchemaSize    = 64 << 20
	maxSchemaNesting = 1000
)

// checkNesting rejects input nested deeper than limit: brackets, braces,
// parentheses and angle brackets outside string literals and comments (`//`
// and `/* */`, which cedar-go's schema parser accepts), tokenized by cedarlex
// as cedar-go reads Cedar text; JSON input tokenizes the same way. A string or
// block comment that does not end is an error.
func checkNesting(data []byte, limit int) error {
	depth := 0
	lx := cedarlex.New(data)
	for {
		tok, err := lx.Next()
		if err != nil {
			return err
		}
		switch tok.Kind {
		case cedarlex.EOF:
			return nil
		case cedarlex.Punct, cedarlex.Invalid:
			switch data[tok.Pos.Offset] {
			case '{', '[', '<', '(':
				depth++
				if depth > limit {
					return fmt.Errorf("%s: nested deeper than %d levels", tok.Pos, limit)
				}
			case '}', ']', '>', ')':
				depth--
			}
		}
	}
}

// ParseSchema rebuilds the model from a schema that MarshalCedar or MarshalJSON
// printed (the format is detected: JSON starts with '{'). The annotations
// kcedar prints (@apiGroup, @resource, @apiVersion, @openapi, @map, @enum, ...)
// make this lossless except for Warnings, which are not printed. A Cedar schema
// that kcedar did not generate is rejected with an error.
func ParseSchema(data []byte) (*Schema, error) {
	if len(data) > maxSchemaSize {
		return nil, fmt.Errorf("schema larger than %d bytes", maxSchemaSize)
	}
	if err := checkNesting(data, maxSchemaNesting); err != nil {
		return nil, err
	}
	var cs cedarschema.Schema
	if trimmed := bytes.TrimSpace(data); len(trimmed) > 0 && trimmed[0] == '{' {
		if err := cs.UnmarshalJSON(data); err != nil {
			return nil, fmt.Errorf("parsing JSON schema: %w", err)
		}
	} else if err := cs.UnmarshalCedar(data); err != nil {
		return nil, fmt.Errorf("parsing Cedar schema: %w", err)
	}
	if _, err := cs.Resolve(); err != nil {
		return nil, fmt.Errorf("resolving schema: %w", err)
	}
	return FromCedarAST(cs.AST())
}

// FromCedarAST rebuilds the model from the AST of a schema kcedar generated.
func FromCedarAST(a *ast.Schema) (*Schema, error) {
	p := &astParser{
		a:       a,
		common:  map[string]ast.CommonType{},
		objects: map[string]*ObjectVersion{},
		s: &Schema{
			Resources:    map[ResourceKey]*Resource{},
			Definitions:  map[string]Type{},
			Maps:         map[types.EntityType]*MapType{},
			OpenAPINames: map[string]string{},
		},
	}
	return p.parse()
}

type astParser struct {
	a       *ast.Schema
	common  map[string]ast.CommonType
	objects map[string]*ObjectVersion
	s       *Schema
}

func (p *astParser) parse() (*Schema, error) {
	a, s := p.a, p.s
	if len(a.Entities) > 0 || len(a.CommonTypes) > 0 || len(a.Actions) > 0 || len(a.Enums) > 0 {
		return nil, fmt.Errorf("not a kcedar schema: declarations outside a namespace")
	}
	k8s, ok := a.Namespaces[Namespace]
	if !ok {
		return nil, fmt.Errorf("not a kcedar schema: no %s namespace", Namespace)
	}
	for _, et := range []types.EntityType{UserType, ServiceAccountType, NodeType, GroupType, ResourceType, NonResourceURLType} {
		if _, ok := k8s.Entities[ast.Ident(strings.TrimPrefix(string(et), Namespace+"::"))]; !ok {
			return nil, fmt.Errorf("not a kcedar schema: %s is missing", et)
		}
	}
	nsNames := make([]string, 0, len(a.Namespaces))
	for n := range a.Namespaces {
		nsNames = append(nsNames, string(n))
	}
	sort.Strings(nsNames)

	// Pass 1: declare maps and common types, so references resolve.
	for _, n := range nsNames {
		ns := a.Namespaces[types.Path(n)]
		for name, ct := range ns.CommonTypes {
			p.common[n+"::"+string(name)] = ct
		}
		for name, e := range ns.Entities {
			if _, isMap := e.Annotations[AnnotationMap]; isMap {
				et := types.EntityType(n + "::" + string(name))
				if e.Tags == nil {
					return nil, fmt.Errorf("map entity type %s has no tags", et)
				}
				s.Maps[et] = &MapType{EntityType: et}
			}
		}
	}
	// Pass 2: types.
	for _, et := range sortedEntityTypes(s.Maps) {
		ns, name := splitPath(string(et))
		v, err := p.typ(a.Namespaces[types.Path(ns)].Entities[ast.Ident(name)].Tags, string(et)+" tags")
		if err != nil {
			return nil, err
		}
		s.Maps[et].Value = v
	}
	for _, name := range sortedKeys(p.common) {
		ct := p.common[name]
		switch {
		case strings.HasPrefix(name, OpenAPINamespace+"::"):
			t, err := p.typ(ct.Type, name)
			if err != nil {
				return nil, err
			}
			s.Definitions[name] = t
			if o, ok := ct.Annotations[AnnotationOpenAPI]; ok {
				s.OpenAPINames[name] = string(o)
			}
		case strings.HasPrefix(name, ObjectsNamespace+"::"):
			t, err := p.typ(ct.Type, name)
			if err != nil {
				return nil, err
			}
			rec, ok := t.(*RecordType)
			if !ok {
				return nil, fmt.Errorf("object type %s is not a record", name)
			}
			p.objects[name] = &ObjectVersion{
				APIVersion: string(ct.Annotations[AnnotationAPIVersion]),
				Kind:       string(ct.Annotations[AnnotationKind]),
				Fields:     rec,
				Name:       name,
			}
		default:
			return nil, fmt.Errorf("not a kcedar schema: unexpected common type %s", name)
		}
	}

	// Resources.
	for _, n := range nsNames {
		ns := a.Namespaces[types.Path(n)]
		for name, e := range ns.Entities {
			res, ok := e.Annotations[AnnotationResource]
			if !ok {
				continue
			}
			r, err := p.resource(types.EntityType(n+"::"+string(name)), e, string(res))
			if err != nil {
				return nil, err
			}
			if _, dup := s.Resources[r.Key]; dup {
				return nil, fmt.Errorf("resource %s is declared twice", keyString(r.Key))
			}
			s.Resources[r.Key] = r
		}
	}
	if s.ObjectMeta == nil {
		for name, o := range s.OpenAPINames {
			if o == objectMetaDef {
				s.ObjectMeta = &RefType{Name: name}
			}
		}
	}

	// Actions: the verbs, and which resources take them.
	byEntity := map[types.EntityType]*Resource{}
	for _, r := range s.Resources {
		byEntity[r.EntityType] = r
	}
	verbs := map[string][]string{}
	for v, act := range k8s.Actions {
		if v == AllVerbs {
			continue
		}
		s.Verbs = append(s.Verbs, string(v))
		if act.AppliesTo == nil {
			continue
		}
		for _, ref := range act.AppliesTo.Resources {
			if r, ok := byEntity[types.EntityType(ref)]; ok {
				verbs[string(r.EntityType)] = append(verbs[string(r.EntityType)], string(v))
			}
		}
	}
	sort.Strings(s.Verbs)
	for _, r := range s.Resources {
		r.Verbs = verbs[string(r.EntityType)]
		if r.Verbs == nil {
			r.Verbs = []string{}
		}
		sort.Strings(r.Verbs)
	}
	return s, nil
}

func (p *astParser) resource(et types.EntityType, e ast.Entity, resource string) (*Resource, error) {
	r := &Resource{
		Key: ResourceKey{
			Group:       string(e.Annotations[AnnotationAPIGroup]),
			Resource:    resource,
			Subresource: string(e.Annotations[AnnotationSubresource]),
		},
		EntityType: et,
		Versions:   map[string]*ObjectVersion{},
	}
	_, r.Virtual = e.Annotations[AnnotationVirtual]
	_, r.AnySubresource = e.Annotations[AnnotationAnySubresource]
	r.Names = Names{
		Singular: string(e.Annotations[AnnotationSingular]),
		Kind:     string(e.Annotations[AnnotationKind]),
		Version:  string(e.Annotations[AnnotationVersion]),
	}
	if sn := string(e.Annotations[AnnotationShortNames]); sn != "" {
		r.Names.ShortNames = strings.Split(sn, ",")
	}
	if ns, ok := e.Shape[AttrNamespace]; ok && !ns.Optional {
		r.Namespaced = true // cluster-scoped resources have an optional namespace
	}
	obj, ok := e.Shape[AttrObject]
	if !ok {
		return r, nil
	}
	rec, ok := obj.Type.(ast.RecordType)
	if !ok {
		return nil, fmt.Errorf("%s: object is not a record", et)
	}
	for name, attr := range rec {
		switch string(name) {
		case AttrAPIVersion, AttrKind:
		case AttrMetadata:
			if p.s.ObjectMeta == nil {
				t, err := p.typ(attr.Type, string(et)+".object.metadata")
				if err != nil {
					return nil, err
				}
				p.s.ObjectMeta = t
			}
		default:
			ref, ok := refPath(attr.Type)
			if !ok {
				return nil, fmt.Errorf("%s: object.%s does not name an object type", et, name)
			}
			ov, ok := p.objects[ref]
			if !ok {
				return nil, fmt.Errorf("%s: object.%s: unknown object type %s", et, name, ref)
			}
			r.Versions[string(name)] = ov
		}
	}
	return r, nil
}

func refPath(t ast.IsType) (string, bool) {
	switch t := t.(type) {
	case ast.TypeRef:
		return string(t), true
	case ast.EntityTypeRef:
		return string(t), true
	}
	return "", false
}

// typ converts an AST type back into a kcedar Type.
func (p *astParser) typ(t ast.IsType, where string) (Type, error) {
	switch t := t.(type) {
	case ast.StringType:
		return StringType{}, nil
	case ast.LongType:
		return LongType{}, nil
	case ast.BoolType:
		return BoolType{}, nil
	case ast.ExtensionType:
		switch t {
		case "decimal":
			return DecimalType{}, nil
		case "datetime":
			return DatetimeType{}, nil
		}
		return nil, fmt.Errorf("%s: unsupported extension type %s", where, string(t))
	case ast.SetType:
		e, err := p.typ(t.Element, where+"[]")
		if err != nil {
			return nil, err
		}
		return &SetType{Element: e}, nil
	case ast.RecordType:
		rec := &RecordType{Attributes: make(map[string]*Attribute, len(t))}
		for name, a := range t {
			at, err := p.typ(a.Type, where+"."+string(name))
			if err != nil {
				return nil, err
			}
			attr := &Attribute{Type: at, Optional: a.Optional}
			if e, ok := a.Annotations[AnnotationEnum]; ok {
				attr.Enum = decodeEnum(string(e))
			}
			rec.Attributes[string(name)] = attr
		}
		return rec, nil
	case ast.EntityTypeRef, ast.TypeRef:
		name, _ := refPath(t)
		// Built-in type names are valid type references too.
		switch strings.TrimPrefix(name, "__cedar::") {
		case "String":
			return StringType{}, nil
		case "Long":
			return LongType{}, nil
		case "Bool", "Boolean":
			return BoolType{}, nil
		case "decimal":
			return DecimalType{}, nil
		case "datetime":
			return DatetimeType{}, nil
		}
		if m, ok := p.s.Maps[types.EntityType(name)]; ok {
			return m, nil
		}
		if _, ok := p.common[name]; ok && strings.HasPrefix(name, OpenAPINamespace+"::") {
			return &RefType{Name: name}, nil
		}
		return nil, fmt.Errorf("%s: reference to %s, which is neither a map entity type nor an OpenAPI common type", where, name)
	default:
		return nil, fmt.Errorf("%s: unsupported type %T", where, t)
	}
}
