package webhooks

import (
	"fmt"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

// Check reports why a ValidatingWebhookConfiguration does not
// enforce kcedar's conditions: it must fail closed and send CREATE, UPDATE,
// DELETE and CONNECT of every group, version, resource and subresource to
// kcedar's /v1/admit.
func Check(vwc *admissionregistrationv1.ValidatingWebhookConfiguration) error {
	for _, wh := range vwc.Webhooks {
		if err := checkWebhook(wh); err == nil {
			return nil
		} else if len(vwc.Webhooks) == 1 {
			return fmt.Errorf("webhook %s: %w", wh.Name, err)
		}
	}
	return fmt.Errorf("%s has no webhook that sends every write and connect to kcedar's /v1/admit with failurePolicy Fail", vwc.Name)
}

func checkWebhook(wh admissionregistrationv1.ValidatingWebhook) error {
	if wh.FailurePolicy == nil || *wh.FailurePolicy != admissionregistrationv1.Fail {
		return fmt.Errorf("failurePolicy is not Fail")
	}
	path := ""
	switch {
	case wh.ClientConfig.URL != nil:
		path = *wh.ClientConfig.URL
	case wh.ClientConfig.Service != nil && wh.ClientConfig.Service.Path != nil:
		path = *wh.ClientConfig.Service.Path
	}
	if !strings.HasSuffix(path, "/v1/admit") {
		return fmt.Errorf("it does not call kcedar's /v1/admit (%q)", path)
	}
	if wh.NamespaceSelector != nil && (len(wh.NamespaceSelector.MatchLabels) > 0 || len(wh.NamespaceSelector.MatchExpressions) > 0) ||
		wh.ObjectSelector != nil && (len(wh.ObjectSelector.MatchLabels) > 0 || len(wh.ObjectSelector.MatchExpressions) > 0) ||
		len(wh.MatchConditions) > 0 {
		return fmt.Errorf("it is narrowed by selectors or match conditions")
	}
	need := []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete, admissionregistrationv1.Connect}
	for _, op := range need {
		covered := false
		for _, r := range wh.Rules {
			opOK := slices.Contains(r.Operations, op) || slices.Contains(r.Operations, admissionregistrationv1.OperationAll)
			scopeOK := r.Scope == nil || *r.Scope == admissionregistrationv1.AllScopes
			if opOK && scopeOK && slices.Contains(r.APIGroups, "*") && slices.Contains(r.APIVersions, "*") && slices.Contains(r.Resources, "*/*") {
				covered = true
				break
			}
		}
		if !covered {
			return fmt.Errorf("no rule sends %s of every group, version, resource and subresource (*/*)", op)
		}
	}
	return nil
}
