package webhooks

import (
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

func printedWebhook() *admissionregistrationv1.ValidatingWebhookConfiguration {
	fail := admissionregistrationv1.Fail
	all := admissionregistrationv1.AllScopes
	url := "https://127.0.0.1:8443/v1/admit"
	return &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "kcedar-conditions"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:          "conditions.kcedar.dev",
			ClientConfig:  admissionregistrationv1.WebhookClientConfig{URL: &url},
			FailurePolicy: &fail,
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{"CREATE", "UPDATE", "DELETE", "CONNECT"},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{"*"}, APIVersions: []string{"*"}, Resources: []string{"*/*"}, Scope: &all},
			}},
		}},
	}
}

func TestCheck(t *testing.T) {
	if err := Check(printedWebhook()); err != nil {
		t.Fatalf("the webhook kcedar manifests prints: %v", err)
	}
	ignore := admissionregistrationv1.Ignore
	ns := admissionregistrationv1.NamespacedScope
	other := "https://elsewhere/validate"
	broken := map[string]func(*admissionregistrationv1.ValidatingWebhook){
		"failurePolicy Ignore": func(w *admissionregistrationv1.ValidatingWebhook) { w.FailurePolicy = &ignore },
		"no failurePolicy":     func(w *admissionregistrationv1.ValidatingWebhook) { w.FailurePolicy = nil },
		"another URL":          func(w *admissionregistrationv1.ValidatingWebhook) { w.ClientConfig.URL = &other },
		"no CONNECT":           func(w *admissionregistrationv1.ValidatingWebhook) { w.Rules[0].Operations = w.Rules[0].Operations[:3] },
		"only pods":            func(w *admissionregistrationv1.ValidatingWebhook) { w.Rules[0].Resources = []string{"pods"} },
		"only the core group":  func(w *admissionregistrationv1.ValidatingWebhook) { w.Rules[0].APIGroups = []string{""} },
		"namespaced scope":     func(w *admissionregistrationv1.ValidatingWebhook) { w.Rules[0].Scope = &ns },
		"a namespace selector": func(w *admissionregistrationv1.ValidatingWebhook) {
			w.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}
		},
		"a match condition": func(w *admissionregistrationv1.ValidatingWebhook) {
			w.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "x", Expression: "false"}}
		},
		"an object selector": func(w *admissionregistrationv1.ValidatingWebhook) {
			w.ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}
		},
		"a version list": func(w *admissionregistrationv1.ValidatingWebhook) { w.Rules[0].APIVersions = []string{"v1"} },
	}
	for name, mutate := range broken {
		vwc := printedWebhook()
		mutate(&vwc.Webhooks[0])
		if err := Check(vwc); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// The operations may also be spread over several rules, or be "*".
	vwc := printedWebhook()
	r := vwc.Webhooks[0].Rules[0]
	vwc.Webhooks[0].Rules = []admissionregistrationv1.RuleWithOperations{r, r}
	vwc.Webhooks[0].Rules[0].Operations = []admissionregistrationv1.OperationType{"CREATE", "UPDATE"}
	vwc.Webhooks[0].Rules[1].Operations = []admissionregistrationv1.OperationType{"*"}
	if err := Check(vwc); err != nil {
		t.Errorf("split rules: %v", err)
	}
	// kcedar manifests' match conditions leave out exactly the identities
	// the AuthorizationConfiguration sends past kcedar: accepted, and
	// reported.
	for _, want := range bypassConfigurations {
		vwc := printedWebhook()
		conds, err := want.AdmissionMatchConditions()
		if err != nil {
			t.Fatal(err)
		}
		vwc.Webhooks[0].MatchConditions = conds
		if got, err := Inspect(vwc); err != nil || got != want {
			t.Errorf("kcedar manifests' match conditions for %+v: %+v, %v", want, got, err)
		}
	}
	b, _ := yaml.Marshal(vwc)
	if !strings.Contains(string(b), "/v1/admit") {
		t.Fatal("sanity")
	}
}
