package upstream

import (
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/kcedar/kcedar/internal/entities"
)

// Request is a as kcedar's request: the SubjectAccessReview spec that
// k8s.io/apiserver's webhook authorizer builds from a, then
// entities.RequestFromSAR, so an embedded authorizer and the webhook decide
// the same request. Selector requirements with operators the review cannot
// carry are dropped, as the webhook drops them (only narrowing is lost).
// Strings are read as the review carries them (wireString).
func Request(a authorizer.Attributes) (*entities.Request, error) {
	spec := &authorizationv1.SubjectAccessReviewSpec{}
	if u := userInfo(a.GetUser()); u != nil {
		spec.User, spec.UID, spec.Groups = u.Name, u.UID, u.Groups
		if len(u.Extra) > 0 {
			spec.Extra = make(map[string]authorizationv1.ExtraValue, len(u.Extra))
			for k, v := range u.Extra {
				spec.Extra[k] = v
			}
		}
	}
	if !a.IsResourceRequest() {
		spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: wireString(a.GetPath()), Verb: wireString(a.GetVerb())}
		return entities.RequestFromSAR(spec)
	}
	ra := &authorizationv1.ResourceAttributes{
		Namespace: wireString(a.GetNamespace()), Verb: wireString(a.GetVerb()), Group: wireString(a.GetAPIGroup()), Version: wireString(a.GetAPIVersion()),
		Resource: wireString(a.GetResource()), Subresource: wireString(a.GetSubresource()), Name: wireString(a.GetName()),
	}
	if reqs := fieldRequirements(a); len(reqs) > 0 {
		ra.FieldSelector = &authorizationv1.FieldSelectorAttributes{Requirements: reqs}
	}
	if reqs := labelRequirements(a); len(reqs) > 0 {
		ra.LabelSelector = &authorizationv1.LabelSelectorAttributes{Requirements: reqs}
	}
	spec.ResourceAttributes = ra
	return entities.RequestFromSAR(spec)
}

// fieldRequirements are a's field selector requirements a review carries:
// equality and inequality (a parse error keeps what parsed; selectors only
// narrow).
func fieldRequirements(a authorizer.Attributes) []metav1.FieldSelectorRequirement {
	parsed, _ := a.GetFieldSelector()
	var out []metav1.FieldSelectorRequirement
	for _, r := range parsed {
		op := metav1.FieldSelectorOpIn
		switch r.Operator {
		case selection.Equals, selection.DoubleEquals, selection.In:
		case selection.NotEquals, selection.NotIn:
			op = metav1.FieldSelectorOpNotIn
		default:
			continue
		}
		out = append(out, metav1.FieldSelectorRequirement{Key: wireString(r.Field), Operator: op, Values: []string{wireString(r.Value)}})
	}
	return out
}

// labelSelectorOps maps the label selector operators a review carries.
var labelSelectorOps = map[selection.Operator]metav1.LabelSelectorOperator{
	selection.Equals: metav1.LabelSelectorOpIn, selection.DoubleEquals: metav1.LabelSelectorOpIn, selection.In: metav1.LabelSelectorOpIn,
	selection.NotEquals: metav1.LabelSelectorOpNotIn, selection.NotIn: metav1.LabelSelectorOpNotIn,
	selection.Exists: metav1.LabelSelectorOpExists, selection.DoesNotExist: metav1.LabelSelectorOpDoesNotExist,
}

// labelRequirements are a's label selector requirements a review carries.
func labelRequirements(a authorizer.Attributes) []metav1.LabelSelectorRequirement {
	parsed, _ := a.GetLabelSelector()
	var out []metav1.LabelSelectorRequirement
	for _, r := range parsed {
		op, ok := labelSelectorOps[r.Operator()]
		if !ok {
			continue
		}
		req := metav1.LabelSelectorRequirement{Key: wireString(r.Key()), Operator: op}
		if values := r.ValuesUnsorted(); len(values) > 0 {
			req.Values = wireStrings(values)
		}
		out = append(out, req)
	}
	return out
}

// userInfo is u as a review (or the callback's admissionRequest) carries it
// (wireString); nil for no user. Extra keys that become one are merged as
// the review's JSON merges them: the last in byte order wins.
func userInfo(u user.Info) *entities.UserInfo {
	if u == nil {
		return nil
	}
	out := &entities.UserInfo{Name: wireString(u.GetName()), UID: wireString(u.GetUID()), Groups: wireStrings(u.GetGroups())}
	extra := u.GetExtra()
	if len(extra) == 0 {
		return out
	}
	out.Extra = make(map[string][]string, len(extra))
	valid := true
	for k, v := range extra {
		valid = valid && utf8.ValidString(k)
		out.Extra[k] = wireStrings(v)
	}
	if !valid {
		clear(out.Extra)
		keys := slices.Sorted(maps.Keys(extra))
		for _, k := range keys {
			out.Extra[wireString(k)] = wireStrings(extra[k])
		}
	}
	return out
}

// wireString is s as it reaches kcedar's webhook: k8s.io/apiserver's webhook
// authorizer sends the review as JSON, whose encoding (encoding/json)
// replaces each byte that is not part of valid UTF-8 with U+FFFD. Attributes
// can hold such bytes (a request path or name percent-decoded from the URL,
// a user name from a request header), and Cedar compares strings byte by
// byte, so in process they are replaced the same way.
func wireString(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteString("\uFFFD")
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// wireStrings is ss with wireString applied, ss itself when nothing changes
// (nil stays nil).
func wireStrings(ss []string) []string {
	for i, s := range ss {
		if !utf8.ValidString(s) {
			out := slices.Clone(ss)
			for j := i; j < len(out); j++ {
				out[j] = wireString(out[j])
			}
			return out
		}
	}
	return ss
}

// User is u as kcedar's user, its strings as a review carries them (the
// rules review's subject; nil u is the empty user).
func User(u user.Info) entities.UserInfo {
	if info := userInfo(u); info != nil {
		return *info
	}
	return entities.UserInfo{}
}
