package entities

import (
	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/schemagen"
)

// PrincipalEntity builds the principal: its attributes, a parent k8s::Group per
// group, and the user's extra as tags (sets of strings).
func PrincipalEntity(u UserInfo) types.Entity {
	id := IdentityOf(u.Name, u.Groups)
	uid := id.UID
	groups := make([]types.Value, len(u.Groups))
	parents := make([]types.EntityUID, len(u.Groups))
	for i, g := range u.Groups {
		groups[i] = types.String(g)
		parents[i] = types.NewEntityUID(schemagen.GroupType, types.String(g))
	}
	attrs := types.RecordMap{
		schemagen.AttrUsername: types.String(u.Name),
		schemagen.AttrGroups:   types.NewSet(groups...),
	}
	if u.UID != "" {
		attrs[schemagen.AttrUID] = types.String(u.UID)
	}
	switch uid.Type {
	case schemagen.ServiceAccountType:
		attrs[schemagen.AttrNamespace] = types.String(id.Namespace)
		attrs[schemagen.AttrName] = types.String(id.Name)
	case schemagen.NodeType:
		attrs[schemagen.AttrName] = types.String(id.Name)
	}
	var tags types.Record
	if len(u.Extra) > 0 {
		m := make(types.RecordMap, len(u.Extra))
		for _, k := range sortedExtraKeys(u.Extra) {
			vals := make([]types.Value, len(u.Extra[k]))
			for i, v := range u.Extra[k] {
				vals[i] = types.String(v)
			}
			m[types.String(k)] = types.NewSet(vals...)
		}
		tags = types.NewRecord(m)
	}
	return types.Entity{UID: uid, Parents: types.NewEntityUIDSet(parents...), Attributes: types.NewRecord(attrs), Tags: tags}
}

// Entities is the entity store of one request: the principal, the resource,
// the map entities of its objects, and the implicit k8s::Group and k8s::Action
// entities (every verb action is in k8s::Action::"*").
type Entities struct {
	Principal types.Entity
	Resource  types.Entity
	Maps      map[types.EntityUID]types.Entity
}

var allVerbsParent = types.NewEntityUIDSet(schemagen.AllVerbsAction)

// actionEntity is the k8s::Action uid with its parents (schemagen.ActionParents).
func actionEntity(uid types.EntityUID) types.Entity {
	parents := schemagen.ActionParents(string(uid.ID))
	switch {
	case len(parents) == 0:
		return types.Entity{UID: uid}
	case parents[0] == schemagen.AllVerbs:
		return types.Entity{UID: uid, Parents: allVerbsParent}
	}
	return types.Entity{UID: uid, Parents: types.NewEntityUIDSet(schemagen.ActionUID(parents[0]))}
}

// Get implements types.EntityGetter.
func (e *Entities) Get(uid types.EntityUID) (types.Entity, bool) {
	switch {
	case uid == e.Principal.UID:
		return e.Principal, true
	case uid == e.Resource.UID && uid.Type != "":
		return e.Resource, true
	case uid.Type == schemagen.GroupType:
		return types.Entity{UID: uid}, true
	case uid.Type == schemagen.ActionType:
		return actionEntity(uid), true
	}
	ent, ok := e.Maps[uid]
	return ent, ok
}
