package cedarlang

import (
	"fmt"

	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/lib/cedarx/ast"
	"github.com/kcedar/kcedar/internal/schemagen"
)

// NamespaceGuard is the condition ConfineToNamespace puts in front of a
// policy's own conditions: `resource has namespace && resource.namespace == ns`.
func NamespaceGuard(ns string) ast.Node {
	g := ast.Resource().Has(schemagen.AttrNamespace).And(ast.Resource().Access(schemagen.AttrNamespace).Equal(ast.String(ns)))
	// A request on the Namespace object itself names its namespace (as
	// kube-apiserver sets it), and cluster-scoped entities carry the
	// namespace a request names: a namespaced policy must not reach its own
	// Namespace object (get, update or delete the namespace).
	for _, t := range namespaceObjectTypes {
		g = g.And(ast.Not(ast.Resource().Is(t)))
	}
	return g
}

// namespaceObjectTypes are the entity types of the Namespace object and its
// subresources.
var namespaceObjectTypes = []types.EntityType{"core::namespaces", "core::namespaces_status", "core::namespaces_finalize"}

// ConfineToNamespace rewrites policies so they can only match requests in
// namespace ns, whatever their text says: each becomes a copy whose first
// condition is NamespaceGuard(ns). Cedar evaluates a policy's conditions in
// order and stops at the first false one, so outside ns none of the policy's
// own conditions is even evaluated (an error in them cannot surface there).
// Requests for cluster-scoped resources and non-resource URLs have no
// namespace attribute and never match; a request across all namespaces has
// an unknown namespace, which a permit can never be allowed on (its residual
// needs the namespace).
//
// Only permits may be confined: a forbid whose guard is undecided (a list
// across all namespaces) would deny the whole request, reaching outside ns.
// Ids given with @id are prefixed with prefix (e.g. "NamespacedCedarPolicy/ns/name/"),
// so a confined policy can never take the id of another policy.
func ConfineToNamespace(policies []*Policy, ns, prefix string) ([]*Policy, error) {
	if ns == "" {
		return nil, fmt.Errorf("confining policies to a namespace: the namespace is empty")
	}
	out := make([]*Policy, 0, len(policies))
	for _, p := range policies {
		if p.Effect != types.Permit {
			return nil, fmt.Errorf("%s: policy %s: a namespaced policy may only permit: a forbid would also deny requests across all namespaces (such as a list of every namespace); put forbids in a cluster-scoped CedarPolicy", p.Source, p.ID)
		}
		a := *p.AST
		a.Conditions = make([]ast.ConditionType, 0, len(p.AST.Conditions)+1)
		a.Conditions = append(a.Conditions, ast.ConditionType{Condition: ast.ConditionWhen, Body: NamespaceGuard(ns).AsIsNode()})
		a.Conditions = append(a.Conditions, p.AST.Conditions...)
		c := *p
		c.AST = &a
		c.lazy = &lazyForms{} // its own AST: compiled and tested anew
		if c.ID != c.Source {
			c.ID = prefix + c.ID
		}
		out = append(out, &c)
	}
	return out, nil
}
