package policyobjects

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kcedar/kcedar/internal/cedarlang"
)

func review(t *testing.T, h http.Handler, kind, ns, name, content string) *admissionv1.AdmissionResponse {
	t.Helper()
	obj, _ := json.Marshal(map[string]any{"apiVersion": GroupVersion.String(), "kind": kind, "metadata": map[string]any{"name": name, "namespace": ns}, "spec": map[string]any{"content": content}})
	body, _ := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: "u1", Kind: metav1.GroupVersionKind{Group: Group, Version: Version, Kind: kind},
			Namespace: ns, Name: name, Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: obj}},
	})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/validate-policy", bytes.NewReader(body)))
	if rec.Code != 200 {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil || out.Response.UID != "u1" {
		t.Fatalf("response %s: %v", rec.Body, err)
	}
	return out.Response
}

func TestAdmissionRefusesInvalidPoliciesWithPositions(t *testing.T) {
	existing, err := cedarlang.ParsePolicies("CedarPolicy/other", []byte(`@id("taken") permit(principal, action, resource);`))
	if err != nil {
		t.Fatal(err)
	}
	set, _ := cedarlang.NewPolicySet(existing)
	h := &AdmissionHandler{Checker: testChecker(t), Current: func() *cedarlang.PolicySet { return set }, Logger: quietLogger()}

	r := review(t, h, KindCluster, "", "p", "permit(principal, action, resource is core::pods)\nwhen { resource.nmespace == \"a\" };")
	if r.Allowed || !strings.Contains(r.Result.Message, "CedarPolicy/p:2:") || !strings.Contains(r.Result.Message, "hint:") {
		t.Fatalf("%+v", r.Result)
	}
	if r := review(t, h, KindCluster, "", "p", `@id("mine") permit(principal, action, resource is core::pods);`); !r.Allowed {
		t.Fatalf("valid policy refused: %+v", r.Result)
	}
	r = review(t, h, KindCluster, "", "p", `@id("taken") permit(principal, action, resource is core::pods);`)
	if r.Allowed || !strings.Contains(r.Result.Message, `"taken" is already used at CedarPolicy/other:1:1`) {
		t.Fatalf("duplicate id: %+v", r.Result)
	}
	// The object itself re-applied is not a duplicate of itself.
	if r := review(t, h, KindCluster, "", "other", `@id("taken") permit(principal, action, resource);`); !r.Allowed {
		t.Fatalf("re-applying the owner refused: %+v", r.Result)
	}
	r = review(t, h, KindNamespaced, "a", "p", `forbid(principal, action, resource);`)
	if r.Allowed || !strings.Contains(r.Result.Message, "NamespacedCedarPolicy/a/p:1:1") {
		t.Fatalf("namespaced forbid: %+v", r.Result)
	}

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/validate-policy", strings.NewReader(`{"apiVersion":"v1","kind":"Pod"}`)))
	if rec.Code != http.StatusBadRequest {
		t.Fatalf("wrong kind: %d", rec.Code)
	}
}

func TestCRDs(t *testing.T) {
	crds, err := CRDs()
	if err != nil {
		t.Fatal(err)
	}
	if len(crds) != 2 {
		t.Fatalf("%d CRDs", len(crds))
	}
	for i, want := range []struct{ kind, scope string }{{KindCluster, "Cluster"}, {KindNamespaced, "Namespaced"}} {
		c := crds[i]
		if c.Spec.Names.Kind != want.kind || string(c.Spec.Scope) != want.scope || c.Spec.Group != Group || c.Spec.Versions[0].Name != Version {
			t.Fatalf("CRD %d: %s %s", i, c.Spec.Names.Kind, c.Spec.Scope)
		}
		v := c.Spec.Versions[0]
		content := v.Schema.OpenAPIV3Schema.Properties["spec"].Properties["content"]
		if content.MaxLength == nil || *content.MaxLength != MaxContentBytes {
			t.Fatalf("%s: spec.content maxLength %v, want %d", want.kind, content.MaxLength, MaxContentBytes)
		}
		var cols []string
		for _, col := range v.AdditionalPrinterColumns {
			cols = append(cols, col.Name)
		}
		if strings.Join(cols, ",") != "Policies,Valid,Age" || v.Subresources == nil || v.Subresources.Status == nil {
			t.Fatalf("%s: columns %v, subresources %v", want.kind, cols, v.Subresources)
		}
	}
}
