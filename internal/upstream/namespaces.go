package upstream

import (
	"bytes"
	"encoding/json"

	corev1 "k8s.io/api/core/v1"

	"github.com/kcedar/kcedar/internal/entities"
)

// NamespaceGetter gets a Namespace by name: a client-go NamespaceLister
// (an informer's cache) is one.
type NamespaceGetter interface {
	Get(name string) (*corev1.Namespace, error)
}

// Namespaces is g as the lookup that fills namespaceObject; nil g is nil (the
// namespace stays unknown). A namespace g does not find, or cannot convert,
// is unknown, never "no labels". A g that is an entities.NamespaceLookup
// too (kcedar serve's informer, which keeps the objects converted) is used
// as that.
func Namespaces(g NamespaceGetter) entities.NamespaceLookup {
	if g == nil {
		return nil
	}
	if l, ok := g.(entities.NamespaceLookup); ok {
		return l
	}
	return namespaceLookup{g}
}

type namespaceLookup struct{ getter NamespaceGetter }

// Namespace implements entities.NamespaceLookup.
func (l namespaceLookup) Namespace(name string) (map[string]any, bool) {
	ns, err := l.getter.Get(name)
	if err != nil || ns == nil {
		return nil, false
	}
	data, err := json.Marshal(ns)
	if err != nil {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var obj map[string]any
	if dec.Decode(&obj) != nil {
		return nil, false
	}
	return obj, true
}
