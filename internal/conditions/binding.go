package conditions

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

	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/entities"
)

// A condition is bound to the request it was issued for: its MAC covers the
// request attributes that reach kcedar both in the SubjectAccessReview and
// in the conditions callback's admissionRequest
// (docs/conditional-authorization.md, "What a condition is bound to"): the
// user (name, uid, groups, extra), the API group, resource and subresource,
// the namespace and the verb; the entity type is in the condition itself.
// The verifier recomputes the MAC from the callback's admission data, so a
// condition verifies only for the user, resource, namespace and operation it
// was issued for.
//
// The name is not bound (a create's SubjectAccessReview has none). The verb
// is bound as authorized; the callback, which carries the admission
// operation, tries each verb the operation may stand for (AdmissionVerbs).

// Binding is the request a condition is bound to.
type Binding struct {
	// User is the user; nil binds the empty user.
	User                            *entities.UserInfo
	APIGroup, Resource, Subresource string
	Namespace                       string
	Verb                            string
}

// RequestBinding is the binding of the conditions kcedar answers req with.
func RequestBinding(req *entities.Request) Binding {
	return Binding{User: &req.User, APIGroup: req.APIGroup, Resource: req.Resource, Subresource: req.Subresource,
		Namespace: req.Namespace, Verb: req.Verb}
}

// admissionBindings are the bindings a callback's data verifies a condition
// against: one for each verb its operation may have been authorized as.
func admissionBindings(data *AdmissionData) []Binding {
	verbs := AdmissionVerbs(data.Operation)
	out := make([]Binding, len(verbs))
	for i, verb := range verbs {
		out[i] = Binding{User: data.User, APIGroup: data.APIGroup, Resource: data.Resource, Subresource: data.Subresource,
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

// mac signs a condition (format tag, effect, id, type, body) and its binding.
// Every part is length-prefixed, so no choice of values runs one into the
// next.
func mac(key Key, effect engine.DecisionType, id, typ, body string, b Binding) string {
	return newSigner(key, b).mac(effect, id, typ, body)
}

// signer computes the MACs of the conditions of one answer: one key, one
// binding. The binding is written out once, and one HMAC is reset between
// conditions, so an answer with many conditions pays for the key and the
// binding once.
type signer struct {
	key     Key
	b       Binding
	h       hash.Hash
	binding []byte // the binding's bytes; nil until used
	sum     [sha256.Size]byte
}

func newSigner(key Key, b Binding) *signer {
	return &signer{key: key, b: b, h: hmac.New(sha256.New, key.Secret)}
}

// mac is the MAC of one condition (as the function mac).
func (s *signer) mac(effect engine.DecisionType, id, typ, body string) string {
	if s.binding == nil {
		var buf bytes.Buffer
		s.b.write(&buf)
		s.binding = buf.Bytes()
	}
	s.h.Reset()
	for _, part := range []string{conditionPrefix, effect.String(), id, typ, body} {
		writePart(s.h, part)
	}
	s.h.Write(s.binding)
	return base64.RawURLEncoding.EncodeToString(s.h.Sum(s.sum[:0])[:macBytes])
}

// write adds the binding to a MAC's input. The leading "upstream" tag is
// part of the format: the MACs of conditions already issued still verify.
func (b Binding) write(h io.Writer) {
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
