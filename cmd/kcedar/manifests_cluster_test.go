package main

import (
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/yaml"
)

func TestManifestsForPolicyObjects(t *testing.T) {
	ca := writeCA(t, t.TempDir()) // a real PEM certificate: manifests checks it
	o := manifestOptions{url: "https://127.0.0.1:8443", caFile: ca, failurePolicy: "Deny", kubeconfigPath: "/k", policyObjects: true, serviceAccount: "kcedar-system/kcedar", bypassControlPlane: true}
	files, err := o.render()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string][]byte{}
	for _, f := range files {
		byName[f.name] = f.data
	}
	var authz struct {
		Authorizers []struct {
			Type    string `json:"type"`
			Name    string `json:"name"`
			Webhook struct {
				MatchConditions []struct {
					Expression string `json:"expression"`
				} `json:"matchConditions"`
			} `json:"webhook"`
		} `json:"authorizers"`
	}
	if err := yaml.Unmarshal(byName["authorization-config.yaml"], &authz); err != nil {
		t.Fatal(err)
	}
	var order []string
	var exprs []string
	for _, a := range authz.Authorizers {
		order = append(order, a.Type)
		for _, mc := range a.Webhook.MatchConditions {
			exprs = append(exprs, mc.Expression)
		}
	}
	if strings.Join(order, ",") != "Node,Webhook,RBAC" {
		t.Fatalf("authorizer order %v: RBAC must follow kcedar", order)
	}
	all := strings.Join(exprs, "\n")
	for _, want := range []string{"system:serviceaccount:kcedar-system:kcedar", "'system:masters' in request.groups", "'system:nodes' in request.groups", "system:serviceaccount:kube-system:", "system:kube-controller-manager"} {
		if !strings.Contains(all, want) {
			t.Errorf("matchConditions do not exclude %s:\n%s", want, all)
		}
	}
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	if err := yaml.UnmarshalStrict(byName["policy-webhook.yaml"], &vwc); err != nil {
		t.Fatal(err)
	}
	w := vwc.Webhooks[0]
	if *w.ClientConfig.URL != "https://127.0.0.1:8443/v1/validate-policy" || *w.FailurePolicy != admissionregistrationv1.Fail || w.Rules[0].APIGroups[0] != "kcedar.dev" || len(w.Rules[0].Resources) != 2 {
		t.Fatalf("policy webhook %+v", w)
	}

	o.serviceAccount = "bad"
	if _, err := o.render(); err == nil {
		t.Fatal("a malformed --service-account was accepted")
	}
}
