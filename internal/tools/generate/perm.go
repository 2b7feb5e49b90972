package generate

import (
	"time"

	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/schemagen"
)

// target is what a request is on: a typed resource, a resource the schema
// does not type (k8s::Resource), or a non-resource path.
type target struct {
	entity                  string // the Cedar entity type
	group, resource, subres string // resource requests
	path                    string // non-resource requests
}

// perm is one permission a request used: its target, verb, namespace and
// the name authorization saw ("" when it named no object).
type perm struct {
	target
	verb, namespace, name string
}

// permOf is the permission req used, as the schema resolves its target.
func permOf(s *schemagen.Schema, req *entities.Request) perm {
	t := entities.ResolveTarget(s, req)
	p := perm{target: target{entity: string(t.EntityType)}, verb: req.Verb}
	if !req.ResourceRequest {
		p.path = req.Path
		return p
	}
	p.group, p.resource, p.subres = req.APIGroup, req.Resource, req.Subresource
	p.namespace = req.Namespace
	if req.Named() {
		p.name = req.Name
	}
	return p
}

// userPerm is a permission one user used; principal is the user's type
// (entities.PrincipalUID), group the group subject the user is written as
// ("" for none).
type userPerm struct {
	user, group string
	principal   types.EntityType
	perm
}

// subjectPerm is a permission of a subject.
type subjectPerm struct {
	subject
	perm
}

// evidence is how often and when a permission was used.
type evidence struct {
	count       int
	first, last time.Time
}

// add folds n requests seen between first and last in.
func (e *evidence) add(n int, first, last time.Time) {
	e.count += n
	if !first.IsZero() && (e.first.IsZero() || first.Before(e.first)) {
		e.first = first
	}
	if last.After(e.last) {
		e.last = last
	}
}

// merge folds o in.
func (e *evidence) merge(o *evidence) { e.add(o.count, o.first, o.last) }
