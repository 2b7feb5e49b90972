package schemagen

import (
	"strings"

	"github.com/cedar-policy/cedar-go/types"
)

// The names below are kcedar's contract with policy authors (docs/schema.md).
// Every other package takes them from here.
const (
	// Namespace is the root Cedar namespace kcedar owns. API groups that would map
	// into it are escaped (see GroupNamespace).
	Namespace = "k8s"

	UserType           types.EntityType = "k8s::User"
	ServiceAccountType types.EntityType = "k8s::ServiceAccount"
	NodeType           types.EntityType = "k8s::Node"
	GroupType          types.EntityType = "k8s::Group"
	ActionType         types.EntityType = "k8s::Action"
	ResourceType       types.EntityType = "k8s::Resource"
	NonResourceURLType types.EntityType = "k8s::NonResourceURL"

	// AllVerbs is the action every verb action is a member of.
	AllVerbs = "*"

	// Attribute names on resource entities.
	AttrAPIGroup    = "apiGroup"
	AttrResource    = "resource"
	AttrSubresource = "subresource"
	AttrNamespace   = "namespace"
	AttrName        = "name"
	// AttrNamed (Bool, on every resource entity but non-resource URLs) says
	// whether the request names an object: false for list, watch, create,
	// deletecollection and SubjectAccessReviews without a name, whose name
	// is then open. RBAC's "" in resourceNames matches exactly these.
	AttrNamed     = "named"
	AttrObject    = "object"
	AttrOldObject = "oldObject"
	// AttrNamespaceObject is the Namespace object of a namespaced request
	// (ValidatingAdmissionPolicy's namespaceObject).
	AttrNamespaceObject = "namespaceObject"
	AttrPath            = "path"

	// Attribute names on principal entities.
	AttrUsername = "username"
	AttrGroups   = "groups"
	AttrUID      = "uid"

	// AttrVerb is the request's verb in every action's context
	// (context.verb): it lets a policy name a verb the schema has no action
	// for, such as a custom verb only RBAC rules mention.
	AttrVerb = "verb"

	// Attribute names on the object records.
	AttrAPIVersion = "apiVersion"
	AttrKind       = "kind"
	AttrMetadata   = "metadata"

	// Prefixes of the usernames Kubernetes gives ServiceAccounts and Nodes.
	ServiceAccountUserPrefix = "system:serviceaccount:"
	NodeUserPrefix           = "system:node:"
)

// AllVerbsAction is k8s::Action::"*".
var AllVerbsAction = types.NewEntityUID(ActionType, AllVerbs)

// ActionUID is k8s::Action::"<verb>".
func ActionUID(verb string) types.EntityUID {
	return types.NewEntityUID(ActionType, types.String(verb))
}

// StandardVerbs are the verbs Kubernetes sends for resources, whether or not
// discovery lists them; custom verbs from discovery are added to these.
var StandardVerbs = []string{
	"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection",
	"impersonate", "bind", "escalate", "use", "approve", "sign", "attest",
}

// NonResourceVerbs are the lower-case HTTP verbs of non-resource requests.
var NonResourceVerbs = []string{"get", "post", "put", "patch", "delete", "head", "options"}

// cedarReserved are the words Cedar rejects as identifiers (its reserved words)
// and as type names (the built-in types). Other keywords of the policy and schema
// grammars (principal, resource, namespace, entity, type, ...) are valid
// identifiers in both, so resource.k8s.io maps to io::k8s::resource.
var cedarReserved = map[string]bool{
	"true": true, "false": true, "if": true, "then": true, "else": true, "in": true,
	"is": true, "like": true, "has": true, "__cedar": true,
	"Bool": true, "Boolean": true, "Entity": true, "Extension": true, "Long": true,
	"Record": true, "Set": true, "String": true,
}

// Ident makes s a Cedar identifier: '-' and '.' become '_', other characters that
// Cedar rejects become '_' followed by their hex code, and a result that is
// reserved, empty or starts with a digit gets a leading '_'. No DNS label starts
// with '_', so escaped names cannot collide with names of real groups.
func Ident(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		case r == '-' || r == '.':
			b.WriteByte('_')
		default:
			b.WriteString("_x")
			b.WriteString(hex(r))
		}
	}
	id := b.String()
	if id == "" || cedarReserved[id] || id[0] >= '0' && id[0] <= '9' {
		id = "_" + id
	}
	return id
}

func hex(r rune) string {
	const digits = "0123456789abcdef"
	if r == 0 {
		return "0"
	}
	var out []byte
	for r > 0 {
		out = append([]byte{digits[r%16]}, out...)
		r /= 16
	}
	return string(out)
}

// GroupNamespace maps an API group to its Cedar namespace: "" -> core, other groups
// reverse their DNS labels (networking.k8s.io -> io::k8s::networking). A group whose
// namespace would start with kcedar's own root (k8s) or with core is escaped with a
// leading '_' (group "k8s" -> _k8s), so no CRD can add types to kcedar's namespaces.
func GroupNamespace(group string) string {
	if group == "" {
		return "core"
	}
	labels := strings.Split(group, ".")
	parts := make([]string, 0, len(labels))
	for i := len(labels) - 1; i >= 0; i-- {
		parts = append(parts, Ident(labels[i]))
	}
	if parts[0] == Namespace || parts[0] == "core" {
		parts[0] = "_" + parts[0]
	}
	return strings.Join(parts, "::")
}

// ResourceEntityName is the entity name of a resource or resource/subresource:
// pods -> pods, pods/exec -> pods_exec.
func ResourceEntityName(resource, subresource string) string {
	if subresource == "" {
		return Ident(resource)
	}
	return Ident(resource) + "_" + Ident(subresource)
}

// ResourceEntityType is the typed entity for a resource: core::pods, apps::deployments_scale.
func ResourceEntityType(group, resource, subresource string) types.EntityType {
	return types.EntityType(GroupNamespace(group) + "::" + ResourceEntityName(resource, subresource))
}

// Namespaces kcedar generates below its root for types that belong to no API group.
const (
	// OpenAPINamespace holds one common type per OpenAPI definition (record types
	// only): k8s::openapi::io::k8s::api::core::v1::PodSpec.
	OpenAPINamespace = Namespace + "::openapi"
	// ObjectsNamespace holds the per-version object fields of each kind:
	// k8s::objects::core::v1::Pod (ObjectTypeName).
	ObjectsNamespace = Namespace + "::objects"
	// MapsNamespace holds the map entity types other than StringMap.
	MapsNamespace = Namespace + "::maps"

	// StringMapType is the entity type of string maps (labels, annotations, ...):
	// content-addressed entities whose tags hold the values.
	StringMapType types.EntityType = Namespace + "::StringMap"
)

// DefinitionTypeName is the common type of an OpenAPI definition: each dotted
// label through Ident, below OpenAPINamespace
// (io.k8s.api.core.v1.PodSpec -> k8s::openapi::io::k8s::api::core::v1::PodSpec).
func DefinitionTypeName(definition string) string {
	labels := strings.Split(definition, ".")
	for i, l := range labels {
		labels[i] = Ident(l)
	}
	return OpenAPINamespace + "::" + strings.Join(labels, "::")
}

// ObjectTypeName is the common type of the fields of kind in group/version
// (everything but apiVersion, kind and metadata):
// k8s::objects::<GroupNamespace(group)>::<version>::<Kind>.
func ObjectTypeName(group, version, kind string) string {
	return ObjectsNamespace + "::" + GroupNamespace(group) + "::" + Ident(version) + "::" + Ident(kind)
}

// splitPath splits a Cedar path into its namespace and last component.
func splitPath(p string) (ns, name string) {
	i := strings.LastIndex(p, "::")
	if i < 0 {
		return "", p
	}
	return p[:i], p[i+2:]
}
