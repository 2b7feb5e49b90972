// Package deploy holds kcedar's kustomize manifests; this test checks them.
package deploy

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/kcedar/kcedar/internal/policyobjects"
)

// documents reads the resources a kustomization lists, split into documents.
func documents(t *testing.T, dir string) map[string][][]byte {
	t.Helper()
	var k struct {
		Resources []string `json:"resources"`
	}
	data, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &k); err != nil {
		t.Fatal(err)
	}
	out := map[string][][]byte{}
	for _, r := range k.Resources {
		p := filepath.Join(dir, r)
		if info, err := os.Stat(p); err == nil && info.IsDir() {
			for name, docs := range documents(t, p) {
				out[name] = append(out[name], docs...)
			}
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range bytes.Split(data, []byte("\n---\n")) {
			var tm metav1.TypeMeta
			if err := yaml.Unmarshal(doc, &tm); err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			out[tm.Kind] = append(out[tm.Kind], doc)
		}
	}
	return out
}

func strict[T any](t *testing.T, doc []byte) *T {
	t.Helper()
	v := new(T)
	if err := yaml.UnmarshalStrict(doc, v); err != nil {
		t.Fatalf("%v\n%s", err, doc)
	}
	return v
}

func TestDeployCRDsMatch(t *testing.T) {
	data, err := os.ReadFile("base/crds.yaml")
	if err != nil {
		t.Fatal(err)
	}
	strip := func(b []byte) string { // the first line is a comment naming the copy
		_, rest, _ := strings.Cut(string(b), "\n")
		return rest
	}
	if strip(data) != strip(policyobjects.CRDYAML) {
		t.Fatal("deploy/base/crds.yaml differs from internal/policyobjects/crds.yaml: copy it over")
	}
}

func TestBase(t *testing.T) {
	docs := documents(t, "base")
	for _, d := range docs["CustomResourceDefinition"] {
		strict[apiextensionsv1.CustomResourceDefinition](t, d)
	}
	if len(docs["CustomResourceDefinition"]) != 2 || len(docs["Namespace"]) != 1 || len(docs["Secret"]) != 1 || len(docs["PodDisruptionBudget"]) != 1 {
		t.Fatalf("kinds: %v", keys(docs))
	}
	strict[corev1.Namespace](t, docs["Namespace"][0])
	strict[corev1.Secret](t, docs["Secret"][0])
	strict[policyv1.PodDisruptionBudget](t, docs["PodDisruptionBudget"][0])
	sa := strict[corev1.ServiceAccount](t, docs["ServiceAccount"][0])
	var canWatch, canStatus bool
	for _, d := range docs["ClusterRole"] {
		for _, r := range strict[rbacv1.ClusterRole](t, d).Rules {
			if strings.Join(r.Resources, ",") == "cedarpolicies,namespacedcedarpolicies" && strings.Contains(strings.Join(r.Verbs, ","), "watch") {
				canWatch = true
			}
			if strings.Contains(strings.Join(r.Resources, ","), "cedarpolicies/status") && strings.Contains(strings.Join(r.Verbs, ","), "update") {
				canStatus = true
			}
		}
	}
	if !canWatch || !canStatus {
		t.Fatal("the ClusterRole does not let kcedar watch its objects and write their status")
	}
	// --live: schema refresh watches CRDs and APIServices; namespaceObject
	// watches Namespaces.
	for _, want := range []struct{ group, resource string }{{"apiextensions.k8s.io", "customresourcedefinitions"}, {"apiregistration.k8s.io", "apiservices"}, {"", "namespaces"}} {
		ok := false
		for _, d := range docs["ClusterRole"] {
			for _, r := range strict[rbacv1.ClusterRole](t, d).Rules {
				verbs := strings.Join(r.Verbs, ",")
				if slices.Contains(r.APIGroups, want.group) && slices.Contains(r.Resources, want.resource) && strings.Contains(verbs, "list") && strings.Contains(verbs, "watch") {
					ok = true
				}
			}
		}
		if !ok {
			t.Errorf("the ClusterRole does not let kcedar list and watch %s.%s", want.resource, want.group)
		}
	}
	ds := strict[appsv1.DaemonSet](t, docs["DaemonSet"][0])
	spec := ds.Spec.Template.Spec
	if !spec.HostNetwork || spec.ServiceAccountName != sa.Name || spec.NodeSelector["node-role.kubernetes.io/control-plane"] != "" || len(spec.NodeSelector) != 1 {
		t.Fatalf("DaemonSet pod spec: hostNetwork=%v sa=%q nodeSelector=%v", spec.HostNetwork, spec.ServiceAccountName, spec.NodeSelector)
	}
	checkContainer(t, spec.Containers[0], "127.0.0.1:8443")
	if *spec.SecurityContext.RunAsUser != 65532 || !*spec.SecurityContext.RunAsNonRoot {
		t.Fatal("kcedar must run as the image's non-root user 65532")
	}
}

func TestDeploymentOverlay(t *testing.T) {
	docs := documents(t, "overlays/deployment")
	d := strict[appsv1.Deployment](t, docs["Deployment"][0])
	strict[corev1.Service](t, docs["Service"][0])
	if d.Spec.Template.Spec.HostNetwork {
		t.Fatal("the Deployment must not use the host network")
	}
	checkContainer(t, d.Spec.Template.Spec.Containers[0], ":8443")
}

func checkContainer(t *testing.T, c corev1.Container, listen string) {
	t.Helper()
	args := strings.Join(c.Args, " ")
	for _, want := range []string{"serve", "--listen=" + listen, "--policy-objects", "--conditions-key-file="} {
		if !strings.Contains(args, want) {
			t.Errorf("args %q lack %s", args, want)
		}
	}
	if c.LivenessProbe.HTTPGet.Path != "/livez" || c.ReadinessProbe.HTTPGet.Path != "/readyz" || c.StartupProbe.HTTPGet.Path != "/livez" {
		t.Error("probes must be /livez (liveness, startup) and /readyz (readiness)")
	}
}

func keys(m map[string][][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
