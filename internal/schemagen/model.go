package schemagen

import (
	"cmp"
	"slices"
	"strings"

	"github.com/cedar-policy/cedar-go/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Type is kcedar's model of a Cedar attribute type. The Cedar schema AST is printed
// from it, and internal/entities converts Kubernetes objects into Cedar values by
// walking it, so the schema and the values can never disagree.
//
// Implementations: *RecordType, *SetType, *MapType, *RefType and the scalars.
type Type interface{ isType() }

// Scalar types.
type (
	StringType   struct{} // also int-or-string and resource.Quantity (as their string form)
	LongType     struct{} // OpenAPI integer
	BoolType     struct{}
	DecimalType  struct{} // OpenAPI number: Cedar decimal (4 fractional digits)
	DatetimeType struct{} // OpenAPI string with format date-time
)

// RecordType is a Cedar record.
type RecordType struct {
	Attributes map[string]*Attribute
}

// Attribute is one record attribute.
type Attribute struct {
	Type     Type
	Optional bool
	// Enum lists the allowed values of a string attribute, or of the elements of a
	// set of strings (annotation only: @enum in the printed schema).
	Enum []string
	// From names the field a typed reading attribute reads (limitsQuantity
	// reads limits); empty for every other attribute.
	From string
}

// SetType is a Cedar set (an OpenAPI array).
type SetType struct{ Element Type }

// MapType is an OpenAPI map (additionalProperties). In Cedar it is an entity of
// EntityType whose tags hold the values: labels.hasTag("k") / labels.getTag("k").
type MapType struct {
	EntityType types.EntityType
	Value      Type
}

// RefType names a common type (an OpenAPI definition); Resolve it through the
// Schema's Definitions.
type RefType struct {
	Name string // Cedar common type path, e.g. k8s::openapi::io::k8s::api::core::v1::PodSpec
}

func (StringType) isType()   {}
func (LongType) isType()     {}
func (BoolType) isType()     {}
func (DecimalType) isType()  {}
func (DatetimeType) isType() {}
func (*RecordType) isType()  {}
func (*SetType) isType()     {}
func (*MapType) isType()     {}
func (*RefType) isType()     {}

// ResourceKey identifies a resource or subresource.
type ResourceKey struct {
	Group       string
	Resource    string
	Subresource string
}

// Compare orders resource keys by group, then resource, then subresource; it
// returns -1, 0 or +1 like cmp.Compare, for slices.SortFunc.
func (k ResourceKey) Compare(o ResourceKey) int {
	return cmp.Or(
		cmp.Compare(k.Group, o.Group),
		cmp.Compare(k.Resource, o.Resource),
		cmp.Compare(k.Subresource, o.Subresource),
	)
}

// Resource is one resource or subresource from discovery, as kcedar types it.
type Resource struct {
	Key        ResourceKey
	EntityType types.EntityType
	Namespaced bool
	Verbs      []string // sorted
	// Versions maps a version attribute name of the object record (v1, v1beta1)
	// to the type of that version's object, without apiVersion, kind and metadata.
	Versions map[string]*ObjectVersion
	// Virtual is set for resources that are not in discovery but that Kubernetes
	// authorizes (users, groups, signers, uids, userextras).
	Virtual bool
	// AnySubresource is set when the request's subresource is free-form data
	// rather than a subresource (authentication.k8s.io userextras: the extra key).
	// Key.Subresource is empty, Lookup matches any subresource, and the entity
	// has a subresource attribute that holds it.
	AnySubresource bool
	// Names are the names kubectl accepts for the resource, from discovery
	// (empty for schemas read back from Cedar text, and for virtual resources).
	Names Names
}

// Names are a resource's names from discovery, as kubectl resolves them.
type Names struct {
	Singular   string   // "pod"
	ShortNames []string // "po"
	Kind       string   // "Pod" (for a subresource, the kind of its object, e.g. Scale)
	// Version is the first version discovery lists the resource in: the
	// group's preferred version among those serving it.
	Version string
}

func (n *Names) merge(version, singular string, short []string, kind *metav1.GroupVersionKind) {
	if n.Version == "" {
		n.Version = version
	}
	if n.Singular == "" {
		n.Singular = singular
	}
	for _, s := range short {
		if s != "" && !slices.Contains(n.ShortNames, s) {
			n.ShortNames = append(n.ShortNames, s)
		}
	}
	if n.Kind == "" && kind != nil {
		n.Kind = kind.Kind
	}
}

// HasSubresourceAttr reports whether the resource's entity has the subresource
// attribute: subresources, and resources with AnySubresource.
func (r *Resource) HasSubresourceAttr() bool {
	return r.Key.Subresource != "" || r.AnySubresource
}

// VersionOf returns the version attribute (the key of Versions) whose object is
// apiVersion/kind, preferring the version the request was made in (requestVersion,
// may be empty) when several match.
func (r *Resource) VersionOf(apiVersion, kind, requestVersion string) (string, bool) {
	if ov, ok := r.Versions[requestVersion]; ok && ov.APIVersion == apiVersion && ov.Kind == kind {
		return requestVersion, true
	}
	for _, v := range sortedKeys(r.Versions) {
		if ov := r.Versions[v]; ov.APIVersion == apiVersion && ov.Kind == kind {
			return v, true
		}
	}
	return "", false
}

// ObjectVersion is the object type of a resource in one API version.
type ObjectVersion struct {
	APIVersion string // group/version (or version for core) of the object
	Kind       string
	Fields     *RecordType
	// Name is the common type the printed schema declares for Fields:
	// k8s::objects::<group namespace>::<version>::<Kind> (ObjectTypeName). Versions
	// of resources whose objects have the same apiVersion and kind share it.
	Name string
}

// Schema is a generated Cedar schema plus what kcedar needs to map requests and
// objects onto it.
type Schema struct {
	// Resources by group/resource/subresource.
	Resources map[ResourceKey]*Resource
	// Definitions holds the common types RefType names.
	Definitions map[string]Type
	// ObjectMeta is the type of every object's metadata.
	ObjectMeta Type
	// Verbs lists every verb action in the schema (sorted, without "*").
	Verbs []string
	// Maps holds every map entity type (the EntityType of each MapType).
	Maps map[types.EntityType]*MapType
	// OpenAPINames maps each Definitions key to the OpenAPI definition it was
	// generated from (io.k8s.api.core.v1.PodSpec).
	OpenAPINames map[string]string
	// Warnings lists everything that could not be represented exactly.
	Warnings []string
}

// IsConnect reports whether a subresource is served by a connect handler
// (pods/exec, pods/attach, pods/portforward, pods/proxy, services/proxy,
// nodes/proxy): admission sees it as CONNECT with the options object.
func (r *Resource) IsConnect() bool {
	if r.Key.Subresource == "" {
		return false
	}
	for _, v := range r.Versions {
		if strings.HasSuffix(v.Kind, "Options") {
			return true
		}
	}
	switch r.Key.Subresource {
	case "exec", "attach", "portforward", "proxy":
		return true
	}
	return false
}

// SortedResourceKeys lists the schema's resources by group, resource and
// subresource.
func (s *Schema) SortedResourceKeys() []ResourceKey {
	keys := make([]ResourceKey, 0, len(s.Resources))
	for k := range s.Resources {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, ResourceKey.Compare)
	return keys
}

// NamespaceResourceKey is the Namespace resource: namespaceObject is typed as
// its objects.
var NamespaceResourceKey = ResourceKey{Resource: "namespaces"}

// NamespaceObjectResource is the resource whose objects namespaceObject
// holds: core namespaces, or (in a schema without it) a resource without
// versions, so namespaceObject is {apiVersion, kind, metadata}.
func (s *Schema) NamespaceObjectResource() *Resource {
	if r, ok := s.Resources[NamespaceResourceKey]; ok {
		return r
	}
	return &Resource{Key: NamespaceResourceKey, Versions: map[string]*ObjectVersion{}}
}
