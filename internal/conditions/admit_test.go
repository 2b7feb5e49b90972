package conditions

import (
	"context"
	"testing"

	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/testing/embeddedschema"
	"github.com/kcedar/kcedar/internal/testing/policytest"
	"github.com/kcedar/kcedar/internal/testing/schematest"
)

// kube-apiserver admits a patch as UPDATE with UpdateOptions, so admission
// enforcement cannot tell a patch from an update: an UPDATE is held to the
// conditions of both. Here update is unconditional and patch is not; an
// UPDATE that breaks patch's condition is refused.
func TestAdmitUpdateIsUpdateAndPatch(t *testing.T) {
	ps := policytest.Set(t, `
@id("update-any") permit(principal == k8s::User::"alice", action == k8s::Action::"update", resource is core::configmaps);
@id("patch-own") permit(principal == k8s::User::"alice", action == k8s::Action::"patch", resource is core::configmaps)
when { resource has object && resource.object has v1 && resource.object.v1 has data && resource.object.v1.data.hasTag("owner") && resource.object.v1.data.getTag("owner") == "alice" };
`)
	az := newEngine(schematest.Schema(), ps, engine.EngineOptions{})
	data := func(owner string) *AdmissionData {
		cm := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"a"},"data":{"owner":"` + owner + `"}}`
		return &AdmissionData{Operation: "UPDATE", APIVersion: "v1", Resource: "configmaps", Namespace: "a", Name: "c",
			User: &entities.UserInfo{Name: "alice"}, Object: []byte(cm), OldObject: []byte(cm)}
	}
	if d := az.Admit(context.Background(), data("alice")); !d.IsAllowed() {
		t.Errorf("owner kept: %v", d)
	}
	if d := az.Admit(context.Background(), data("mallory")); d.IsAllowed() {
		t.Errorf("owner changed by what may be a patch: allowed, want refused")
	}
}

// A connect is authorized by its HTTP method's verb: a PUT or DELETE through
// pods/proxy is an update or a delete, admitted as CONNECT. Admission
// enforcement holds it to those verbs' conditions too.
func TestAdmitConnectHoldsEveryMethodVerb(t *testing.T) {
	ps := policytest.Set(t, `
@id("proxy-health-only") permit(principal == k8s::User::"alice", action in [k8s::Action::"update", k8s::Action::"delete"], resource is core::pods_proxy)
when { resource has object && resource.object has v1 && resource.object.v1 has path && resource.object.v1.path == "/healthz" };
`)
	az := newEngine(embeddedschema.Schema(t), ps, engine.EngineOptions{})
	data := func(path string) *AdmissionData {
		return &AdmissionData{Operation: "CONNECT", APIVersion: "v1", Resource: "pods", Subresource: "proxy", Namespace: "a", Name: "p",
			User: &entities.UserInfo{Name: "alice"}, Object: []byte(`{"apiVersion":"v1","kind":"PodProxyOptions","path":"` + path + `"}`)}
	}
	if d := az.Admit(context.Background(), data("/healthz")); !d.IsAllowed() {
		t.Errorf("/healthz: %v", d)
	}
	if d := az.Admit(context.Background(), data("/admin")); d.IsAllowed() {
		t.Errorf("/admin through pods/proxy by PUT or DELETE: allowed, want refused")
	}
}
