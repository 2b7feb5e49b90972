package main

import (
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kcedar/kcedar/internal/policyobjects"
)

// controlPlaneUsers are the control plane's own identities (besides nodes,
// system:masters and kube-system's service accounts).
var controlPlaneUsers = []string{"system:kube-controller-manager", "system:kube-scheduler", "system:kube-proxy", "system:apiserver"}

// matchConditions are CEL expressions on the SubjectAccessReview: the API
// server calls kcedar only when all hold, so the identities they exclude go
// to the next authorizers (RBAC) without waiting on kcedar.
func (o *manifestOptions) matchConditions() ([]map[string]any, error) {
	var mc []map[string]any
	if o.serviceAccount != "" {
		ns, name, ok := strings.Cut(o.serviceAccount, "/")
		if !ok || len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
			return nil, fmt.Errorf("--service-account %q: want NAMESPACE/NAME", o.serviceAccount)
		}
		mc = append(mc, map[string]any{"expression": fmt.Sprintf("request.user != 'system:serviceaccount:%s:%s'", ns, name)})
	}
	if o.bypassControlPlane {
		quoted := make([]string, len(controlPlaneUsers))
		for i, u := range controlPlaneUsers {
			quoted[i] = "'" + u + "'"
		}
		mc = append(mc,
			map[string]any{"expression": "!has(request.groups) || !('system:masters' in request.groups)"},
			map[string]any{"expression": "!has(request.groups) || !('system:nodes' in request.groups)"},
			map[string]any{"expression": "!request.user.startsWith('system:serviceaccount:kube-system:')"},
			map[string]any{"expression": "!(request.user in [" + strings.Join(quoted, ", ") + "])"},
		)
	}
	return mc, nil
}

// policyWebhook refuses invalid kcedar policy objects at write time. It
// fails closed: with kcedar down, policy objects cannot be written (they
// could not be checked), while everything else keeps working.
func policyWebhook(base string, ca []byte) *admissionregistrationv1.ValidatingWebhookConfiguration {
	fail := admissionregistrationv1.Fail
	none := admissionregistrationv1.SideEffectClassNone
	equivalent := admissionregistrationv1.Equivalent
	all := admissionregistrationv1.AllScopes
	timeout := int32(10)
	url := base + "/v1/validate-policy"
	return &admissionregistrationv1.ValidatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingWebhookConfiguration"},
		ObjectMeta: metav1.ObjectMeta{Name: "kcedar-policies"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:         "policies.kcedar.dev",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: ca},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{policyobjects.Group}, APIVersions: []string{policyobjects.Version},
					Resources: []string{policyobjects.ResourceCluster, policyobjects.ResourceNamespaced}, Scope: &all},
			}},
			FailurePolicy:           &fail,
			MatchPolicy:             &equivalent,
			SideEffects:             &none,
			TimeoutSeconds:          &timeout,
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
}
