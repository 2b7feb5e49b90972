package engine

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"hash"
	"io"
	"slices"
	"strconv"

	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/entities"
)

// A condition is bound to the request it was issued for: its MAC covers the
// request attributes that reach kcedar both in the SubjectAccessReview and
// in the conditions callback of the wire shape the condition went out in
// (docs/conditional-authorization.md, "What a condition is bound to"). The
// verifier recomputes the MAC from the callback's admission data, so a
// condition verifies only for the user, resource, namespace and operation it
// was issued for.
//
//   - Upstream shape (conditionalDecision; the callback's admissionRequest):
//     the user (name, uid, groups, extra), the API group, resource and
//     subresource, the namespace and the verb.
//   - The seed draft's shape (conditionsChain; the callback carries the
//     operation and the objects, no user and no resource): the namespace (for
//     a namespaced resource) and the verb. The resource is bound through the
//     entity type in the condition, as in both shapes.
//
// The name is not bound (a create's SubjectAccessReview has none). The verb
// is bound as authorized; the callback, which carries the admission
// operation, tries each verb the operation may stand for (AdmissionVerbs).

// Binding is the request a condition is bound to.
type Binding struct {
	// Draft: the condition goes out in the seed draft's shape, which binds
	// only Namespace and Verb.
	Draft bool
	// User is bound in the upstream shape; nil binds the empty user.
	User                            *entities.UserInfo
	APIGroup, Resource, Subresource string // bound in the upstream shape
	// Namespace is bound in both shapes; in the draft's, as "" when the
	// condition's entity type is cluster-scoped.
	Namespace string
	Verb      string
}

// RequestBinding is the binding of the conditions kcedar answers req with,
// sent in the draft's shape or upstream's.
func RequestBinding(req *entities.Request, draft bool) Binding {
	return Binding{Draft: draft, User: &req.User, APIGroup: req.APIGroup, Resource: req.Resource, Subresource: req.Subresource,
		Namespace: req.Namespace, Verb: req.Verb}
}

// admissionBindings are the bindings a callback's data verifies a condition
// against: one for each verb its operation may have been authorized as.
func admissionBindings(data *AdmissionData, draft bool) []Binding {
	verbs := AdmissionVerbs(data.Operation)
	out := make([]Binding, len(verbs))
	for i, verb := range verbs {
		out[i] = Binding{Draft: draft, User: data.User, APIGroup: data.APIGroup, Resource: data.Resource, Subresource: data.Subresource,
			Namespace: data.Namespace, Verb: verb}
	}
	return out
}

// macBytes is how much of the HMAC a condition carries (128 bits), macLen
// its length in the condition.
const (
	macBytes = 16
	macLen   = (macBytes*8 + 5) / 6
)

// mac signs a condition (format tag, effect, id, type, body) and its binding;
// namespaced tells whether the condition's entity type is namespaced. Every
// part is length-prefixed, so no choice of values runs one into the next.
func mac(key Key, effect DecisionType, id, typ, body string, b Binding, namespaced bool) string {
	return newSigner(key, b).mac(effect, id, typ, body, namespaced)
}

// signer computes the MACs of the conditions of one answer: one key, one
// binding. The binding is written out once (per namespaced), and one HMAC is
// reset between conditions, so an answer with many conditions pays for
// the key and the binding once.
type signer struct {
	key     Key
	b       Binding
	h       hash.Hash
	binding [2][]byte // the binding's bytes, [1] as namespaced; nil until used
	sum     [sha256.Size]byte
}

func newSigner(key Key, b Binding) *signer {
	return &signer{key: key, b: b, h: hmac.New(sha256.New, key.Secret)}
}

// mac is the MAC of one condition (as the function mac).
func (s *signer) mac(effect DecisionType, id, typ, body string, namespaced bool) string {
	i := 0
	if namespaced {
		i = 1
	}
	if s.binding[i] == nil {
		var buf bytes.Buffer
		s.b.write(&buf, namespaced)
		s.binding[i] = buf.Bytes()
	}
	s.h.Reset()
	for _, part := range []string{conditionPrefix, effect.String(), id, typ, body} {
		writePart(s.h, part)
	}
	s.h.Write(s.binding[i])
	return base64.RawURLEncoding.EncodeToString(s.h.Sum(s.sum[:0])[:macBytes])
}

// write adds the binding to a MAC's input.
func (b Binding) write(h io.Writer, namespaced bool) {
	if b.Draft {
		ns := b.Namespace
		if !namespaced {
			ns = ""
		}
		for _, part := range []string{"draft", ns, b.Verb} {
			writePart(h, part)
		}
		return
	}
	writePart(h, "upstream")
	var u entities.UserInfo
	if b.User != nil {
		u = *b.User
	}
	writePart(h, u.Name)
	writePart(h, u.UID)
	writeList(h, u.Groups)
	keys := make([]string, 0, len(u.Extra))
	for k := range u.Extra {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	writePart(h, strconv.Itoa(len(keys)))
	for _, k := range keys {
		writePart(h, k)
		writeList(h, u.Extra[k])
	}
	for _, part := range []string{b.APIGroup, b.Resource, b.Subresource, b.Namespace, b.Verb} {
		writePart(h, part)
	}
}

// writeList adds a set of strings (sorted: the order is not bound).
func writeList(h io.Writer, list []string) {
	sorted := slices.Clone(list)
	slices.Sort(sorted)
	writePart(h, strconv.Itoa(len(sorted)))
	for _, s := range sorted {
		writePart(h, s)
	}
}

func writePart(h io.Writer, s string) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(s)))
	h.Write(n[:])
	io.WriteString(h, s)
}

// namespaced reports whether resource entity type t is namespaced (an entity
// type the schema does not know counts as namespaced).
func (e *Evaluator) namespaced(t types.EntityType) bool {
	r, ok := e.resourceFor(t)
	return !ok || r.Namespaced
}

// draftData is data of a draft callback with its namespace filled in from
// the objects when the caller did not send it (the draft's ConditionData has
// none), as the conditions see it.
func draftData(data *AdmissionData) *AdmissionData {
	if data.Namespace != "" {
		return data
	}
	d := *data
	for _, raw := range [][]byte{data.Object, data.OldObject} {
		if obj, err := decodeObject(raw); err == nil {
			if d.Namespace = metadataString(obj, "namespace"); d.Namespace != "" {
				break
			}
		}
	}
	return &d
}
