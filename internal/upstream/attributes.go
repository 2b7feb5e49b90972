package upstream

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/kcedar/kcedar/internal/entities"
)

// Request is a as kcedar's request: the request kcedar's webhook decides
// for the SubjectAccessReview k8s.io/apiserver's webhook authorizer builds
// from a (entities.RequestFromSAR of it), built from a directly, so an
// embedded authorizer and the webhook decide the same request. Selector
// requirements with operators the review cannot carry are dropped, as the
// webhook drops them (only narrowing is lost), and a field selector's
// single-valued equality on metadata.name or metadata.namespace names an
// open name or namespace. Strings are read as the review carries them
// (wireString). The user extra entities.UnconditionalOnlyExtra asks for
// the unconditional decision and is removed.
func Request(a authorizer.Attributes) (*entities.Request, error) {
	r := &entities.Request{}
	if u := a.GetUser(); u != nil {
		r.User = userValue(u)
		if _, ok := r.User.Extra[entities.UnconditionalOnlyExtra]; ok {
			r.UnconditionalOnly = true
			delete(r.User.Extra, entities.UnconditionalOnlyExtra)
			if len(r.User.Extra) == 0 {
				r.User.Extra = nil
			}
		}
	}
	r.Verb = wireString(a.GetVerb())
	if a.IsResourceRequest() {
		r.ResourceRequest = true
		r.Namespace, r.APIGroup, r.APIVersion = wireString(a.GetNamespace()), wireString(a.GetAPIGroup()), wireString(a.GetAPIVersion())
		r.Resource, r.Subresource, r.Name = wireString(a.GetResource()), wireString(a.GetSubresource()), wireString(a.GetName())
		narrowByFields(r, a)
		r.LabelSelector = labelRequirements(a)
	} else {
		r.Path = wireString(a.GetPath())
	}
	if r.Verb == "" {
		return nil, errors.New("verb is empty")
	}
	if r.User.Name == "" && len(r.User.Groups) == 0 {
		return nil, errors.New("user and groups are empty")
	}
	return r, nil
}

// narrowByFields makes r's open name or namespace known from a's field
// selector: a requirement metadata.name or metadata.namespace equal to one
// value that is not empty (the review's operator In with one value), the
// first of each (a parse error keeps what parsed; selectors only narrow).
func narrowByFields(r *entities.Request, a authorizer.Attributes) {
	parsed, _ := a.GetFieldSelector()
	for _, req := range parsed {
		switch req.Operator {
		case selection.Equals, selection.DoubleEquals, selection.In:
		default:
			continue
		}
		v := wireString(req.Value)
		if v == "" {
			continue
		}
		switch key := wireString(req.Field); {
		case key == "metadata.name" && r.Name == "":
			r.Name, r.NameFromSelector = v, true
		case key == "metadata.namespace" && r.Namespace == "":
			r.Namespace = v
		}
	}
}

// labelSelectorOps maps the label selector operators a review carries.
var labelSelectorOps = map[selection.Operator]metav1.LabelSelectorOperator{
	selection.Equals: metav1.LabelSelectorOpIn, selection.DoubleEquals: metav1.LabelSelectorOpIn, selection.In: metav1.LabelSelectorOpIn,
	selection.NotEquals: metav1.LabelSelectorOpNotIn, selection.NotIn: metav1.LabelSelectorOpNotIn,
	selection.Exists: metav1.LabelSelectorOpExists, selection.DoesNotExist: metav1.LabelSelectorOpDoesNotExist,
}

// labelRequirements are a's label selector requirements a review carries,
// in order; nil for none.
func labelRequirements(a authorizer.Attributes) []entities.LabelRequirement {
	parsed, _ := a.GetLabelSelector()
	var out []entities.LabelRequirement
	for _, r := range parsed {
		op, ok := labelSelectorOps[r.Operator()]
		if !ok {
			continue
		}
		req := entities.LabelRequirement{Key: wireString(r.Key()), Op: op}
		if values := r.ValuesUnsorted(); len(values) > 0 {
			req.Values = slices.Clone(wireStrings(values))
		}
		out = append(out, req)
	}
	return out
}

// userInfo is u as a review (or the callback's admissionRequest) carries it
// (userValue); nil for no user.
func userInfo(u user.Info) *entities.UserInfo {
	if u == nil {
		return nil
	}
	out := userValue(u)
	return &out
}

// userValue is u, not nil, as a review carries it (wireString). Extra keys
// that become one are merged as the review's JSON merges them: the last in
// byte order wins.
func userValue(u user.Info) entities.UserInfo {
	out := entities.UserInfo{Name: wireString(u.GetName()), UID: wireString(u.GetUID()), Groups: wireStrings(u.GetGroups())}
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
