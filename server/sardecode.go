package server

import (
	"unicode/utf8"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kcedar/kcedar/internal/wire"
)

// A SubjectAccessReview as kube-apiserver sends it is decoded here without
// reflection: about a fifth of what encoding/json spends on it. This path
// decides nothing on its own: it takes a body only when it is sure that
// json.Unmarshal would produce the same value without an error, and gives up
// (false) on anything else, which then goes through encoding/json as
// before, with its messages. It gives up on
//
//   - a body that is not valid JSON: it walks JSON's grammar itself, a
//     value it skips (a field it does not read) included, so no separate
//     pass over the body validates it;
//   - a string with an escape, a control character, or bytes that are not
//     UTF-8 (encoding/json replaces those);
//   - a skipped value nested nearly as deep as encoding/json allows (it
//     refuses a body nested deeper than 10,000 levels);
//   - a key that is not exactly a field's name, but matches one when case
//     is folded (encoding/json matches case-insensitively), or a key with a
//     byte outside ASCII (its folding is Unicode's);
//   - a field given twice, null for a field, or a value of another type than
//     the field's (encoding/json merges, zeroes, or fails on those).
//
// Keys that match no field are skipped, as encoding/json ignores them.
// FuzzDecodeSAR checks the claim against json.Unmarshal, on any bytes.

// sarScanner walks a JSON document; ok turns false at the first thing it
// does not take (invalid JSON included), and stays false.
type sarScanner struct {
	b  []byte
	i  int
	ok bool
	// text is b as a string when b is small: the decoded strings are cut
	// from it, one allocation for all of them. A large body's strings are
	// copied one by one, so that a string the engine keeps (in a cache)
	// does not keep the rest of the body alive.
	text string
}

// sharedTextMax is the largest body whose strings share one copy of it.
const sharedTextMax = 4 << 10

// decodeSARFast decodes body into sar, or reports false (sar is then
// garbage, to be decoded again by encoding/json).
func decodeSARFast(body []byte, sar *sarRequest) bool {
	s := &sarScanner{b: body, ok: true}
	if len(body) <= sharedTextMax {
		s.text = string(body)
	}
	s.space()
	s.object([]string{"apiVersion", "kind", "spec"}, func(field int) {
		switch field {
		case 0:
			sar.APIVersion = s.str()
		case 1:
			sar.Kind = s.str()
		case 2:
			s.spec(&sar.Spec)
		}
	})
	s.space()
	return s.ok && s.i == len(s.b)
}

var specFields = []string{"resourceAttributes", "nonResourceAttributes", "user", "groups", "extra", "uid", "authorizationOptions", "conditionalAuthorization"}

func (s *sarScanner) spec(spec *wire.SubjectAccessReviewSpec) {
	s.object(specFields, func(field int) {
		switch field {
		case 0:
			spec.ResourceAttributes = &authorizationv1.ResourceAttributes{}
			s.resourceAttributes(spec.ResourceAttributes)
		case 1:
			na := &authorizationv1.NonResourceAttributes{}
			spec.NonResourceAttributes = na
			s.object([]string{"path", "verb"}, func(field int) {
				if field == 0 {
					na.Path = s.str()
				} else {
					na.Verb = s.str()
				}
			})
		case 2:
			spec.User = s.str()
		case 3:
			spec.Groups = s.strings()
		case 4:
			spec.Extra = s.extra()
		case 5:
			spec.UID = s.str()
		case 6:
			spec.AuthorizationOptions = &wire.AuthorizationOptions{}
			s.object([]string{"handledDecisionTypes"}, func(int) {
				for _, t := range s.strings() {
					spec.AuthorizationOptions.HandledDecisionTypes = append(spec.AuthorizationOptions.HandledDecisionTypes, wire.DecisionType(t))
				}
				if spec.AuthorizationOptions.HandledDecisionTypes == nil {
					spec.AuthorizationOptions.HandledDecisionTypes = []wire.DecisionType{}
				}
			})
		case 7:
			// Not a Kubernetes field: encoding/json keeps it raw, and
			// the review is refused (handleAuthorize).
			s.ok = false
		}
	})
}

var resourceFields = []string{"namespace", "verb", "group", "version", "resource", "subresource", "name", "fieldSelector", "labelSelector"}

func (s *sarScanner) resourceAttributes(ra *authorizationv1.ResourceAttributes) {
	s.object(resourceFields, func(field int) {
		switch field {
		case 0:
			ra.Namespace = s.str()
		case 1:
			ra.Verb = s.str()
		case 2:
			ra.Group = s.str()
		case 3:
			ra.Version = s.str()
		case 4:
			ra.Resource = s.str()
		case 5:
			ra.Subresource = s.str()
		case 6:
			ra.Name = s.str()
		case 7:
			ra.FieldSelector = &authorizationv1.FieldSelectorAttributes{}
			s.selector(&ra.FieldSelector.RawSelector, func(key, op string, values []string) {
				ra.FieldSelector.Requirements = append(ra.FieldSelector.Requirements, metav1.FieldSelectorRequirement{Key: key, Operator: metav1.FieldSelectorOperator(op), Values: values})
			}, func() {
				ra.FieldSelector.Requirements = []metav1.FieldSelectorRequirement{}
			})
		case 8:
			ra.LabelSelector = &authorizationv1.LabelSelectorAttributes{}
			s.selector(&ra.LabelSelector.RawSelector, func(key, op string, values []string) {
				ra.LabelSelector.Requirements = append(ra.LabelSelector.Requirements, metav1.LabelSelectorRequirement{Key: key, Operator: metav1.LabelSelectorOperator(op), Values: values})
			}, func() {
				ra.LabelSelector.Requirements = []metav1.LabelSelectorRequirement{}
			})
		}
	})
}

var selectorFields, requirementFields = []string{"rawSelector", "requirements"}, []string{"key", "operator", "values"}

// selector decodes a field or label selector: its raw selector into raw,
// each requirement through add; empty runs for an empty list of them.
func (s *sarScanner) selector(raw *string, add func(key, op string, values []string), empty func()) {
	s.object(selectorFields, func(field int) {
		if field == 0 {
			*raw = s.str()
			return
		}
		n := 0
		s.array(func() {
			var key, op string
			var values []string
			s.object(requirementFields, func(field int) {
				switch field {
				case 0:
					key = s.str()
				case 1:
					op = s.str()
				case 2:
					values = s.strings()
				}
			})
			add(key, op, values)
			n++
		})
		if n == 0 {
			empty()
		}
	})
}

// extra decodes spec.extra: an object of string arrays.
func (s *sarScanner) extra() map[string]authorizationv1.ExtraValue {
	out := map[string]authorizationv1.ExtraValue{}
	s.expect('{')
	s.space()
	if s.peek() == '}' {
		s.i++
		return out
	}
	for s.ok {
		s.space()
		key := s.str()
		if _, dup := out[key]; dup {
			s.ok = false
		}
		s.space()
		s.expect(':')
		s.space()
		out[key] = s.strings()
		if !s.next('}') {
			break
		}
	}
	return out
}

// object walks an object whose fields are names: value(i) decodes the value
// of names[i]; other keys' values are skipped.
func (s *sarScanner) object(names []string, value func(field int)) {
	if !s.expect('{') {
		return
	}
	s.space()
	if s.peek() == '}' {
		s.i++
		return
	}
	var seen uint64
	for s.ok {
		s.space()
		field := s.key(names)
		s.space()
		s.expect(':')
		s.space()
		switch {
		case field < 0:
			s.skip()
		case seen&(1<<field) != 0 || s.peek() == 'n':
			s.ok = false // a field given twice, or null
		default:
			seen |= 1 << field
			value(field)
		}
		if !s.next('}') {
			break
		}
	}
}

// key reads an object's key and returns the index of the field it names,
// or -1 for a key that matches no field even with case folded.
func (s *sarScanner) key(names []string) int {
	k := s.rawString()
	for i, n := range names {
		if k == n {
			return i
		}
	}
	for _, c := range []byte(k) {
		if c >= utf8.RuneSelf {
			s.ok = false
			return -1
		}
	}
	for _, n := range names {
		if equalFoldASCII(k, n) {
			s.ok = false
		}
	}
	return -1
}

// equalFoldASCII compares two ASCII strings with letters' case folded.
func equalFoldASCII(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// array walks an array, calling elem at each element.
func (s *sarScanner) array(elem func()) {
	if !s.expect('[') {
		return
	}
	s.space()
	if s.peek() == ']' {
		s.i++
		return
	}
	for s.ok {
		s.space()
		elem()
		if !s.next(']') {
			break
		}
	}
}

// strings decodes an array of strings; [] is an empty slice, not nil, as
// encoding/json makes it.
func (s *sarScanner) strings() []string {
	out := []string{}
	s.array(func() { out = append(out, s.str()) })
	return out
}

// str decodes a string value.
func (s *sarScanner) str() string {
	if s.peek() != '"' {
		s.ok = false
		return ""
	}
	return s.rawString()
}

// rawString reads a string with no escape and only UTF-8 in it.
func (s *sarScanner) rawString() string {
	if !s.expect('"') {
		return ""
	}
	start := s.i
	ascii := true
	for ; s.i < len(s.b); s.i++ {
		switch c := s.b[s.i]; {
		case c == '"':
			v := s.b[start:s.i]
			s.i++
			if !ascii && !utf8.Valid(v) {
				s.ok = false
			}
			if s.text != "" {
				return s.text[start : s.i-1]
			}
			return string(v)
		case c == '\\' || c < ' ':
			s.ok = false // an escape, or a control character JSON refuses
			return ""
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	s.ok = false
	return ""
}

// skipDepthMax is the deepest a skipped value may nest: encoding/json
// refuses a body nested deeper than 10,000 levels, and the fields read put
// a skipped value at most a few levels down.
const skipDepthMax = 10000 - 16

// skip skips one value, and gives up unless it is valid JSON.
func (s *sarScanner) skip() { s.skipValue(0) }

// skipValue skips a value nested depth levels in the skipped one.
func (s *sarScanner) skipValue(depth int) {
	if depth > skipDepthMax {
		s.ok = false
		return
	}
	switch c := s.peek(); {
	case c == '{':
		s.i++
		s.space()
		if s.peek() == '}' {
			s.i++
			return
		}
		for s.ok {
			s.space()
			s.skipString()
			s.space()
			s.expect(':')
			s.space()
			s.skipValue(depth + 1)
			if !s.next('}') {
				return
			}
		}
	case c == '[':
		s.array(func() { s.skipValue(depth + 1) })
	case c == '"':
		s.skipString()
	case c == 't':
		s.literal("true")
	case c == 'f':
		s.literal("false")
	case c == 'n':
		s.literal("null")
	case c == '-' || '0' <= c && c <= '9':
		s.number()
	default:
		s.ok = false
	}
}

// literal reads the bytes of word.
func (s *sarScanner) literal(word string) {
	if s.ok && len(s.b)-s.i >= len(word) && string(s.b[s.i:s.i+len(word)]) == word {
		s.i += len(word)
		return
	}
	s.ok = false
}

// number reads a number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?.
func (s *sarScanner) number() {
	if s.peek() == '-' {
		s.i++
	}
	if s.peek() == '0' {
		s.i++
	} else if !s.digits() {
		return
	}
	if s.peek() == '.' {
		s.i++
		if !s.digits() {
			return
		}
	}
	if c := s.peek(); c == 'e' || c == 'E' {
		s.i++
		if c := s.peek(); c == '+' || c == '-' {
			s.i++
		}
		s.digits()
	}
}

// digits reads one digit or more; false (and not ok) for none.
func (s *sarScanner) digits() bool {
	start := s.i
	for s.i < len(s.b) && '0' <= s.b[s.i] && s.b[s.i] <= '9' {
		s.i++
	}
	if s.i == start {
		s.ok = false
	}
	return s.ok
}

// skipString skips a string, leaving s.i after it: JSON's escapes are
// taken, a control character is not. (Bytes that are not UTF-8 are,
// as encoding/json takes them in a value it skips.)
func (s *sarScanner) skipString() {
	if !s.expect('"') {
		return
	}
	for ; s.i < len(s.b); s.i++ {
		switch c := s.b[s.i]; {
		case c == '"':
			s.i++
			return
		case c < ' ':
			s.ok = false
			return
		case c == '\\':
			if !s.escape() {
				return
			}
		}
	}
	s.ok = false
}

// escape reads the escape at s.i (its backslash) but its last byte.
func (s *sarScanner) escape() bool {
	s.i++
	if s.i >= len(s.b) {
		s.ok = false
		return false
	}
	switch s.b[s.i] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return true
	case 'u':
		if len(s.b)-s.i > 4 && isHex(s.b[s.i+1]) && isHex(s.b[s.i+2]) && isHex(s.b[s.i+3]) && isHex(s.b[s.i+4]) {
			s.i += 4
			return true
		}
	}
	s.ok = false
	return false
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// next reads, after white space, a comma (true: another member follows) or
// the closing byte (false).
func (s *sarScanner) next(closing byte) bool {
	s.space()
	switch s.peek() {
	case ',':
		s.i++
		return true
	case closing:
		s.i++
	default:
		s.ok = false
	}
	return false
}

func (s *sarScanner) space() {
	for s.i < len(s.b) && (s.b[s.i] == ' ' || s.b[s.i] == '\t' || s.b[s.i] == '\n' || s.b[s.i] == '\r') {
		s.i++
	}
}

// peek is the byte at s.i, or 0 at the end.
func (s *sarScanner) peek() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// expect reads byte c.
func (s *sarScanner) expect(c byte) bool {
	if s.ok && s.peek() == c {
		s.i++
		return true
	}
	s.ok = false
	return false
}
