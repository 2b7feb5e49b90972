package policyobjects

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"

	"github.com/kcedar/kcedar/internal/store"
)

// The offline tools (kcedar authorize, test, who-can, can-i, validate) read
// policy objects from a file or the cluster and compose them as a Source
// does on its first sync, so they decide what the server serves.

// Refusal is an object that is not used, and why.
type Refusal struct {
	// Object names it as positions do (SourceName), or the document it
	// came from when it is not a policy object.
	Object string `json:"object"`
	Reason string `json:"reason"`
}

// Compose is what a Source offers the store for objs on its first sync: the
// sources of the objects whose text is valid (NamespacedCedarPolicy text
// confined to its namespace by the store, as serve loads it), in serve's
// order, and the objects refused with their verdicts. There is no earlier
// valid text to fall back on offline, so a refused object serves nothing.
func Compose(c *Checker, objs []*unstructured.Unstructured) ([]store.Source, []Refusal) {
	states := make(map[string]objectState, len(objs))
	var refused []Refusal
	for _, u := range objs {
		key, st := judge(c, u, nil)
		states[key] = st
		if !st.verdict.Valid {
			refused = append(refused, Refusal{Object: key, Reason: st.verdict.Message() + servingNote(u)})
		}
	}
	srcs, _ := sourcesOf(states, nil)
	return srcs, refused
}

// servingNote notes that the server reports serving an earlier version of an
// object (its status), which the offline tools cannot see.
func servingNote(u *unstructured.Unstructured) string {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		msg, _ := m["message"].(string)
		if m["type"] == ConditionAccepted && m["status"] == string(metav1.ConditionFalse) && strings.Contains(msg, "keeps serving)") {
			return "\n(its status says the server keeps serving an earlier valid version, which is not in the object and not used here)"
		}
	}
	return ""
}

// Decode reads policy objects as `kubectl get -o yaml` (or -o json) prints
// them: one object, several YAML documents, or a List. Documents that are not
// CedarPolicy or NamespacedCedarPolicy objects, or whose namespace does not
// fit their kind, are refused (name is the input's name in their reasons);
// unreadable input is an error.
func Decode(r io.Reader, name string) ([]*unstructured.Unstructured, []Refusal, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(r, 4096)
	var objs []*unstructured.Unstructured
	var refused []Refusal
	for doc := 1; ; doc++ {
		var m map[string]any
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			return objs, refused, nil
		} else if err != nil {
			return nil, nil, fmt.Errorf("%s: document %d: %w", name, doc, err)
		}
		if m == nil {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		items := []unstructured.Unstructured{*u}
		if u.IsList() {
			list, err := u.ToList()
			if err != nil {
				return nil, nil, fmt.Errorf("%s: document %d: %w", name, doc, err)
			}
			items = list.Items
		}
		for i := range items {
			if why := misfit(&items[i]); why != "" {
				refused = append(refused, Refusal{Object: fmt.Sprintf("%s: document %d: %s %q", name, doc, items[i].GetKind(), items[i].GetName()), Reason: why})
				continue
			}
			objs = append(objs, &items[i])
		}
	}
}

// misfit says why u is not a policy object the API server could hold, ""
// when it is one.
func misfit(u *unstructured.Unstructured) string {
	gvk := u.GroupVersionKind()
	switch {
	case gvk.GroupVersion() != GroupVersion || (gvk.Kind != KindCluster && gvk.Kind != KindNamespaced):
		return fmt.Sprintf("not a policy object (want apiVersion %s, kind %s or %s)", GroupVersion, KindCluster, KindNamespaced)
	case u.GetName() == "":
		return "metadata.name is empty"
	case gvk.Kind == KindNamespaced && u.GetNamespace() == "":
		return "a NamespacedCedarPolicy needs metadata.namespace (kubectl get -A -o yaml prints it; kubectl apply -n fills it in)"
	case gvk.Kind == KindCluster && u.GetNamespace() != "":
		return "a CedarPolicy is cluster-scoped: metadata.namespace must be empty"
	}
	return ""
}

// List reads every CedarPolicy and NamespacedCedarPolicy of the cluster
// behind client, as a Source's informers see them.
func List(ctx context.Context, client dynamic.Interface) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	for _, gvr := range []struct {
		res  string
		list func(context.Context, metav1.ListOptions) (*unstructured.UnstructuredList, error)
	}{
		{ResourceCluster, client.Resource(ClusterResource).List},
		{ResourceNamespaced, client.Resource(NamespacedResource).Namespace(metav1.NamespaceAll).List},
	} {
		list, err := gvr.list(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("listing %s.%s: %w", gvr.res, Group, err)
		}
		for i := range list.Items {
			objs = append(objs, &list.Items[i])
		}
	}
	return objs, nil
}
