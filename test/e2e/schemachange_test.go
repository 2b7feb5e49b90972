//go:build e2e

package e2e

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/kcedar/kcedar/internal/cluster/policyobjects"
	"github.com/kcedar/kcedar/test/e2e/framework"
)

// widgetCRD is widgets.example.com: Cedar type com::example::widgets.
func widgetCRD() *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"size": {Type: "integer"}}}}}}}},
		},
	}
}

// deleteCRD deletes a CRD and waits until it is gone.
func deleteCRD(t *testing.T, c *framework.Cluster, name string) {
	t.Helper()
	cs, err := apiextensionsclient.NewForConfig(c.AdminConfig)
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.ApiextensionsV1().CustomResourceDefinitions().Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	within(t, 60*time.Second, "CRD "+name+" gone", func() bool {
		_, err := cs.ApiextensionsV1().CustomResourceDefinitions().Get(t.Context(), name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
}

// sarAllows asks replica r directly about user doing verb on group/resource
// in namespace ns.
func sarAllows(t *testing.T, hc *http.Client, r *poReplica, user, verb, group, resource, ns string) bool {
	sar := authorizationv1.SubjectAccessReview{TypeMeta: metav1.TypeMeta{APIVersion: "authorization.k8s.io/v1", Kind: "SubjectAccessReview"},
		Spec: authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Group: group, Version: "v1", Resource: resource, Namespace: ns, Name: "x"}}}
	var out authorizationv1.SubjectAccessReview
	return post(t, hc, "https://"+r.addr+"/v1/authorize", sar, &out) == http.StatusOK && out.Status.Allowed
}

// getText GETs a replica's endpoint.
func getText(t *testing.T, hc *http.Client, r *poReplica, path string) (int, string) {
	t.Helper()
	resp, err := hc.Get("https://" + r.addr + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// metricValue is the value of one series in a replica's /metrics (-1 if absent).
func metricValue(t *testing.T, hc *http.Client, r *poReplica, series string) float64 {
	t.Helper()
	_, body := getText(t, hc, r, "/metrics")
	for _, line := range strings.Split(body, "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err == nil {
				return v
			}
		}
	}
	return -1
}

// acceptedCondition returns the object's Accepted condition (nil if none)
// and its observedGeneration.
func acceptedCondition(t *testing.T, ri dynamic.ResourceInterface, name string) (map[string]any, int64, *unstructured.Unstructured) {
	u, err := ri.Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		return nil, 0, nil
	}
	og, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == policyobjects.ConditionAccepted {
			return m, og, u
		}
	}
	return nil, og, u
}

// TestPolicyObjectsSchemaChange: with the schema from the live cluster
// (--kubeconfig), a CedarPolicy that uses a CRD's type is accepted and
// serves; deleting the CRD makes it Accepted=False with the positioned
// validation error while the last good set keeps serving (with the schema
// it was checked against) on both replicas; the CRD coming back, or the
// object fixed, converges.
func TestPolicyObjectsSchemaChange(t *testing.T) {
	env := startPolicyObjects(t, poOptions{live: true}) // through a round-robin front
	c, hc, replicas, cluster, alice := env.c, env.hc, env.replicas, env.cluster, env.alice
	ctx := t.Context()
	widgetsAs := func(cs kubernetes.Interface) error {
		return cs.Discovery().RESTClient().Get().AbsPath("/apis/example.com/v1/namespaces/a/widgets").Do(ctx).Error()
	}
	created := time.Now()
	installCRDs(t, c, []*apiextensionsv1.CustomResourceDefinition{widgetCRD()})
	t.Cleanup(func() {
		cs, _ := apiextensionsclient.NewForConfig(c.AdminConfig)
		_ = cs.ApiextensionsV1().CustomResourceDefinitions().Delete(ctx, "widgets.example.com", metav1.DeleteOptions{})
	})

	// The policy admission webhook checks against the cluster's latest
	// schema: it takes the widgets policy once the replica has seen the CRD.
	const name = "widgets"
	content := "@id(\"alice-widgets\") permit(principal == k8s::User::\"alice\", action == k8s::Action::\"list\", resource is com::example::widgets);\n" +
		"@id(\"alice-configmaps\") permit(principal == k8s::User::\"alice\", action == k8s::Action::\"get\", resource is core::configmaps);"
	var createErr error
	within(t, 90*time.Second, "the widgets policy admitted", func() bool {
		_, createErr = cluster.Create(ctx, poObject(policyobjects.KindCluster, "", name, content), metav1.CreateOptions{})
		return createErr == nil
	})
	t.Logf("widgets policy admitted %v after the CRD was created", time.Since(created).Round(time.Millisecond))
	t.Cleanup(func() { _ = cluster.Delete(ctx, name, metav1.DeleteOptions{}) })
	within(t, 90*time.Second, "Accepted=True, served by both replicas and through the API server", func() bool {
		cond, _, _ := acceptedCondition(t, cluster, name)
		return cond != nil && cond["status"] == "True" &&
			sarAllows(t, hc, replicas[0], "alice", "list", "example.com", "widgets", "a") && sarAllows(t, hc, replicas[1], "alice", "list", "example.com", "widgets", "a") &&
			widgetsAs(alice) == nil
	})

	lastGoodServes := func() {
		t.Helper()
		for i, r := range replicas {
			if !sarAllows(t, hc, r, "alice", "list", "example.com", "widgets", "a") {
				t.Errorf("replica %d: the last good set's widgets permit stopped serving", i)
			}
			if !sarAllows(t, hc, r, "alice", "get", "", "configmaps", "a") {
				t.Errorf("replica %d: the last good set's configmaps permit stopped serving", i)
			}
			if sarAllows(t, hc, r, "alice", "delete", "", "configmaps", "a") || sarAllows(t, hc, r, "alice", "delete", "example.com", "widgets", "a") {
				t.Errorf("replica %d: allowed what the last good set denies", i)
			}
		}
		// Through the API server: allowed (the object is just not there) and denied.
		if _, err := alice.CoreV1().ConfigMaps("a").Get(ctx, "nope", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("alice getting a configmap through the API server: %v, want NotFound (authorized)", err)
		}
		if err := alice.CoreV1().ConfigMaps("a").Delete(ctx, "nope", metav1.DeleteOptions{}); !isForbidden(err) {
			t.Errorf("alice deleting a configmap through the API server: %v, want Forbidden", err)
		}
	}
	schemaChanged := func(what string) map[string]any {
		t.Helper()
		start := time.Now()
		var cond map[string]any
		within(t, 90*time.Second, what, func() bool {
			cond, _, _ = acceptedCondition(t, cluster, name)
			return cond != nil && cond["status"] == "False" && cond["reason"] == policyobjects.ReasonSchemaChanged
		})
		t.Logf("%s after %v", what, time.Since(start).Round(time.Millisecond))
		return cond
	}

	// The CRD goes away: the object's policies no longer validate.
	deleteCRD(t, c, "widgets.example.com")
	cond := schemaChanged("Accepted=False (SchemaChanged) after the CRD's deletion")
	msg, _ := cond["message"].(string)
	if !strings.Contains(msg, "CedarPolicy/widgets:1:") || !strings.Contains(msg, "com::example::widgets") {
		t.Errorf("the condition does not give the positioned validation error:\n%s", msg)
	}
	t.Logf("status message:\n%s", msg)
	// Each replica refreshes on its own: wait for both to have refused.
	within(t, 90*time.Second, "both replicas degraded (ready) with the schema problem", func() bool {
		for _, r := range replicas {
			code, body := getText(t, hc, r, "/readyz")
			if code != http.StatusOK || !strings.HasPrefix(body, "degraded:") || !strings.Contains(body, "do not validate") {
				return false
			}
		}
		return true
	})
	_, body := getText(t, hc, replicas[0], "/readyz")
	t.Logf("replica 0 /readyz: %s", firstLines(body, 3))
	lastGoodServes()
	for i, r := range replicas {
		if v := metricValue(t, hc, r, `kcedar_schema_refresh_total{result="invalid"}`); v < 1 {
			t.Errorf("replica %d: kcedar_schema_refresh_total{result=\"invalid\"} = %v", i, v)
		}
		if v := metricValue(t, hc, r, "kcedar_schema_refresh_pending"); v != 1 {
			t.Errorf("replica %d: kcedar_schema_refresh_pending = %v", i, v)
		}
		if v := metricValue(t, hc, r, `kcedar_policy_objects{kind="CedarPolicy",state="schema_changed"}`); v != 1 {
			t.Errorf("replica %d: schema_changed objects = %v", i, v)
		}
	}

	// The CRD comes back: accepted again, nothing pending.
	start := time.Now()
	installCRDs(t, c, []*apiextensionsv1.CustomResourceDefinition{widgetCRD()})
	within(t, 90*time.Second, "Accepted=True and ready without detail once the CRD is back", func() bool {
		cond, _, _ := acceptedCondition(t, cluster, name)
		if cond == nil || cond["status"] != "True" {
			return false
		}
		for _, r := range replicas {
			if code, body := getText(t, hc, r, "/readyz"); code != http.StatusOK || !strings.HasPrefix(body, "ok:") {
				return false
			}
		}
		return true
	})
	t.Logf("converged %v after the CRD came back", time.Since(start).Round(time.Millisecond))

	// Gone again; this time the object is fixed instead.
	deleteCRD(t, c, "widgets.example.com")
	schemaChanged("Accepted=False again after the second deletion")
	lastGoodServes()
	u, err := cluster.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fixed := "@id(\"alice-configmaps\") permit(principal == k8s::User::\"alice\", action == k8s::Action::\"get\", resource is core::configmaps);"
	if err := unstructured.SetNestedField(u.Object, fixed, "spec", "content"); err != nil {
		t.Fatal(err)
	}
	if u, err = cluster.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("the fix refused: %v", err)
	}
	start = time.Now()
	within(t, 90*time.Second, "the fixed object accepted and the new schema serving on both replicas", func() bool {
		cond, og, got := acceptedCondition(t, cluster, name)
		if cond == nil || cond["status"] != "True" || og != u.GetGeneration() {
			return false
		}
		ids, _, _ := unstructured.NestedStringSlice(got.Object, "status", "policies")
		if len(ids) != 1 || ids[0] != "alice-configmaps" {
			return false
		}
		for _, r := range replicas {
			if code, body := getText(t, hc, r, "/readyz"); code != http.StatusOK || !strings.HasPrefix(body, "ok:") {
				return false
			}
			if sarAllows(t, hc, r, "alice", "list", "example.com", "widgets", "a") || !sarAllows(t, hc, r, "alice", "get", "", "configmaps", "a") {
				return false
			}
		}
		return true
	})
	t.Logf("converged %v after the fix", time.Since(start).Round(time.Millisecond))
	if err := cluster.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}
