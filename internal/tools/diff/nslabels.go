package diff

import (
	"slices"
	"strings"

	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/lib/cedarx/ast"
)

// Namespace labels. A policy reading resource.namespaceObject decides by
// the labels of the request's namespace, which a request does not carry:
// kcedar serve finds them in its informer. The method enumerates them as
// one more dimension, at the points whose namespace is known and whose
// resource has a namespace object: the namespace unknown, a namespace
// without labels, and every assignment to the label keys the policies name
// (each absent, or one of its representatives: literals, like-pattern
// strings, a fresh value), always with one more label no policy names. A
// policy reading anything of namespaceObject but those labels (and the
// `has` tests on the way to them) is not decided exactly.

// nsLabelDim is the dimension of the value of namespace label k.
func nsLabelDim(k string) string { return "namespaceObject.labels:" + k }

// Descriptions of the worlds without an assignment.
const (
	worldUnknown  = "(unknown)"
	worldNoLabels = "(no labels)"
	worldOther    = "(other labels)"
)

// maxWorlds bounds the namespace-label worlds at one point; beyond it the
// point is not decided exactly.
const maxWorlds = 64

// world is what the request's namespace is in one enumeration step.
type world struct {
	desc  string
	known bool
	obj   map[string]any
}

// isResourceVar reports whether n is `resource`.
func isResourceVar(n ast.IsNode) bool { return isVarNode(n, "resource") }

// isNSObject reports whether n is resource.namespaceObject.
func isNSObject(n ast.IsNode) bool {
	a, ok := n.(ast.NodeTypeAccess)
	return ok && a.Value == "namespaceObject" && isResourceVar(a.Arg)
}

// isNSLabels reports whether n is resource.namespaceObject.metadata.labels.
func isNSLabels(n ast.IsNode) bool {
	a, ok := n.(ast.NodeTypeAccess)
	if !ok || a.Value != "labels" {
		return false
	}
	m, ok := a.Arg.(ast.NodeTypeAccess)
	return ok && m.Value == "metadata" && isNSObject(m.Arg)
}

// labelKey is the key of a hasTag or getTag on the namespace labels.
func labelKey(left, right ast.IsNode) (string, bool) {
	v, ok := right.(ast.NodeValue)
	s, isStr := v.Value.(types.String)
	return string(s), ok && isStr && isNSLabels(left)
}

// rootsAtNSObject reports whether n is an access chain from
// resource.namespaceObject.
func rootsAtNSObject(n ast.IsNode) bool {
	for {
		if isNSObject(n) {
			return true
		}
		switch v := n.(type) {
		case ast.NodeTypeAccess:
			n = v.Arg
		case ast.NodeTypeHas:
			n = v.Arg
		default:
			return false
		}
	}
}

// nsNode reads one node for the namespace labels: it returns false for the
// forms it understands (their children need no reading), and notes the
// reads it does not understand.
func (l *literals) nsNode(n ast.IsNode) bool {
	switch v := n.(type) {
	case ast.NodeTypeHas:
		if (isResourceVar(v.Arg) && v.Value == "namespaceObject") || (isNSObject(v.Arg) && v.Value == "metadata") {
			l.readsNS = true
			return false
		}
		if m, ok := v.Arg.(ast.NodeTypeAccess); ok && v.Value == "labels" && m.Value == "metadata" && isNSObject(m.Arg) {
			l.readsNS = true
			return false
		}
	case ast.NodeTypeHasTag:
		if k, ok := labelKey(v.Left, v.Right); ok {
			l.readsNS, l.nsKeys[k] = true, true
			return false
		}
	case ast.NodeTypeGetTag:
		if k, ok := labelKey(v.Left, v.Right); ok {
			l.readsNS, l.nsKeys[k] = true, true
			return false
		}
	case ast.NodeTypeAccess:
		if rootsAtNSObject(v) {
			l.readsNS = true
			l.inexact["resource.namespaceObject other than its labels"] = true
			return false
		}
	}
	return true
}

// labelSpace is the namespace-label worlds' dimensions at a leaf: the
// label keys the policies alive there name, their values' representatives,
// and a key none names.
type labelSpace struct {
	keys       []string
	dims       map[string]*dimension
	otherLabel string
}

// labelsAt is the label space of the policies fs.
func labelsAt(fs []*facts) *labelSpace {
	keys := map[string]bool{}
	for _, f := range fs {
		for k := range f.lits.nsKeys {
			keys[k] = true
		}
	}
	ls := &labelSpace{keys: sortedKeys(keys), dims: map[string]*dimension{}}
	for _, k := range ls.keys {
		ls.dims[k] = localDim(fs, nsLabelDim(k))
	}
	ls.otherLabel = (&dimension{literal: keys}).unused(freshValue + "-label")
	return ls
}

// worlds are the namespace-label worlds of the label space (see the top
// of this file), and whether they are all of them.
func (ls *labelSpace) worlds() ([]world, bool) {
	out := []world{{desc: worldUnknown}, {desc: worldNoLabels, known: true}}
	assignments := []map[string]string{{}}
	for _, k := range ls.keys {
		var next []map[string]string
		for _, a := range assignments {
			next = append(next, a) // k absent
			for _, v := range ls.dims[k].reps {
				b := map[string]string{k: v}
				for k2, v2 := range a {
					b[k2] = v2
				}
				next = append(next, b)
			}
		}
		assignments = next
	}
	complete := len(assignments)+2 <= maxWorlds
	if !complete {
		assignments = assignments[:maxWorlds-2]
	}
	for _, a := range assignments {
		labels := map[string]any{ls.otherLabel: freshValue}
		for k, v := range a {
			labels[k] = v
		}
		out = append(out, world{desc: ls.worldDesc(a), known: true, obj: map[string]any{"metadata": map[string]any{"labels": labels}}})
	}
	return out, complete
}

// worldDesc describes an assignment as a label selector: k=v, !k for an
// absent key.
func (ls *labelSpace) worldDesc(a map[string]string) string {
	var parts []string
	for _, k := range ls.keys {
		if v, ok := a[k]; ok {
			parts = append(parts, k+"="+v)
		} else {
			parts = append(parts, "!"+k)
		}
	}
	if len(parts) == 0 {
		return worldOther
	}
	return strings.Join(parts, ",")
}

// classifyWorld is the description of the world of the Namespace object
// obj (nil: unknown); ok is false when a label value has no representative.
func (ls *labelSpace) classifyWorld(obj map[string]any) (string, bool) {
	if obj == nil {
		return worldUnknown, true
	}
	meta, _ := obj["metadata"].(map[string]any)
	labels, _ := meta["labels"].(map[string]any)
	if len(labels) == 0 {
		return worldNoLabels, true
	}
	a := map[string]string{}
	for _, k := range ls.keys {
		v, present := labels[k]
		if !present {
			continue
		}
		s, _ := v.(string)
		rep, ok := ls.dims[k].classify(s)
		if !ok {
			return "", false
		}
		a[k] = rep
	}
	return ls.worldDesc(a), true
}

// nsLookup is the Namespace lookup of one worker's engines: it answers
// with the current world, whatever the namespace's name (a namespace given
// to Compare answers with its object). Its objects have no
// resourceVersion, so the engines do not cache by them.
type nsLookup struct {
	current *world
	given   entities.StaticNamespaces
}

// Namespace implements entities.NamespaceLookup.
func (l *nsLookup) Namespace(name string) (map[string]any, bool) {
	if obj, ok := l.given[name]; ok {
		return obj, true
	}
	if l.current == nil || !l.current.known {
		return nil, false
	}
	meta := map[string]any{"name": name}
	if m, ok := l.current.obj["metadata"].(map[string]any); ok {
		if labels, ok := m["labels"]; ok {
			meta["labels"] = labels
		}
	}
	return map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": meta}, true
}

// needsWorlds reports whether x is decided in namespace-label worlds: its
// namespace is known, its resource has a namespace object, and a policy
// alive there reads the labels.
func needsWorlds(x point, alive []*facts) bool {
	return x.namespace != "" && x.nsObject && slices.ContainsFunc(alive, func(f *facts) bool { return f.readsNS })
}

// worldsAt are the worlds to decide x in, where the policies alive are fs,
// and their descriptions: one (described "") where no such policy reads
// the namespace's labels, the given namespace's own where Compare was
// given its object, else every world.
func (r *run) worldsAt(x point, fs []*facts) ([]world, []string) {
	if !needsWorlds(x, fs) {
		return []world{{}}, []string{""}
	}
	ls := labelsAt(fs)
	if obj, ok := r.given[x.namespace]; ok {
		desc, covered := ls.classifyWorld(obj)
		if !covered {
			r.inexact["a label value of a given namespace"] = true
		}
		return []world{{desc: desc, known: true, obj: obj}}, []string{desc}
	}
	ws, complete := ls.worlds()
	if !complete {
		r.inexact["more than 64 assignments of namespace labels at one point"] = true
	}
	descs := make([]string, len(ws))
	for i, w := range ws {
		descs[i] = w.desc
	}
	return ws, descs
}
