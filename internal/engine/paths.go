package engine

import (
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/lib/cedarx/ast"
	"github.com/kcedar/kcedar/internal/schemagen"
)

// ObjectPaths finds what an expression reads of resource.object and
// resource.oldObject, so the callback converts only that. A chain of
// attribute reads used as a value needs the whole value at its end; a `has`
// at the end needs only the presence of its attribute.
func ObjectPaths(n ast.IsNode) (object, oldObject *entities.Paths) {
	object, oldObject = &entities.Paths{}, &entities.Paths{}
	var visit func(n ast.IsNode)
	visit = func(n ast.IsNode) {
		if root, path, presence, ok := chainOf(n); ok {
			p := object
			if root == schemagen.AttrOldObject {
				p = oldObject
			}
			for _, a := range path {
				p = p.Child(a)
			}
			if !presence {
				p.All = true
			}
			return
		}
		for _, c := range children(n) {
			visit(c)
		}
	}
	visit(n)
	return object, oldObject
}

// chainOf recognizes resource.<object|oldObject>.a.b... (presence false) and
// <that> has c (presence true).
func chainOf(n ast.IsNode) (root string, path []string, presence bool, ok bool) {
	switch v := n.(type) {
	case ast.NodeTypeAccess:
		if r, isVar := v.Arg.(ast.NodeTypeVariable); isVar && r.Name == "resource" {
			if v.Value == schemagen.AttrObject || v.Value == schemagen.AttrOldObject {
				return string(v.Value), nil, false, true
			}
			return "", nil, false, false
		}
		root, path, presence, ok = chainOf(v.Arg)
		if !ok || presence {
			return "", nil, false, false
		}
		return root, append(path, string(v.Value)), false, true
	case ast.NodeTypeHas:
		root, path, presence, ok = chainOf(v.Arg)
		if !ok || presence {
			return "", nil, false, false
		}
		return root, append(path, string(v.Value)), true, true
	}
	return "", nil, false, false
}
