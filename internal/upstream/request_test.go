package upstream

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/kcedar/kcedar/internal/entities"
)

// Request builds kcedar's request from the attributes directly. Its oracle
// is the webhook's path: the SubjectAccessReview k8s.io/apiserver's webhook
// authorizer sends for the attributes (webhookSpec), through JSON as it
// travels, read by entities.RequestFromSAR as kcedar's webhook reads it.
// Over generated attributes (users, extra with the unconditional-only key,
// bytes that are not UTF-8, field and label selectors with every operator,
// parse errors) both give the same request, or both an error.
func TestRequestIsTheWebhooksRequest(t *testing.T) {
	rng := rand.New(rand.NewPCG(45, 1))
	var named, narrowedNS, labelled, unconditional int
	for i := range 20000 {
		a := randomAttributes(rng)
		got, gotErr := Request(a)
		want, wantErr := entities.RequestFromSAR(overTheWire(t, webhookSpec(a)))
		if (gotErr != nil) != (wantErr != nil) || gotErr != nil && gotErr.Error() != wantErr.Error() {
			t.Fatalf("#%d %s: error %v, the webhook's %v", i, describe(a), gotErr, wantErr)
		}
		if gotErr != nil {
			continue
		}
		if g, w := normalized(got), normalized(want); !reflect.DeepEqual(g, w) {
			t.Fatalf("#%d %s:\n  got  %+v\n  want %+v", i, describe(a), g, w)
		}
		if got.NameFromSelector {
			named++
		}
		if got.Namespace != "" && a.GetNamespace() == "" {
			narrowedNS++
		}
		if len(got.LabelSelector) > 0 {
			labelled++
		}
		if got.UnconditionalOnly {
			unconditional++
		}
	}
	if named == 0 || narrowedNS == 0 || labelled == 0 || unconditional == 0 {
		t.Errorf("weak generator: named by selector %d, namespace by selector %d, label selectors %d, unconditional-only %d",
			named, narrowedNS, labelled, unconditional)
	}
}

// webhookSpec is the SubjectAccessReview spec k8s.io/apiserver's webhook
// authorizer builds from a: the user, the request, and the selector
// requirements a review can carry (equality and inequality of fields; In,
// NotIn, Exists and DoesNotExist of labels), what parsed of a selector
// that did not parse whole.
func webhookSpec(a authorizer.Attributes) *authorizationv1.SubjectAccessReviewSpec {
	spec := &authorizationv1.SubjectAccessReviewSpec{}
	if u := a.GetUser(); u != nil {
		spec.User, spec.UID, spec.Groups = u.GetName(), u.GetUID(), u.GetGroups()
		if extra := u.GetExtra(); len(extra) > 0 {
			spec.Extra = make(map[string]authorizationv1.ExtraValue, len(extra))
			for k, v := range extra {
				spec.Extra[k] = v
			}
		}
	}
	if !a.IsResourceRequest() {
		spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: a.GetPath(), Verb: a.GetVerb()}
		return spec
	}
	ra := &authorizationv1.ResourceAttributes{Namespace: a.GetNamespace(), Verb: a.GetVerb(), Group: a.GetAPIGroup(), Version: a.GetAPIVersion(),
		Resource: a.GetResource(), Subresource: a.GetSubresource(), Name: a.GetName()}
	fieldReqs, _ := a.GetFieldSelector()
	var fs []metav1.FieldSelectorRequirement
	for _, r := range fieldReqs {
		switch r.Operator {
		case selection.Equals, selection.DoubleEquals, selection.In:
			fs = append(fs, metav1.FieldSelectorRequirement{Key: r.Field, Operator: metav1.FieldSelectorOpIn, Values: []string{r.Value}})
		case selection.NotEquals, selection.NotIn:
			fs = append(fs, metav1.FieldSelectorRequirement{Key: r.Field, Operator: metav1.FieldSelectorOpNotIn, Values: []string{r.Value}})
		}
	}
	if len(fs) > 0 {
		ra.FieldSelector = &authorizationv1.FieldSelectorAttributes{Requirements: fs}
	}
	labelReqs, _ := a.GetLabelSelector()
	var ls []metav1.LabelSelectorRequirement
	for _, r := range labelReqs {
		op, ok := labelSelectorOps[r.Operator()]
		if !ok {
			continue
		}
		req := metav1.LabelSelectorRequirement{Key: r.Key(), Operator: op}
		if values := r.ValuesUnsorted(); len(values) > 0 {
			req.Values = values
		}
		ls = append(ls, req)
	}
	if len(ls) > 0 {
		ra.LabelSelector = &authorizationv1.LabelSelectorAttributes{Requirements: ls}
	}
	spec.ResourceAttributes = ra
	return spec
}

// overTheWire is spec as kcedar's webhook reads it: encoded and decoded as
// JSON.
func overTheWire(t *testing.T, spec *authorizationv1.SubjectAccessReviewSpec) *authorizationv1.SubjectAccessReviewSpec {
	raw, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	var out authorizationv1.SubjectAccessReviewSpec
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return &out
}

// normalized is r with empty slices and maps as nil: JSON does not keep
// the difference, and kcedar reads none.
func normalized(r *entities.Request) entities.Request {
	c := *r
	if len(c.User.Groups) == 0 {
		c.User.Groups = nil
	}
	if len(c.User.Extra) == 0 {
		c.User.Extra = nil
	} else {
		extra := make(map[string][]string, len(c.User.Extra))
		for k, v := range c.User.Extra {
			if len(v) == 0 {
				v = nil
			}
			extra[k] = v
		}
		c.User.Extra = extra
	}
	if len(c.LabelSelector) == 0 {
		c.LabelSelector = nil
	}
	for i, l := range c.LabelSelector {
		if len(l.Values) == 0 {
			c.LabelSelector[i].Values = nil
		}
	}
	return c
}

// randomAttributes are attributes as kube-apiserver hands an authorizer,
// with the parts that vary drawn at random.
func randomAttributes(rng *rand.Rand) authorizer.AttributesRecord {
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	maybeMangled := func(s string) string {
		if rng.IntN(8) == 0 {
			return s + randomBytes(rng)
		}
		return s
	}
	a := authorizer.AttributesRecord{Verb: maybeMangled(pick("get", "list", "watch", "create", "delete", "*", ""))}
	if rng.IntN(12) > 0 {
		u := &user.DefaultInfo{Name: maybeMangled(pick("alice", "bob", "system:serviceaccount:ns:sa", "")), UID: pick("", "uid-1")}
		for range rng.IntN(3) {
			u.Groups = append(u.Groups, maybeMangled(pick("dev", "system:authenticated", "ops")))
		}
		if rng.IntN(3) == 0 {
			u.Extra = map[string][]string{}
			for range 1 + rng.IntN(3) {
				key := pick("scopes", entities.UnconditionalOnlyExtra, "team", "authentication.kubernetes.io/node-name")
				u.Extra[maybeMangled(key)] = []string{maybeMangled(pick("a", "b", "true"))}[:rng.IntN(2)]
			}
		}
		a.User = u
	}
	if rng.IntN(6) == 0 {
		a.Path = maybeMangled(pick("/healthz", "/api", "/metrics/"))
		return a
	}
	a.ResourceRequest = true
	a.APIGroup, a.APIVersion = pick("", "apps", "*"), pick("", "v1", "v1beta1")
	a.Resource, a.Subresource = maybeMangled(pick("pods", "secrets", "deployments", "*")), pick("", "", "status", "exec")
	a.Namespace, a.Name = maybeMangled(pick("", "", "team", "kube-system")), maybeMangled(pick("", "", "web", "db"))
	if rng.IntN(2) == 0 {
		a.FieldSelectorRequirements, a.FieldSelectorParsingErr = randomFields(rng)
	}
	if rng.IntN(2) == 0 {
		a.LabelSelectorRequirements, a.LabelSelectorParsingErr = randomLabels(rng)
	}
	return a
}

// randomFields is a field selector: equality and inequality on the name,
// the namespace and other fields, values empty, mangled or plain, and now
// and then a parse error beside what parsed.
func randomFields(rng *rand.Rand) (fields.Requirements, error) {
	ops := []selection.Operator{selection.Equals, selection.DoubleEquals, selection.NotEquals, selection.In, selection.NotIn, selection.Exists}
	var out fields.Requirements
	for range 1 + rng.IntN(3) {
		key := []string{"metadata.name", "metadata.namespace", "spec.nodeName"}[rng.IntN(3)]
		value := []string{"", "web", "team", "n1\xff"}[rng.IntN(4)]
		out = append(out, fields.Requirement{Operator: ops[rng.IntN(len(ops))], Field: key, Value: value})
	}
	if rng.IntN(5) == 0 {
		return out, fmt.Errorf("a selector that did not parse whole")
	}
	return out, nil
}

// randomLabels is a label selector of every operator, with values a
// review carries and ones it does not (> and <).
func randomLabels(rng *rand.Rand) (labels.Requirements, error) {
	ops := []selection.Operator{selection.Equals, selection.DoubleEquals, selection.In, selection.NotEquals, selection.NotIn,
		selection.Exists, selection.DoesNotExist, selection.GreaterThan, selection.LessThan}
	var out labels.Requirements
	for range 1 + rng.IntN(3) {
		op := ops[rng.IntN(len(ops))]
		var values []string
		switch op {
		case selection.Exists, selection.DoesNotExist:
		case selection.GreaterThan, selection.LessThan:
			values = []string{"2"}
		case selection.In, selection.NotIn:
			values = []string{"b", "a", "c"}[:1+rng.IntN(3)]
		default:
			values = []string{"a"}
		}
		r, err := labels.NewRequirement([]string{"app", "tier", "example.com/team"}[rng.IntN(3)], op, values)
		if err != nil {
			return out, err
		}
		out = append(out, *r)
	}
	return out, nil
}

// describe names attributes in a failure.
func describe(a authorizer.AttributesRecord) string {
	fs, _ := a.GetFieldSelector()
	ls, _ := a.GetLabelSelector()
	var u any
	if a.User != nil {
		u = a.User
	}
	return fmt.Sprintf("user=%+v verb=%q resource=%v %q/%q %q/%q ns=%q name=%q path=%q fields=%v labels=%v",
		u, a.Verb, a.ResourceRequest, a.APIGroup, a.APIVersion, a.Resource, a.Subresource, a.Namespace, a.Name, a.Path, fs, ls)
}
