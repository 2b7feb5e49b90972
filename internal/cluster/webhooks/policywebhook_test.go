package webhooks

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// policyWebhook is the configuration kcedar manifests --policy-objects
// prints (cmd/kcedar checks the printed one with CheckPolicyWebhook too).
func policyWebhook() *admissionregistrationv1.ValidatingWebhookConfiguration {
	fail := admissionregistrationv1.Fail
	all := admissionregistrationv1.AllScopes
	url := "https://127.0.0.1:8443/v1/validate-policy"
	return &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "kcedar-policies"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:          "policies.kcedar.dev",
			ClientConfig:  admissionregistrationv1.WebhookClientConfig{URL: &url},
			FailurePolicy: &fail,
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{"CREATE", "UPDATE", "DELETE"},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{"kcedar.dev"}, APIVersions: []string{"v1alpha1"},
					Resources: []string{"cedarpolicies", "namespacedcedarpolicies"}, Scope: &all},
			}},
		}},
	}
}

func TestCheckPolicyWebhook(t *testing.T) {
	if err := CheckPolicyWebhook(policyWebhook()); err != nil {
		t.Fatalf("the printed webhook: %v", err)
	}
	accepted := map[string]func(*admissionregistrationv1.ValidatingWebhookConfiguration){
		"operations *": func(v *admissionregistrationv1.ValidatingWebhookConfiguration) {
			v.Webhooks[0].Rules[0].Operations = []admissionregistrationv1.OperationType{"*"}
		},
		"wildcard group, version, resource": func(v *admissionregistrationv1.ValidatingWebhookConfiguration) {
			v.Webhooks[0].Rules[0].Rule = admissionregistrationv1.Rule{APIGroups: []string{"*"}, APIVersions: []string{"*"}, Resources: []string{"*/*"}}
		},
		"a rule per kind with its scope": func(v *admissionregistrationv1.ValidatingWebhookConfiguration) {
			cluster, ns := admissionregistrationv1.ClusterScope, admissionregistrationv1.NamespacedScope
			r := v.Webhooks[0].Rules[0]
			a, b := r, r
			a.Rule.Resources, a.Rule.Scope = []string{"cedarpolicies"}, &cluster
			b.Rule.Resources, b.Rule.Scope = []string{"namespacedcedarpolicies"}, &ns
			v.Webhooks[0].Rules = []admissionregistrationv1.RuleWithOperations{a, b}
		},
		"a service path, after another webhook": func(v *admissionregistrationv1.ValidatingWebhookConfiguration) {
			p := "/v1/validate-policy"
			other := *printedWebhook().Webhooks[0].DeepCopy()
			v.Webhooks[0].ClientConfig = admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: "kcedar-system", Name: "kcedar", Path: &p}}
			v.Webhooks = append([]admissionregistrationv1.ValidatingWebhook{other}, v.Webhooks...)
		},
	}
	for name, edit := range accepted {
		v := policyWebhook()
		edit(v)
		if err := CheckPolicyWebhook(v); err != nil {
			t.Errorf("%s: refused: %v", name, err)
		}
	}
	refused := map[string]struct {
		edit func(*admissionregistrationv1.ValidatingWebhookConfiguration)
		want string
	}{
		"failurePolicy Ignore": {func(v *admissionregistrationv1.ValidatingWebhookConfiguration) {
			ignore := admissionregistrationv1.Ignore
			v.Webhooks[0].FailurePolicy = &ignore
		}, "failurePolicy is not Fail"},
		"no failurePolicy": {func(v *admissionregistrationv1.ValidatingWebhookConfiguration) { v.Webhooks[0].FailurePolicy = nil }, "failurePolicy"},
		"no DELETE": {func(v *admissionregistrationv1.ValidatingWebhookConfiguration) {
			v.Webhooks[0].Rules[0].Operations = []admissionregistrationv1.OperationType{"CREATE", "UPDATE"}
		}, "no rule sends DELETE of cedarpolicies.kcedar.dev"},
		"one kind only": {func(v *admissionregistrationv1.ValidatingWebhookConfiguration) {
			v.Webhooks[0].Rules[0].Resources = []string{"cedarpolicies"}
		}, "namespacedcedarpolicies"},
		"namespaced kind under cluster scope": {func(v *admissionregistrationv1.ValidatingWebhookConfiguration) {
			cluster := admissionregistrationv1.ClusterScope
			v.Webhooks[0].Rules[0].Scope = &cluster
		}, "namespacedcedarpolicies"},
		"another version": {func(v *admissionregistrationv1.ValidatingWebhookConfiguration) {
			v.Webhooks[0].Rules[0].APIVersions = []string{"v1"}
		}, "no rule sends"},
		"another path": {func(v *admissionregistrationv1.ValidatingWebhookConfiguration) {
			u := "https://127.0.0.1:8443/v1/admit"
			v.Webhooks[0].ClientConfig.URL = &u
		}, "does not call kcedar's /v1/validate-policy"},
		"a namespace selector": {func(v *admissionregistrationv1.ValidatingWebhookConfiguration) {
			v.Webhooks[0].NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"guarded": "yes"}}
		}, "narrowed"},
		"match conditions": {func(v *admissionregistrationv1.ValidatingWebhookConfiguration) {
			v.Webhooks[0].MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "x", Expression: "true"}}
		}, "narrowed"},
		"no webhooks": {func(v *admissionregistrationv1.ValidatingWebhookConfiguration) { v.Webhooks = nil }, "has no webhooks"},
	}
	for name, c := range refused {
		v := policyWebhook()
		c.edit(v)
		err := CheckPolicyWebhook(v)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", name, err, c.want)
		}
	}
}

// waitPolicyVerified checks, once the verifier settled, that v reports want, in its metric too.
func waitPolicyVerified(t *testing.T, v *PolicyVerifier, want bool, what string) {
	t.Helper()
	synctest.Wait() // in the test's bubble: the verifier handled every change
	if v.Verified() != want {
		t.Fatalf("%s: verified is not %v (%v)", what, want, v.Problem())
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(v)
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 || mfs[0].GetName() != "kcedar_policy_webhook_verified" {
		t.Fatalf("%s: metrics %v, %v", what, mfs, err)
	}
	if got := mfs[0].GetMetric()[0].GetGauge().GetValue(); (got == 1) != want {
		t.Fatalf("%s: kcedar_policy_webhook_verified %v", what, got)
	}
}

// The verifier decides once the configuration is listed (missing: not
// verified), then follows it as it is created, weakened, fixed and
// deleted, calling OnChange on each change.
func TestPolicyVerifier(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset()
		v := NewPolicyVerifier("kcedar-policies", nil)
		var changes atomic.Int32
		v.OnChange = func() { changes.Add(1) }
		if v.Verified() || v.Problem() == nil {
			t.Fatal("verified before it ran")
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		done := make(chan struct{})
		go func() { v.Run(ctx, client); close(done) }()
		select {
		case <-v.Decided():
		case <-time.After(10 * time.Second):
			t.Fatal("no first answer")
		}
		if v.Verified() || !strings.Contains(v.Problem().Error(), "not found") {
			t.Fatalf("missing configuration: %v", v.Problem())
		}
		vwcs := client.AdmissionregistrationV1().ValidatingWebhookConfigurations()
		if _, err := vwcs.Create(ctx, policyWebhook(), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitPolicyVerified(t, v, true, "created")
		weak := policyWebhook()
		weak.Webhooks[0].Rules[0].Operations = []admissionregistrationv1.OperationType{"CREATE", "UPDATE"}
		if _, err := vwcs.Update(ctx, weak, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitPolicyVerified(t, v, false, "without DELETE")
		if _, err := vwcs.Update(ctx, policyWebhook(), metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitPolicyVerified(t, v, true, "fixed")
		if err := vwcs.Delete(ctx, "kcedar-policies", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitPolicyVerified(t, v, false, "deleted")
		if n := changes.Load(); n != 5 {
			t.Errorf("OnChange called %d times, want 5 (decided, created, weakened, fixed, deleted)", n)
		}
		cancel()
		<-done
	})
}
