package kube138

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/union"
)

// kepAuthorizer2 is the KEP draft's "Authorizer 2" as a kcedar policy:
// an allow condition, metadata.labels.env == "dev".
const kepAuthorizer2 = `@id("kep-authorizer-2")
permit (principal, action == k8s::Action::"create", resource is core::secrets)
when {
  resource has object &&
  resource.object.metadata has labels &&
  resource.object.metadata.labels.hasTag("env") &&
  resource.object.metadata.labels.getTag("env") == "dev"
};
`

// kepAuthorizer1 is the KEP draft's "Authorizer 1", in process: on
// creates of secrets a deny condition (labels.owner != "lucas"), a
// noOpinion condition (labels.visible != "true") and two allow conditions
// (type == kubernetes.io/basic-auth, labels.public == "true"). An absent
// label reads as "".
type kepAuthorizer1 struct{}

var kepConditions = map[string]func(*corev1.Secret) bool{
	"kep.kube138.test/not-lucas":  func(s *corev1.Secret) bool { return s.Labels["owner"] != "lucas" },
	"kep.kube138.test/invisible":  func(s *corev1.Secret) bool { return s.Labels["visible"] != "true" },
	"kep.kube138.test/basic-auth": func(s *corev1.Secret) bool { return s.Type == corev1.SecretTypeBasicAuth },
	"kep.kube138.test/public":     func(s *corev1.Secret) bool { return s.Labels["public"] == "true" },
}

func kepCondition(id string) authorizer.Condition {
	return authorizer.GenericCondition{ID: id, Type: "kep.kube138.test/go"}
}

func (kepAuthorizer1) ConditionsAwareAuthorize(_ context.Context, a authorizer.Attributes) authorizer.ConditionsAwareDecision {
	if a.GetVerb() != "create" || a.GetResource() != "secrets" {
		return authorizer.ConditionsAwareDecisionNoOpinion("", nil)
	}
	return authorizer.ConditionsAwareDecisionConditionsMap(
		[]authorizer.Condition{kepCondition("kep.kube138.test/not-lucas")},
		[]authorizer.Condition{kepCondition("kep.kube138.test/invisible")},
		[]authorizer.Condition{kepCondition("kep.kube138.test/basic-auth"), kepCondition("kep.kube138.test/public")})
}

func (k kepAuthorizer1) Authorize(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	return k.ConditionsAwareAuthorize(ctx, a).UnconditionalPartsOrFailClosed()
}

func (kepAuthorizer1) EvaluateConditions(ctx context.Context, d authorizer.ConditionsAwareDecision, data authorizer.ConditionsData) (authorizer.Decision, string, error) {
	return d.ConditionsMap().Evaluate(ctx, data, func(_ context.Context, c authorizer.Condition, data authorizer.ConditionsData) (bool, error) {
		s, ok := data.GetObject().(*corev1.Secret)
		if !ok {
			return false, errors.New("not a Secret")
		}
		return kepConditions[c.GetID()](s), nil
	})
}

// kepIsAuthorized is the KEP draft's predicate for the two authorizers, in
// its disjunctive normal form.
func kepIsAuthorized(s *corev1.Secret) bool {
	owner, visible := s.Labels["owner"] == "lucas", s.Labels["visible"] == "true"
	return owner && visible && s.Type == corev1.SecretTypeBasicAuth ||
		owner && visible && s.Labels["public"] == "true" ||
		owner && s.Labels["env"] == "dev"
}

// TestKEPAuthorizerChain: the KEP draft's example of two conditional
// authorizers in a chain (Authorizer 1 in process, Authorizer 2 kcedar over
// the webhook), through the union, the filter and the conditions enforcer,
// allows exactly the secrets the draft's predicate accepts, for every
// combination of the labels and types it reads.
func TestKEPAuthorizerChain(t *testing.T) {
	enableConditionalAuthorization(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "kep-authorizer-2.cedar"), []byte(kepAuthorizer2), 0o644); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, []string{dir}, "--bypass-control-plane=false")
	chain, err := union.New(union.NamedAuthorizer{AuthorizerName: "authorizer-1.kube138.test", Authorizer: kepAuthorizer1{}},
		union.NamedAuthorizer{AuthorizerName: kcedarWebhookName, Authorizer: h.webhook})
	if err != nil {
		t.Fatal(err)
	}
	h.union = chain
	ctx := context.Background()
	n := 0
	for _, s := range kepSecrets() {
		n++
		c := requestCase{name: fmt.Sprintf("create secret labelled %v of type %s", s.Labels, s.Type),
			spec:      writeSpec("lucas", "team-1", "create", "secrets"),
			admission: &admissionData{operation: admission.Create, object: s}}
		code, body := h.serve(ctx, &c)
		if want := kepIsAuthorized(s); (code == http.StatusOK) != want {
			t.Errorf("%s: HTTP %d %s; the KEP's predicate: allowed=%v", c.name, code, body, want)
		}
		for _, p := range h.counts.check(ctx, h.wire.take()) {
			t.Errorf("%s: %s", c.name, p)
		}
	}
	t.Logf("%d secrets; %d callbacks", n, h.counts.callbacks)
}

// kepSecrets are secrets with every combination of the labels owner,
// visible, public and env (each also absent) and of two types.
func kepSecrets() []*corev1.Secret {
	var out []*corev1.Secret
	for _, owner := range []string{"lucas", "other", ""} {
		for _, visible := range []string{"true", "false", ""} {
			for _, public := range []string{"true", ""} {
				for _, env := range []string{"dev", "prod", ""} {
					for _, typ := range []corev1.SecretType{corev1.SecretTypeBasicAuth, corev1.SecretTypeOpaque} {
						labels := map[string]string{}
						for k, v := range map[string]string{"owner": owner, "visible": visible, "public": public, "env": env} {
							if v != "" {
								labels[k] = v
							}
						}
						out = append(out, &corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
							ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns-1", Labels: labels}, Type: typ})
					}
				}
			}
		}
	}
	return out
}

var _ authorizer.Authorizer = kepAuthorizer1{}
