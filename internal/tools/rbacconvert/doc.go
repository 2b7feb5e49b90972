// Package rbac converts Kubernetes RBAC into Cedar policies against the
// generated schema.
//
// Input is rbac.authorization.k8s.io/v1 Roles, ClusterRoles, RoleBindings and
// ClusterRoleBindings (read from YAML or JSON files and directories, or from a
// live cluster). Output is one Cedar permit per binding, subject, rule and
// target entity type, written against a *schemagen.Schema: resources the
// schema types become `resource is core::pods` (with `resource.namespace ==
// "<ns>"` for RoleBindings and `resource.name` conditions for resourceNames),
// everything else is matched on k8s::Resource by its attributes, and
// non-resource URLs on k8s::NonResourceURL by path.
//
// The conversion follows the RBAC authorizer's matching rules exactly
// (k8s.io/kubernetes plugin/pkg/auth/authorizer/rbac and
// pkg/apis/rbac/v1/evaluation_helpers.go): `*` verbs, groups and resources,
// `*/subresource`, `<resource>/*` and `*/*` (only a literal "*" subresource),
// verbs the schema does not declare (through context.verb), resourceNames
// (never matched by a request without a name),
// non-resource URLs with a trailing `*` prefix, ServiceAccount subjects
// defaulting to the RoleBinding's namespace, and RoleBindings that grant only
// in their own namespace. What Cedar against the schema cannot express is
// reported as a warning; see Convert and docs/rbac-migration.md.
package rbacconvert
