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

// astParser rebuilds a Schema (s) from the AST a of a schema kcedar printed.
type astParser struct {
	a *ast.Schema
	// common holds every common type of a, by full name.
	common map[string]ast.CommonType
	// objects holds the parsed object types, by full name.
	objects map[string]*ObjectVersion
	s       *Schema
}

// builtinEntityTypes are the entity types every kcedar schema declares in its
// k8s namespace.
var builtinEntityTypes = []types.EntityType{UserType, ServiceAccountType, NodeType, GroupType, ResourceType, NonResourceURLType}

// parse rebuilds the model in passes: maps and common types first, so that
// references resolve, then their types, then resources and actions.
func (p *astParser) parse() (*Schema, error) {
	k8s, err := p.k8sNamespace()
	if err != nil {
		return nil, err
	}
	nsNames := make([]string, 0, len(p.a.Namespaces))
	for n := range p.a.Namespaces {
		nsNames = append(nsNames, string(n))
	}
	sort.Strings(nsNames)

	steps := []func() error{
		func() error { return p.declare(nsNames) },
		p.parseMapValues,
		p.parseCommonTypes,
		func() error { return p.parseResources(nsNames) },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return nil, err
		}
	}
	p.defaultObjectMeta()
	p.parseActions(k8s)
	return p.s, nil
}

// k8sNamespace checks that p.a looks like a kcedar schema (everything in
// namespaces, the built-in entity types present) and returns its k8s
// namespace.
func (p *astParser) k8sNamespace() (ast.Namespace, error) {
	a := p.a
	if len(a.Entities) > 0 || len(a.CommonTypes) > 0 || len(a.Actions) > 0 || len(a.Enums) > 0 {
		return ast.Namespace{}, fmt.Errorf("not a kcedar schema: declarations outside a namespace")
	}
	k8s, ok := a.Namespaces[Namespace]
	if !ok {
		return ast.Namespace{}, fmt.Errorf("not a kcedar schema: no %s namespace", Namespace)
	}
	for _, et := range builtinEntityTypes {
		if _, ok := k8s.Entities[ast.Ident(strings.TrimPrefix(string(et), Namespace+"::"))]; !ok {
			return ast.Namespace{}, fmt.Errorf("not a kcedar schema: %s is missing", et)
		}
	}
	return k8s, nil
}

// declare records every common type in p.common and declares every map
// entity type (its value type still unset) in p.s.Maps.
func (p *astParser) declare(nsNames []string) error {
	for _, n := range nsNames {
		ns := p.a.Namespaces[types.Path(n)]
		for name, ct := range ns.CommonTypes {
			p.common[n+"::"+string(name)] = ct
		}
		for name, e := range ns.Entities {
			if _, isMap := e.Annotations[AnnotationMap]; isMap {
				et := types.EntityType(n + "::" + string(name))
				if e.Tags == nil {
					return fmt.Errorf("map entity type %s has no tags", et)
				}
				p.s.Maps[et] = &MapType{EntityType: et}
			}
		}
	}
	return nil
}

// parseMapValues sets each map type's value type from its entity's tags.
func (p *astParser) parseMapValues() error {
	for _, et := range sortedEntityTypes(p.s.Maps) {
		ns, name := splitPath(string(et))
		v, err := p.typ(p.a.Namespaces[types.Path(ns)].Entities[ast.Ident(name)].Tags, string(et)+" tags")
		if err != nil {
			return err
		}
		p.s.Maps[et].Value = v
	}
	return nil
}

// parseCommonTypes parses the common types: OpenAPI definitions into
// p.s.Definitions, object types into p.objects.
func (p *astParser) parseCommonTypes() error {
	for _, name := range sortedKeys(p.common) {
		ct := p.common[name]
		var err error
		switch {
		case strings.HasPrefix(name, OpenAPINamespace+"::"):
			err = p.parseDefinition(name, ct)
		case strings.HasPrefix(name, ObjectsNamespace+"::"):
			err = p.parseObjectType(name, ct)
		case name == QuantityTypeName || name == IntOrStringTypeName || name == EffectiveResourcesTypeName:
			// The readings' types (readings.go): fixed, and implied by
			// the model.
		default:
			err = fmt.Errorf("not a kcedar schema: unexpected common type %s", name)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// parseDefinition parses the OpenAPI definition name.
func (p *astParser) parseDefinition(name string, ct ast.CommonType) error {
	t, err := p.typ(ct.Type, name)
	if err != nil {
		return err
	}
	p.s.Definitions[name] = t
	if o, ok := ct.Annotations[AnnotationOpenAPI]; ok {
		p.s.OpenAPINames[name] = string(o)
	}
	return nil
}

// parseObjectType parses the object type name (a record).
func (p *astParser) parseObjectType(name string, ct ast.CommonType) error {
	t, err := p.typ(ct.Type, name)
	if err != nil {
		return err
	}
	rec, ok := t.(*RecordType)
	if !ok {
		return fmt.Errorf("object type %s is not a record", name)
	}
	p.objects[name] = &ObjectVersion{
		APIVersion: string(ct.Annotations[AnnotationAPIVersion]),
		Kind:       string(ct.Annotations[AnnotationKind]),
		Fields:     rec,
		Name:       name,
	}
	return nil
}

// parseResources parses every entity type annotated @resource.
func (p *astParser) parseResources(nsNames []string) error {
	for _, n := range nsNames {
		ns := p.a.Namespaces[types.Path(n)]
		for name, e := range ns.Entities {
			res, ok := e.Annotations[AnnotationResource]
			if !ok {
				continue
			}
			r, err := p.resource(types.EntityType(n+"::"+string(name)), e, string(res))
			if err != nil {
				return err
			}
			if _, dup := p.s.Resources[r.Key]; dup {
				return fmt.Errorf("resource %s is declared twice", keyString(r.Key))
			}
			p.s.Resources[r.Key] = r
		}
	}
	return nil
}

// defaultObjectMeta sets ObjectMeta, when no resource's object type gave it
// (no resource has objects), to the OpenAPI definition of ObjectMeta.
func (p *astParser) defaultObjectMeta() {
	if p.s.ObjectMeta != nil {
		return
	}
	for name, o := range p.s.OpenAPINames {
		if o == objectMetaDef {
			p.s.ObjectMeta = &RefType{Name: name}
		}
	}
}

// parseActions reads the verbs from k8s's actions (all but the action groups:
// "*" and impersonate-on:<mode>:*), and each
// resource's verbs from the actions that apply to it.
func (p *astParser) parseActions(k8s ast.Namespace) {
	s := p.s
	byEntity := map[types.EntityType]*Resource{}
	for _, r := range s.Resources {
		byEntity[r.EntityType] = r
	}
	verbs := map[string][]string{}
	for v, act := range k8s.Actions {
		if IsActionGroup(string(v)) {
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
}

// resource parses the entity type et, annotated @resource(resource), into a
// Resource (its verbs are filled in later, from the actions).
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
		case AttrAPIVersion, AttrKind, AttrEffectiveResources:
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
			attr := &Attribute{Type: at, Optional: a.Optional, From: ReadingSource(string(name), at)}
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
		switch name {
		case QuantityTypeName:
			return QuantityReadingType{}, nil
		case IntOrStringTypeName:
			return IntOrStringReadingType{}, nil
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
