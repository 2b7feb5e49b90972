package webhooks

import (
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/webhook"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	apiserverv1 "k8s.io/apiserver/pkg/apis/apiserver"
	apiservervalidation "k8s.io/apiserver/pkg/apis/apiserver/validation"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"
	authorizationcel "k8s.io/apiserver/pkg/authorization/cel"
	"k8s.io/apiserver/pkg/cel/environment"
)

// bypassConfigurations are the Bypass values kcedar manifests' flags make.
var bypassConfigurations = []Bypass{
	{}, {ControlPlane: true},
	{ServiceAccount: "kcedar-system/kcedar"}, {ServiceAccount: "kcedar-system/kcedar", ControlPlane: true},
	{ServiceAccount: "auth/kc.v2", ControlPlane: true},
}

// upstreamMatchers compiles b's two renderings with Kubernetes' own code:
// the AuthorizationConfiguration's match conditions as kube-apiserver
// validates and compiles them, and the webhook's as its
// ValidatingAdmissionWebhook plugin does (after the validation of a
// ValidatingWebhookConfiguration's new expressions).
func upstreamMatchers(t *testing.T, b Bypass) (*authorizationcel.CELMatcher, matchconditions.Matcher) {
	t.Helper()
	exprs, err := b.AuthorizerMatchConditions()
	if err != nil {
		t.Fatal(err)
	}
	conds := make([]apiserverv1.WebhookMatchCondition, len(exprs))
	for i, e := range exprs {
		conds[i] = apiserverv1.WebhookMatchCondition{Expression: e}
	}
	authz, errs := apiservervalidation.ValidateAndCompileMatchConditions(authorizationcel.NewDefaultCompiler(), conds)
	if len(errs) > 0 {
		t.Fatalf("%+v: kube-apiserver refuses the authorizer's match conditions: %v", b, errs.ToAggregate())
	}
	admissionConds, err := b.AdmissionMatchConditions()
	if err != nil {
		t.Fatal(err)
	}
	envs := environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion())
	for _, c := range admissionConds {
		if errs := validation.IsQualifiedName(c.Name); len(errs) > 0 {
			t.Fatalf("match condition name %q: %v", c.Name, errs)
		}
		res := plugincel.NewCompiler(envs).CompileCELExpression(&matchconditions.MatchCondition{Name: c.Name, Expression: c.Expression},
			plugincel.OptionalVariableDeclarations{HasAuthorizer: true}, environment.NewExpressions)
		if res.Error != nil {
			t.Fatalf("%+v: a ValidatingWebhookConfiguration with %q is refused: %v", b, c.Expression, res.Error)
		}
	}
	fail := admissionregistrationv1.Fail
	wh := &admissionregistrationv1.ValidatingWebhook{Name: "conditions.kcedar.dev", FailurePolicy: &fail, MatchConditions: admissionConds}
	return authz, webhook.NewValidatingWebhookAccessor("uid", "kcedar-conditions", wh).GetCompiledMatcher(plugincel.NewConditionCompiler(envs))
}

// identity is a request's user and groups.
type identity struct {
	user   string
	groups []string
}

// bypassIdentities are users and groups around every rule's edges: valid
// and invalid ServiceAccount usernames of kube-system and elsewhere (as
// serviceaccount.SplitUsername sees them), the control plane's users and
// near misses, and random group sets (none, empty, with and without
// system:masters and system:nodes).
func bypassIdentities(r *rand.Rand) []identity {
	label := func(n int) string {
		const first, inner = "abcdefghijklmnopqrstuvwxyz0123456789", "abcdefghijklmnopqrstuvwxyz0123456789-"
		b := []byte{first[r.IntN(len(first))]}
		for len(b) < n-1 {
			b = append(b, inner[r.IntN(len(inner))])
		}
		if n > 1 {
			b = append(b, first[r.IntN(len(first))])
		}
		return string(b)
	}
	subdomain := func(n int) string {
		var parts []string
		for l := 0; l < n; {
			p := label(1 + r.IntN(min(63, n-l)))
			parts = append(parts, p)
			l += len(p) + 1
		}
		return strings.Join(parts, ".")
	}
	ks := serviceaccount.ServiceAccountUsernamePrefix + "kube-system:"
	long := subdomain(253)
	for len(long) < 253 {
		long += "a"
	}
	users := []string{"", "alice", "system:anonymous", ks, ks + "a", ks + "a-b.c", ks + long[:253], ks + long[:252] + "ab",
		ks + "A", ks + "a_b", ks + "a-", ks + "-a", ks + ".a", ks + "a.", ks + "a..b", ks + "a:b", ks + "a\n", ks + " a", ks + "a ",
		ks + "é", ks + "a/b", "system:serviceaccount:kube-system", "system:serviceaccount:kube-systemx:a", "system:serviceaccount:Kube-system:a",
		"System:serviceaccount:kube-system:a", " system:serviceaccount:kube-system:a", "system:serviceaccount:kube-public:a",
		"system:serviceaccount:kcedar-system:kcedar", "system:serviceaccount:kcedar-system:kcedar2", "system:serviceaccount:kcedar-system:kcedar\n",
		"system:serviceaccount:auth:kc.v2", "system:serviceaccount:auth:kc", "system:kube-scheduler", "system:kube-scheduler ", "system:kube-schedulers",
		"system:kube-controller-manager", "system:kube-proxy", "system:apiserver", "system:node:n1", "system:masters", "'", `\'`, "a' || true || '"}
	users = append(users, ControlPlaneUsers...)
	for range 200 {
		name := subdomain(1 + r.IntN(60))
		switch r.IntN(6) {
		case 0: // an invalid character somewhere
			i := r.IntN(len(name))
			name = name[:i] + string("_A:!~\n"[r.IntN(6)]) + name[i+1:]
		case 1:
			name = label(1 + r.IntN(20)) // a label is a subdomain too
		}
		ns := "kube-system"
		if r.IntN(4) == 0 {
			ns = label(1 + r.IntN(15))
		}
		users = append(users, serviceaccount.MakeUsername(ns, name))
	}
	groupPool := []string{"system:masters", "system:nodes", "system:authenticated", "system:serviceaccounts", "system:serviceaccounts:kube-system", "dev", "system:master", "system:nodes "}
	var out []identity
	for _, u := range users {
		for k := range 3 {
			var groups []string
			switch k {
			case 1:
				groups = []string{}
			case 2:
				for _, g := range groupPool {
					if r.IntN(3) == 0 {
						groups = append(groups, g)
					}
				}
			}
			out = append(out, identity{u, groups})
		}
	}
	return out
}

// TestBypassRenderingsAgree: for every configuration kcedar manifests'
// flags make, the authorizer's match conditions (on a SubjectAccessReview)
// and the webhook's (on an AdmissionRequest), each compiled and evaluated
// by Kubernetes' own code, leave out exactly the identities Bypass.Excludes
// names, with no evaluation error (which would fail the request closed);
// and the kube-system ServiceAccounts they leave out are exactly the
// usernames serviceaccount.SplitUsername accepts in kube-system.
func TestBypassRenderingsAgree(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	ids := bypassIdentities(r)
	ctx := context.Background()
	for _, b := range bypassConfigurations {
		authz, adm := upstreamMatchers(t, b)
		excluded := 0
		for _, id := range ids {
			want := !b.Excludes(id.user, id.groups)
			if !want {
				excluded++
			}
			sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: id.user, Groups: id.groups,
				ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "create", Resource: "pods", Namespace: "ns"}}}
			got, err := true, error(nil) // no match conditions: kcedar is called
			if authz != nil {
				got, err = authz.Eval(ctx, sar)
			}
			if err != nil || got != want {
				t.Errorf("%+v: authorizer for %q %q: calls kcedar %v (%v), want %v", b, id.user, id.groups, got, err, want)
			}
			if got := adm.Match(ctx, admissionAttributes(id), nil, nil); got.Error != nil || got.Matches != want {
				t.Errorf("%+v: webhook for %q %q: calls kcedar %v (%v), want %v", b, id.user, id.groups, got.Matches, got.Error, want)
			}
			if b.ControlPlane && strings.HasPrefix(id.user, serviceaccount.ServiceAccountUsernamePrefix+"kube-system:") &&
				!slices.Contains(id.groups, "system:masters") && !slices.Contains(id.groups, "system:nodes") {
				_, _, err := serviceaccount.SplitUsername(id.user)
				if (err == nil) == want {
					t.Errorf("%+v: %q is a ServiceAccount to Kubernetes: %v, yet bypasses kcedar: %v", b, id.user, err == nil, !want)
				}
			}
		}
		if b != (Bypass{}) && (excluded == 0 || excluded == len(ids)) {
			t.Errorf("%+v: %d of %d identities excluded: the generator misses a side", b, excluded, len(ids))
		}
	}
}

// admissionAttributes is a pod's CREATE by id, as admission sees it.
func admissionAttributes(id identity) *admission.VersionedAttributes {
	pod := &corev1.Pod{}
	kind := schema.GroupVersionKind{Version: "v1", Kind: "Pod"}
	a := admission.NewAttributesRecord(pod, nil, kind, "ns", "p", schema.GroupVersionResource{Version: "v1", Resource: "pods"}, "",
		admission.Create, nil, false, &user.DefaultInfo{Name: id.user, Groups: id.groups})
	return &admission.VersionedAttributes{Attributes: a, VersionedKind: kind, VersionedObject: admission.NewLazyObject(pod)}
}

// TestBypassOf: the verifier recognizes exactly what AdmissionMatchConditions
// renders for a flag combination, and refuses anything wider or different.
func TestBypassOf(t *testing.T) {
	for _, b := range bypassConfigurations {
		conds, err := b.AdmissionMatchConditions()
		if err != nil {
			t.Fatal(err)
		}
		if got, err := BypassOf(conds); err != nil || got != b {
			t.Errorf("%+v: recognized as %+v, %v", b, got, err)
		}
	}
	full, _ := Bypass{ServiceAccount: "kcedar-system/kcedar", ControlPlane: true}.AdmissionMatchConditions()
	mutated := map[string]func([]admissionregistrationv1.MatchCondition) []admissionregistrationv1.MatchCondition{
		"another ServiceAccount's prefix": func(c []admissionregistrationv1.MatchCondition) []admissionregistrationv1.MatchCondition {
			c[3].Expression = strings.Replace(c[3].Expression, "kube-system", "default", 1)
			return c
		},
		"startsWith instead of the pattern": func(c []admissionregistrationv1.MatchCondition) []admissionregistrationv1.MatchCondition {
			c[3].Expression = "!" + admissionEnv.user + ".startsWith('system:serviceaccount:kube-system:')"
			return c
		},
		"an extra condition": func(c []admissionregistrationv1.MatchCondition) []admissionregistrationv1.MatchCondition {
			return append(c, admissionregistrationv1.MatchCondition{Name: "x", Expression: "request.namespace != 'prod'"})
		},
		"an extra user": func(c []admissionregistrationv1.MatchCondition) []admissionregistrationv1.MatchCondition {
			c[4].Expression = strings.Replace(c[4].Expression, "'system:apiserver'", "'system:apiserver', 'mallory'", 1)
			return c
		},
		"a second ServiceAccount": func(c []admissionregistrationv1.MatchCondition) []admissionregistrationv1.MatchCondition {
			extra := c[0]
			extra.Expression = strings.Replace(extra.Expression, ":kcedar'", ":mallory'", 1)
			return append(c, extra)
		},
		"a ServiceAccount that is not one": func(c []admissionregistrationv1.MatchCondition) []admissionregistrationv1.MatchCondition {
			c[0].Expression = admissionEnv.user + " != 'system:serviceaccount:kcedar-system:kcedar' || true"
			return c
		},
		"renamed": func(c []admissionregistrationv1.MatchCondition) []admissionregistrationv1.MatchCondition {
			c[1].Name = "masters"
			return c
		},
		"reordered": func(c []admissionregistrationv1.MatchCondition) []admissionregistrationv1.MatchCondition {
			c[1], c[2] = c[2], c[1]
			return c
		},
		"the authorizer's expression": func(c []admissionregistrationv1.MatchCondition) []admissionregistrationv1.MatchCondition {
			c[1].Expression = "!has(request.groups) || !('system:masters' in request.groups)"
			return c
		},
	}
	for name, mutate := range mutated {
		conds := mutate(slices.Clone(full))
		if got, err := BypassOf(conds); err == nil {
			t.Errorf("%s: accepted as %+v", name, got)
		}
	}
	if _, err := (Bypass{ServiceAccount: "bad"}).AdmissionMatchConditions(); err == nil {
		t.Error("a malformed ServiceAccount rendered")
	}
	if _, err := (Bypass{ServiceAccount: "ns/a'b"}).AuthorizerMatchConditions(); err == nil {
		t.Error("a ServiceAccount with a quote rendered")
	}
}
