package schemagen

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/cedar-policy/cedar-go/types"

	cedarschema "github.com/kcedar/kcedar/internal/lib/cedarx/schema"
	"github.com/kcedar/kcedar/internal/lib/cedarx/schema/ast"
)

// Annotations kcedar puts on the printed schema. They let tools (and
// ParseSchema) map every declaration back to Kubernetes.
const (
	AnnotationAPIGroup       = "apiGroup"       // group namespaces and resource entities
	AnnotationResource       = "resource"       // resource entities
	AnnotationSubresource    = "subresource"    // subresource entities
	AnnotationVirtual        = "virtual"        // resources not in discovery
	AnnotationAnySubresource = "anySubresource" // userextras: the subresource is the extra key
	AnnotationAPIVersion     = "apiVersion"     // object types (k8s::objects::...)
	AnnotationKind           = "kind"           // object types
	AnnotationOpenAPI        = "openapi"        // common types: the OpenAPI definition
	AnnotationEnum           = "enum"           // attributes: allowed values, a JSON list
	AnnotationMap            = "map"            // map entity types
	// The names kubectl resolves (resource entities, from discovery).
	AnnotationSingular   = "singular"   // "pod"
	AnnotationShortNames = "shortNames" // "po" (comma-separated)
	AnnotationVersion    = "version"    // the preferred version: "v1"
	// and AnnotationKind, "Pod"
)

// principalTypes are the principal entity types actions apply to (see
// ActionPrincipals).
var principalTypes = []types.EntityType{NodeType, ServiceAccountType, UserType}

// CedarAST builds the Cedar schema of s (a new AST on every call).
func (s *Schema) CedarAST() *ast.Schema {
	b := &astBuilder{
		s:           s,
		out:         &ast.Schema{Namespaces: ast.Namespaces{}},
		objectNames: s.objectTypeNames(),
		objectTypes: map[string]bool{},
	}
	b.addBuiltinEntities()
	b.addReadingTypes()
	b.addMaps()
	b.addDefinitions()
	b.addResources()
	b.annotateGroupNamespaces()
	b.addActions()
	return b.out
}

// astBuilder accumulates the Cedar schema AST of one Schema. Namespaces are
// values in out's map, so every change goes through its add methods, which
// write the updated namespace back.
type astBuilder struct {
	s   *Schema
	out *ast.Schema
	// objectNames names the common type of each object version.
	objectNames map[*ObjectVersion]string
	// objectTypes records the object common types already added.
	objectTypes map[string]bool
}

// namespace returns a copy of the namespace at path, creating it (with an
// Entities map) if needed; callers store their changes with setNamespace.
func (b *astBuilder) namespace(path string) ast.Namespace {
	n := b.out.Namespaces[types.Path(path)]
	if n.Entities == nil {
		n.Entities = ast.Entities{}
	}
	b.setNamespace(path, n)
	return n
}

// setNamespace stores n as the namespace at path.
func (b *astBuilder) setNamespace(path string, n ast.Namespace) {
	b.out.Namespaces[types.Path(path)] = n
}

// addEntity declares the entity type et in its namespace.
func (b *astBuilder) addEntity(et types.EntityType, e ast.Entity) {
	p, name := splitPath(string(et))
	n := b.namespace(p)
	n.Entities[ast.Ident(name)] = e
	b.setNamespace(p, n)
}

// addCommon declares the common type at the full path in its namespace.
func (b *astBuilder) addCommon(path string, ct ast.CommonType) {
	p, name := splitPath(path)
	n := b.namespace(p)
	if n.CommonTypes == nil {
		n.CommonTypes = ast.CommonTypes{}
	}
	n.CommonTypes[ast.Ident(name)] = ct
	b.setNamespace(p, n)
}

// principalShape is the record of a principal: username, groups, an optional
// uid, and a string attribute for each of extra.
func principalShape(extra ...string) ast.RecordType {
	r := ast.RecordType{
		AttrUsername: {Type: ast.String()},
		AttrGroups:   {Type: ast.Set(ast.String())},
		AttrUID:      {Type: ast.String(), Optional: true},
	}
	for _, a := range extra {
		r[types.String(a)] = ast.Attribute{Type: ast.String()}
	}
	return r
}

// addBuiltinEntities declares the principals (members of groups, with their
// user extras as tags), Group, the generic Resource and NonResourceURL.
func (b *astBuilder) addBuiltinEntities() {
	inGroup := []ast.EntityTypeRef{ast.EntityTypeRef(GroupType)}
	extraTags := ast.Set(ast.String())
	b.addEntity(UserType, ast.Entity{ParentTypes: inGroup, Shape: principalShape(), Tags: extraTags})
	b.addEntity(ServiceAccountType, ast.Entity{ParentTypes: inGroup, Shape: principalShape(AttrNamespace, AttrName), Tags: extraTags})
	b.addEntity(NodeType, ast.Entity{ParentTypes: inGroup, Shape: principalShape(AttrName), Tags: extraTags})
	b.addEntity(GroupType, ast.Entity{Shape: ast.RecordType{}})
	b.addEntity(ResourceType, ast.Entity{Shape: ast.RecordType{
		AttrAPIGroup:    {Type: ast.String()},
		AttrResource:    {Type: ast.String()},
		AttrSubresource: {Type: ast.String(), Optional: true},
		AttrNamespace:   {Type: ast.String(), Optional: true},
		AttrName:        {Type: ast.String(), Optional: true},
		AttrNamed:       {Type: ast.Bool()},
	}})
	b.addEntity(NonResourceURLType, ast.Entity{Shape: ast.RecordType{AttrPath: {Type: ast.String()}}})
}

// addReadingTypes declares the common types of the typed readings
// (readings.go): k8s::Quantity and k8s::IntOrString.
func (b *astBuilder) addReadingTypes() {
	b.addCommon(QuantityTypeName, ast.CommonType{Type: ast.RecordType{
		AttrValid: {Type: ast.Bool()},
		AttrMilli: {Type: ast.Long(), Optional: true},
	}})
	b.addCommon(IntOrStringTypeName, ast.CommonType{Type: ast.RecordType{
		AttrIsInt:   {Type: ast.Bool()},
		AttrIntVal:  {Type: ast.Long(), Optional: true},
		AttrStrVal:  {Type: ast.String()},
		AttrPercent: {Type: ast.Long(), Optional: true},
	}})
	if _, ok := b.s.Maps[QuantityMapType]; ok {
		quantities := ast.EntityTypeRef(QuantityMapType)
		b.addCommon(EffectiveResourcesTypeName, ast.CommonType{Type: ast.RecordType{
			AttrRequests: {Type: quantities},
			AttrLimits:   {Type: quantities},
		}})
	}
}

// addMaps declares the map types: content-addressed entities whose tags are
// the values.
func (b *astBuilder) addMaps() {
	maps := b.s.allMaps()
	for _, et := range sortedEntityTypes(maps) {
		b.addEntity(et, ast.Entity{
			Annotations: ast.Annotations{AnnotationMap: ""},
			Shape:       ast.RecordType{},
			Tags:        typeAST(maps[et].Value),
		})
	}
}

// addDefinitions declares the OpenAPI definitions as common types.
func (b *astBuilder) addDefinitions() {
	for _, name := range sortedKeys(b.s.Definitions) {
		ct := ast.CommonType{Type: typeAST(b.s.Definitions[name])}
		if o := b.s.OpenAPINames[name]; o != "" {
			ct.Annotations = ast.Annotations{AnnotationOpenAPI: types.String(o)}
		}
		b.addCommon(name, ct)
	}
}

// objectRecord is the type of r's object (and oldObject): apiVersion, kind,
// metadata and one optional attribute per version, typed by that version's
// object common type, which it declares the first time it is used.
func (b *astBuilder) objectRecord(r *Resource) ast.RecordType {
	obj := ast.RecordType{
		AttrAPIVersion: {Type: ast.String()},
		AttrKind:       {Type: ast.String()},
		AttrMetadata:   {Type: typeAST(b.s.ObjectMeta)},
	}
	if b.s.HasEffectiveResources(r) {
		obj[AttrEffectiveResources] = ast.Attribute{Type: ast.TypeRef(EffectiveResourcesTypeName), Optional: true}
	}
	for _, v := range sortedKeys(r.Versions) {
		ov := r.Versions[v]
		name := b.objectNames[ov]
		obj[types.String(v)] = ast.Attribute{Type: ast.TypeRef(types.Path(name)), Optional: true}
		if !b.objectTypes[name] {
			b.objectTypes[name] = true
			b.addCommon(name, ast.CommonType{
				Annotations: ast.Annotations{
					AnnotationAPIVersion: types.String(ov.APIVersion),
					AnnotationKind:       types.String(ov.Kind),
				},
				Type: typeAST(fieldsOrEmpty(ov.Fields)),
			})
		}
	}
	return obj
}

// addResources declares one entity type per resource and subresource, and
// types namespaceObject on the generic Resource.
func (b *astBuilder) addResources() {
	// namespaceObject: the Namespace object of a namespaced request, typed as
	// the Namespace resource's objects (see NamespaceObjectResource).
	nsObject := b.objectRecord(b.s.NamespaceObjectResource())
	rt := b.out.Namespaces[Namespace].Entities[ast.Ident(strings.TrimPrefix(string(ResourceType), Namespace+"::"))]
	rt.Shape[AttrNamespaceObject] = ast.Attribute{Type: nsObject, Optional: true}
	for _, key := range b.s.SortedResourceKeys() {
		r := b.s.Resources[key]
		b.addEntity(r.EntityType, ast.Entity{
			Annotations: resourceAnnotations(key, r),
			Shape:       b.resourceShape(r, nsObject),
		})
	}
}

// resourceAnnotations are the annotations of the entity type of the resource
// r at key: what maps it back to Kubernetes, and the names kubectl resolves.
func resourceAnnotations(key ResourceKey, r *Resource) ast.Annotations {
	ann := ast.Annotations{
		AnnotationAPIGroup: types.String(key.Group),
		AnnotationResource: types.String(key.Resource),
	}
	if r.Virtual {
		ann[AnnotationVirtual] = ""
	}
	if r.AnySubresource {
		ann[AnnotationAnySubresource] = ""
	}
	if len(r.Names.ShortNames) > 0 {
		ann[AnnotationShortNames] = types.String(strings.Join(r.Names.ShortNames, ","))
	}
	// Strings: present when not empty.
	for _, a := range []struct{ name, value string }{
		{AnnotationSubresource, key.Subresource},
		{AnnotationSingular, r.Names.Singular},
		{AnnotationKind, r.Names.Kind},
		{AnnotationVersion, r.Names.Version},
	} {
		if a.value != "" {
			ann[types.AnnotationKey(a.name)] = types.String(a.value)
		}
	}
	return ann
}

// resourceShape is the record of the entity type of the resource r;
// nsObject is the type of namespaceObject.
func (b *astBuilder) resourceShape(r *Resource, nsObject ast.RecordType) ast.RecordType {
	shape := ast.RecordType{
		AttrAPIGroup: {Type: ast.String()},
		AttrResource: {Type: ast.String()},
		AttrName:     {Type: ast.String()},
		AttrNamed:    {Type: ast.Bool()},
	}
	if r.Namespaced {
		shape[AttrNamespace] = ast.Attribute{Type: ast.String()}
		shape[AttrNamespaceObject] = ast.Attribute{Type: nsObject, Optional: true}
	} else {
		// The namespace a request names for a cluster-scoped resource: a
		// namespaces request names its own, a SubjectAccessReview may
		// name any (RBAC then applies that namespace's RoleBindings).
		shape[AttrNamespace] = ast.Attribute{Type: ast.String(), Optional: true}
	}
	if r.HasSubresourceAttr() {
		shape[AttrSubresource] = ast.Attribute{Type: ast.String()}
	}
	if len(r.Versions) > 0 {
		obj := b.objectRecord(r)
		shape[AttrObject] = ast.Attribute{Type: obj, Optional: true}
		shape[AttrOldObject] = ast.Attribute{Type: obj, Optional: true}
	}
	return shape
}

// annotateGroupNamespaces gives each namespace of resource entity types the
// API group of its first resource.
func (b *astBuilder) annotateGroupNamespaces() {
	for _, key := range b.s.SortedResourceKeys() {
		p, _ := splitPath(string(b.s.Resources[key].EntityType))
		n := b.out.Namespaces[types.Path(p)]
		if n.Annotations == nil {
			n.Annotations = ast.Annotations{AnnotationAPIGroup: types.String(key.Group)}
			b.setNamespace(p, n)
		}
	}
}

// addActions declares "*" and one action per verb (a member of "*", or of
// its action group, see ActionParents), for the principal types and the
// resource types that have the verb; and the action groups of the
// impersonate-on verbs the schema has.
func (b *astBuilder) addActions() {
	byVerb := b.s.resourceTypesByVerb()
	k8s := b.out.Namespaces[Namespace]
	k8s.Actions = ast.Actions{AllVerbs: {}}
	for _, v := range b.s.allVerbs() {
		res := append(byVerb[v], ast.EntityTypeRef(ResourceType))
		if IsNonResourceAction(v) {
			res = append(res, ast.EntityTypeRef(NonResourceURLType))
		}
		slices.Sort(res)
		var principals []ast.EntityTypeRef
		for _, p := range ActionPrincipals(v) {
			principals = append(principals, ast.EntityTypeRef(p))
		}
		var parents []ast.ParentRef
		for _, p := range ActionParents(v) {
			parents = append(parents, ast.ParentRefFromID(types.String(p)))
			if p != AllVerbs {
				k8s.Actions[types.String(p)] = ast.Action{Parents: []ast.ParentRef{ast.ParentRefFromID(AllVerbs)}}
			}
		}
		k8s.Actions[types.String(v)] = ast.Action{
			Parents: parents,
			AppliesTo: &ast.AppliesTo{
				Principals: principals,
				Resources:  res,
				Context:    ast.RecordType{AttrVerb: {Type: ast.String()}},
			},
		}
	}
	b.setNamespace(Namespace, k8s)
}

// resourceTypesByVerb lists, for each verb, the entity types of the resources
// that have it (in no particular order).
func (s *Schema) resourceTypesByVerb() map[string][]ast.EntityTypeRef {
	byVerb := map[string][]ast.EntityTypeRef{}
	for _, r := range s.Resources {
		for _, v := range r.Verbs {
			byVerb[v] = append(byVerb[v], ast.EntityTypeRef(r.EntityType))
		}
	}
	return byVerb
}

// allMaps returns s.Maps plus every map type the model's types use, so that
// hand-built models (without Maps) print a valid schema too.
func (s *Schema) allMaps() map[types.EntityType]*MapType {
	out := make(map[types.EntityType]*MapType, len(s.Maps))
	for et, m := range s.Maps {
		out[et] = m
	}
	seen := map[Type]bool{}
	var walk func(t Type)
	walk = func(t Type) {
		switch t := t.(type) {
		case *SetType:
			walk(t.Element)
		case *MapType:
			if _, ok := out[t.EntityType]; !ok {
				out[t.EntityType] = t
			}
			if !seen[t] {
				seen[t] = true
				walk(t.Value)
			}
		case *RecordType:
			if seen[t] {
				return
			}
			seen[t] = true
			for _, a := range t.Attributes {
				walk(a.Type)
			}
		}
	}
	walk(s.ObjectMeta)
	for _, d := range s.Definitions {
		walk(d)
	}
	for _, r := range s.Resources {
		for _, ov := range r.Versions {
			walk(ov.Fields)
		}
	}
	return out
}

// objectTypeNames names the common type of each object version: its Name, else
// (hand-built models) ObjectTypeName of its apiVersion and kind. Versions with
// the same name and different fields get numbered names.
func (s *Schema) objectTypeNames() map[*ObjectVersion]string {
	out := map[*ObjectVersion]string{}
	byName := map[string]string{} // name -> typeKey of its fields
	for _, key := range s.SortedResourceKeys() {
		r := s.Resources[key]
		for _, v := range sortedKeys(r.Versions) {
			ov := r.Versions[v]
			if _, ok := out[ov]; ok {
				continue
			}
			base := ov.Name
			if base == "" {
				group, version, _ := strings.Cut(ov.APIVersion, "/")
				if version == "" {
					group, version = "", group
				}
				if ov.Kind != "" && version != "" {
					base = ObjectTypeName(group, version, ov.Kind)
				} else {
					base = ObjectsNamespace + "::" + string(r.EntityType) + "::" + Ident(v)
				}
			}
			fields := ov.Fields
			if fields == nil {
				fields = &RecordType{}
			}
			k := typeKey(fields)
			name := base
			for i := 2; ; i++ {
				prev, taken := byName[name]
				if !taken || prev == k {
					break
				}
				name = fmt.Sprintf("%s_%d", base, i)
			}
			byName[name] = k
			out[ov] = name
		}
	}
	return out
}

// allVerbs is s.Verbs plus the verbs of every resource.
func (s *Schema) allVerbs() []string {
	set := toSet(s.Verbs)
	for _, r := range s.Resources {
		for _, v := range r.Verbs {
			set[v] = true
		}
	}
	delete(set, AllVerbs)
	return sortedSet(set)
}

func sortedEntityTypes[V any](m map[types.EntityType]V) []types.EntityType {
	out := make([]types.EntityType, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func fieldsOrEmpty(r *RecordType) *RecordType {
	if r == nil {
		return &RecordType{}
	}
	return r
}

// typeAST prints a kcedar Type as a Cedar schema type.
func typeAST(t Type) ast.IsType {
	switch t := t.(type) {
	case StringType:
		return ast.String()
	case LongType:
		return ast.Long()
	case BoolType:
		return ast.Bool()
	case DecimalType:
		return ast.Decimal()
	case DatetimeType:
		return ast.Datetime()
	case QuantityReadingType:
		return ast.TypeRef(QuantityTypeName)
	case IntOrStringReadingType:
		return ast.TypeRef(IntOrStringTypeName)
	case *SetType:
		return ast.Set(typeAST(t.Element))
	case *MapType:
		return ast.EntityTypeRef(t.EntityType)
	case *RefType:
		return ast.TypeRef(types.Path(t.Name))
	case *RecordType:
		rec := make(ast.RecordType, len(t.Attributes))
		for n, a := range t.Attributes {
			attr := ast.Attribute{Type: typeAST(a.Type), Optional: a.Optional}
			if len(a.Enum) > 0 {
				attr.Annotations = ast.Annotations{AnnotationEnum: types.String(encodeEnum(a.Enum))}
			}
			rec[types.String(n)] = attr
		}
		return rec
	case nil:
		panic("schemagen: nil type")
	default:
		panic(fmt.Sprintf("schemagen: unknown type %T", t))
	}
}

// encodeEnum writes enum values for the @enum annotation: joined with "|"
// (ClusterFirst|Default|None), or as a JSON list when a value contains "|" or
// the joined form would start with "[".
func encodeEnum(vals []string) string {
	joined := strings.Join(vals, "|")
	for _, v := range vals {
		if strings.Contains(v, "|") {
			joined = "["
			break
		}
	}
	if strings.HasPrefix(joined, "[") {
		enc, _ := json.Marshal(vals)
		return string(enc)
	}
	return joined
}

// decodeEnum reverses encodeEnum.
func decodeEnum(s string) []string {
	if strings.HasPrefix(s, "[") {
		var vals []string
		if json.Unmarshal([]byte(s), &vals) == nil {
			return vals
		}
	}
	return strings.Split(s, "|")
}

// MarshalCedar prints the schema in Cedar's human-readable schema format.
// The output is deterministic.
func (s *Schema) MarshalCedar() ([]byte, error) {
	return cedarschema.NewSchemaFromAST(s.CedarAST()).MarshalCedar()
}

// MarshalJSON prints the schema in Cedar's JSON schema format. The output is
// deterministic.
func (s *Schema) MarshalJSON() ([]byte, error) {
	return cedarschema.NewSchemaFromAST(s.CedarAST()).MarshalJSON()
}

// Lookup finds the typed resource for a request's group, resource and
// subresource. Resources with AnySubresource (userextras) match any subresource.
func (s *Schema) Lookup(group, resource, subresource string) (*Resource, bool) {
	if r, ok := s.Resources[ResourceKey{Group: group, Resource: resource, Subresource: subresource}]; ok {
		return r, true
	}
	if subresource != "" {
		if r, ok := s.Resources[ResourceKey{Group: group, Resource: resource}]; ok && r.AnySubresource {
			return r, true
		}
	}
	return nil, false
}

// Stats are counts describing a schema.
type Stats struct {
	EntityTypes      int // all entity types, principals and maps included
	Resources        int // typed resources (not subresources), virtual ones included
	Subresources     int // typed subresources, virtual ones included
	VirtualResources int // resources and subresources not in discovery
	MapTypes         int
	Actions          int // verb actions plus "*"
	CommonTypes      int // OpenAPI definitions plus object types
	Warnings         int
	CedarBytes       int // size of MarshalCedar
	JSONBytes        int // size of MarshalJSON
}

// Stats counts the schema's declarations and measures both printed forms.
func (s *Schema) Stats() Stats {
	a := s.CedarAST()
	st := Stats{Warnings: len(s.Warnings), MapTypes: len(s.Maps)}
	for _, n := range a.Namespaces {
		st.EntityTypes += len(n.Entities)
		st.Actions += len(n.Actions)
		st.CommonTypes += len(n.CommonTypes)
	}
	for k, r := range s.Resources {
		if k.Subresource == "" {
			st.Resources++
		} else {
			st.Subresources++
		}
		if r.Virtual {
			st.VirtualResources++
		}
	}
	sc := cedarschema.NewSchemaFromAST(a)
	if b, err := sc.MarshalCedar(); err == nil {
		st.CedarBytes = len(b)
	}
	if b, err := sc.MarshalJSON(); err == nil {
		st.JSONBytes = len(b)
	}
	return st
}

// String formats the stats on one line per count.
func (st Stats) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "entity types:      %d\n", st.EntityTypes)
	fmt.Fprintf(&b, "resources:         %d\n", st.Resources)
	fmt.Fprintf(&b, "subresources:      %d\n", st.Subresources)
	fmt.Fprintf(&b, "  virtual:         %d\n", st.VirtualResources)
	fmt.Fprintf(&b, "map types:         %d\n", st.MapTypes)
	fmt.Fprintf(&b, "actions:           %d\n", st.Actions)
	fmt.Fprintf(&b, "common types:      %d\n", st.CommonTypes)
	fmt.Fprintf(&b, "warnings:          %d\n", st.Warnings)
	fmt.Fprintf(&b, "cedar size:        %d bytes\n", st.CedarBytes)
	fmt.Fprintf(&b, "json size:         %d bytes\n", st.JSONBytes)
	return b.String()
}
