package engine

import (
	"maps"
	"slices"
	"strings"

	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/entities"
)

// requestKey encodes every attribute a decision depends on.
func requestKey(req *entities.Request) string {
	var b strings.Builder
	w := func(s string) {
		b.WriteString(s)
		b.WriteByte(0)
	}
	b.Grow(userKeySize(req.User) + 64 + len(req.Path) + len(req.Namespace) + len(req.Name))
	writeUser(&b, req.User)
	b.WriteByte(2)
	if req.ResourceRequest {
		// The first field holds the flags, so that no label selector can
		// read as one.
		kind := "r"
		if req.NameFromSelector {
			// resource.named differs: not the request naming the object.
			kind += "s"
		}
		if req.UnconditionalOnly {
			kind += "u" // folded as it is decided: never Conditional
		}
		for _, s := range []string{kind, req.Verb, req.APIGroup, req.Resource, req.Subresource, req.Namespace, req.Name} {
			w(s)
		}
		for _, l := range req.LabelSelector { // the label selector confines reads
			w(l.Key)
			w(string(l.Op))
			for _, v := range l.Values {
				w(v)
			}
			b.WriteByte(1)
		}
	} else {
		w("n")
		w(req.Verb)
		w(req.Path)
	}
	return b.String()
}

// userKeySize is about how many bytes writeUser writes for u (without
// extra), so that a key is written in one allocation.
func userKeySize(u entities.UserInfo) int {
	n := len(u.Name) + len(u.UID) + 3
	for _, g := range u.Groups {
		n += len(g) + 1
	}
	return n
}

// writeUser writes what tells users apart (name, uid, groups, extra) to b.
func writeUser(b *strings.Builder, u entities.UserInfo) {
	w := func(s string) {
		b.WriteString(s)
		b.WriteByte(0)
	}
	w(u.Name)
	w(u.UID)
	for _, g := range u.Groups {
		w(g)
	}
	b.WriteByte(1)
	if len(u.Extra) == 0 {
		return
	}
	for _, k := range slices.Sorted(maps.Keys(u.Extra)) {
		w(k)
		for _, v := range u.Extra[k] {
			w(v)
		}
		b.WriteByte(1)
	}
}

// principalEntity is u as Cedar data, from the engine's cache when it has
// one: the same users ask again and again, and building the entity (a
// record, the groups as a set and as parents) is a good part of a
// decision's own cost.
func (e *Engine) principalEntity(u entities.UserInfo) types.Entity {
	if e.principals == nil {
		return entities.PrincipalEntity(u)
	}
	var b strings.Builder
	b.Grow(userKeySize(u))
	writeUser(&b, u)
	key := b.String()
	if p, ok := e.principals.get(key); ok {
		return p
	}
	p := entities.PrincipalEntity(u)
	e.principals.put(key, p)
	return p
}
