package engine

import (
	"maps"
	"slices"
	"strings"

	"github.com/kcedar/kcedar/internal/entities"
)

// requestKey encodes every attribute a decision depends on.
func requestKey(req *entities.Request) string {
	var b strings.Builder
	w := func(s string) {
		b.WriteString(s)
		b.WriteByte(0)
	}
	w(req.User.Name)
	w(req.User.UID)
	for _, g := range req.User.Groups {
		w(g)
	}
	b.WriteByte(1)
	for _, k := range slices.Sorted(maps.Keys(req.User.Extra)) {
		w(k)
		for _, v := range req.User.Extra[k] {
			w(v)
		}
		b.WriteByte(1)
	}
	b.WriteByte(2)
	if req.ResourceRequest {
		for _, s := range []string{"r", req.Verb, req.APIGroup, req.Resource, req.Subresource, req.Namespace, req.Name} {
			w(s)
		}
		if req.NameFromSelector {
			// resource.named differs: not the request naming the object.
			w("s")
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
