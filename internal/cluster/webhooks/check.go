package webhooks

import (
	"fmt"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

// Check reports why a ValidatingWebhookConfiguration does not
// enforce kcedar's conditions (see Inspect).
func Check(vwc *admissionregistrationv1.ValidatingWebhookConfiguration) error {
	_, err := Inspect(vwc)
	return err
}

// Inspect checks that a ValidatingWebhookConfiguration enforces kcedar's
// conditions: one of its webhooks must fail closed and send CREATE,
// UPDATE, DELETE and CONNECT of every group, version, resource and
// subresource to kcedar's /v1/admit, unnarrowed by selectors, and left out
// by its matchConditions only the identities kcedar manifests leaves out
// (BypassOf). It returns that webhook's Bypass: the identities the webhook
// does not see.
func Inspect(vwc *admissionregistrationv1.ValidatingWebhookConfiguration) (Bypass, error) {
	for _, wh := range vwc.Webhooks {
		if b, err := checkWebhook(wh); err == nil {
			return b, nil
		} else if len(vwc.Webhooks) == 1 {
			return Bypass{}, fmt.Errorf("webhook %s: %w", wh.Name, err)
		}
	}
	return Bypass{}, fmt.Errorf("%s has no webhook that sends every write and connect to kcedar's /v1/admit with failurePolicy Fail", vwc.Name)
}

func checkWebhook(wh admissionregistrationv1.ValidatingWebhook) (Bypass, error) {
	if wh.FailurePolicy == nil || *wh.FailurePolicy != admissionregistrationv1.Fail {
		return Bypass{}, fmt.Errorf("failurePolicy is not Fail")
	}
	if path := webhookPath(wh.ClientConfig); !strings.HasSuffix(path, "/v1/admit") {
		return Bypass{}, fmt.Errorf("it does not call kcedar's /v1/admit (%q)", path)
	}
	unnarrowed := wh
	unnarrowed.MatchConditions = nil
	if narrowed(unnarrowed) {
		return Bypass{}, fmt.Errorf("it is narrowed by selectors")
	}
	bypass, err := BypassOf(wh.MatchConditions)
	if err != nil {
		return Bypass{}, err
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
			return Bypass{}, fmt.Errorf("no rule sends %s of every group, version, resource and subresource (*/*)", op)
		}
	}
	return bypass, nil
}
