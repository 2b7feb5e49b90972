//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/kcedar/kcedar/test/e2e/framework"
)

// quantityCase is one write of TestQuantityLibrary and what must become of
// it: admitted, or refused by kcedar's admission webhook naming policy.
type quantityCase struct {
	desc   string
	policy string // the policy a refusal names; "" for an admitted write
	do     func(ctx context.Context, cs kubernetes.Interface) error
}

// TestQuantityLibrary serves the quantities library
// (policies/library/quantities) as a real kube-apiserver's authorization
// webhook with --admission-enforcement, and checks that the typed readings
// decide real writes by group "team" member alice: a Pod over its
// namespace's CPU or memory limits is refused naming the policy, one within
// them is admitted; a Deployment's maxUnavailable of "50%" or 2 is refused,
// "25%" admitted; a GPU pod is admitted only in the namespace labelled
// gpu=allowed. The objects are as the API server defaults them.
func TestQuantityLibrary(t *testing.T) {
	c, alice := startQuantityCluster(t)
	ctx := t.Context()
	admin := c.Client(t)

	cases := []quantityCase{
		{desc: "dev pod within 2 CPUs and 4Gi", do: quantityCreatePod("dev", "within", quantityLimits("1500m", "4Gi"))},
		{desc: "dev pod over 2 CPUs", policy: "dev-pod-limits", do: quantityCreatePod("dev", "over-cpu", quantityLimits("2100m", "1Gi"))},
		{desc: "dev pod over 4Gi", policy: "dev-pod-limits", do: quantityCreatePod("dev", "over-memory", quantityLimits("1", "5Gi"))},
		{desc: "dev pod without limits", policy: "dev-pod-limits", do: quantityCreatePod("dev", "unlimited", nil)},
		// The API server rounds a cpu quantity up to whole millicores
		// ("1001u" is stored as "2m"), so the unrepresentable value is a
		// memory limit beyond a Long of milli-bytes.
		{desc: "prod pod whose memory limit is not representable", policy: "prod-pod-limits",
			do: quantityCreatePod("prod", "huge", quantityLimits("1", "16Ei"))},
		{desc: "prod pod within 8 CPUs and 16Gi", do: quantityCreatePod("prod", "within", quantityLimits("8", "16Gi"))},
		{desc: "prod pod over 8 CPUs", policy: "prod-pod-limits", do: quantityCreatePod("prod", "over-cpu", quantityLimits("9", "1Gi"))},
		{desc: "deployment with maxUnavailable 25%", do: quantityCreateDeployment("dev", "quarter", intstr.FromString("25%"))},
		{desc: "deployment with maxUnavailable 1", do: quantityCreateDeployment("dev", "one", intstr.FromInt32(1))},
		{desc: "deployment with maxUnavailable 50%", policy: "deployments-max-unavailable",
			do: quantityCreateDeployment("dev", "half", intstr.FromString("50%"))},
		{desc: "deployment with maxUnavailable 2", policy: "deployments-max-unavailable",
			do: quantityCreateDeployment("dev", "two", intstr.FromInt32(2))},
		{desc: "GPU pod in dev, not labelled gpu=allowed", policy: "gpus-only-in-gpu-namespaces",
			do: quantityCreatePod("dev", "gpu", quantityGPU(quantityLimits("1", "1Gi")))},
		{desc: "GPU pod in prod, labelled gpu=allowed", do: quantityCreatePod("prod", "gpu", quantityGPU(quantityLimits("1", "1Gi")))},
	}
	for _, qc := range cases {
		t.Run(qc.desc, func(t *testing.T) {
			err := qc.do(ctx, alice)
			switch {
			case qc.policy == "" && err != nil:
				t.Fatalf("%s: want admitted, got %v", qc.desc, err)
			case qc.policy != "" && !condRejected(err):
				t.Fatalf("%s: want refused by %s, got %v", qc.desc, condWebhookName, err)
			case qc.policy != "" && !strings.Contains(err.Error(), qc.policy):
				t.Fatalf("%s: the refusal does not name policy %s: %v", qc.desc, qc.policy, err)
			}
			if err != nil {
				t.Logf("%s: %v", qc.desc, err)
			}
		})
	}

	// The refused writes left nothing behind.
	for _, ns := range []string{"dev", "prod"} {
		pods, err := admin.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=quantities"})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, p := range pods.Items {
			names = append(names, p.Name)
		}
		want := map[string]string{"dev": "[q-within]", "prod": "[q-gpu q-within]"}[ns]
		if got := fmt.Sprint(names); got != want {
			t.Errorf("pods in %s: %s, want %s", ns, got, want)
		}
	}
}

// startQuantityCluster starts a cluster and kcedar serve
// --admission-enforcement with the quantities library, configured as
// `kcedar manifests --admission-enforcement` prints it, with namespaces dev
// and prod (labelled gpu=allowed), and returns the cluster and a client for
// alice (group team) once kcedar's admission webhook is in effect.
func startQuantityCluster(t *testing.T) (*framework.Cluster, kubernetes.Interface) {
	t.Helper()
	bin := framework.KcedarBinary(t)
	dir := t.TempDir()
	caFile, certFile, keyFile := poPKI(t, dir)
	addr := "127.0.0.1:" + strconv.Itoa(framework.FreePort(t))
	manifests := filepath.Join(dir, "manifests")
	cmd := exec.Command(bin, "manifests", "--url", "https://"+addr, "--ca-file", caFile, "--admission-enforcement",
		"--webhook-kubeconfig-path", framework.DirPlaceholder+"/kcedar-webhook.kubeconfig", "--output-dir", manifests)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kcedar manifests: %v\n%s", err, out)
	}
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(manifests, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	if err := yaml.UnmarshalStrict(read("validating-webhook.yaml"), &vwc); err != nil {
		t.Fatalf("validating-webhook.yaml: %v", err)
	}
	c := framework.Start(t, framework.Options{
		AuthorizationConfig: condTestAuthorizationConfig(t, read("authorization-config.yaml")),
		Files:               map[string]string{"kcedar-webhook.kubeconfig": string(read("kcedar-webhook.kubeconfig"))},
		Tokens:              []framework.Token{{Token: "alice-token", User: "alice", Groups: []string{"team"}}},
	})
	ctx := t.Context()
	admin := c.Client(t)
	for ns, labels := range map[string]map[string]string{"dev": nil, "prod": {"gpu": "allowed"}} {
		if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		c.EnsureNamespace(t, ns) // its default ServiceAccount
	}

	// kcedar reads Namespaces and verifies its webhook through KUBECONFIG.
	t.Setenv("KUBECONFIG", c.Kubeconfig)
	policies := filepath.Join(moduleRoot(t), "policies", "library", "quantities")
	p := framework.StartProcess(t, bin, "serve", "--listen", addr, "--policies", policies,
		"--tls-cert-file", certFile, "--tls-private-key-file", keyFile, "--admission-enforcement", "--namespace-objects")
	p.WaitForTCP(t, addr, 60*time.Second)
	if _, err := admin.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &vwc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the ValidatingWebhookConfiguration: %v", err)
	}
	alice := c.ClientFor(t, "alice-token")
	quantityWaitForWebhook(t, ctx, admin, alice)
	return c, alice
}

// quantityWaitForWebhook waits until kcedar's admission webhook is in
// effect: a pod over dev's limits is refused in admission. Until kcedar has
// verified the webhook it answers alice's conditional create NoOpinion and
// RBAC refuses it; a probe admitted meanwhile is removed.
func quantityWaitForWebhook(t *testing.T, ctx context.Context, admin, alice kubernetes.Interface) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for i := 0; ; i++ {
		name := fmt.Sprintf("probe-%d", i)
		err := quantityCreatePod("dev", name, quantityLimits("3", "1Gi"))(ctx, alice)
		if condRejected(err) {
			t.Logf("webhook in effect after %d probes", i+1)
			return
		}
		if err == nil {
			if err := admin.CoreV1().Pods("dev").Delete(ctx, "q-"+name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
				t.Fatalf("deleting probe pod %s: %v", name, err)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the validating webhook was not in effect after 60s (last probe: %v)", err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// quantityLimits is a container's limits of cpu and memory.
func quantityLimits(cpu, memory string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}
}

// quantityGPU adds one nvidia.com/gpu to limits (the API server defaults the
// request from it).
func quantityGPU(limits corev1.ResourceList) corev1.ResourceList {
	limits["nvidia.com/gpu"] = resource.MustParse("1")
	return limits
}

// quantityCreatePod creates pod q-<name> in ns, with one container limited
// by limits (nil: no limits).
func quantityCreatePod(ns, name string, limits corev1.ResourceList) func(context.Context, kubernetes.Interface) error {
	return func(ctx context.Context, cs kubernetes.Interface) error {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "q-" + name, Labels: map[string]string{"app": "quantities"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "c", Image: "registry.k8s.io/pause:3.10", Resources: corev1.ResourceRequirements{Limits: limits},
			}}},
		}
		_, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		return err
	}
}

// quantityCreateDeployment creates Deployment <name> in ns with a rolling
// update strategy of maxUnavailable.
func quantityCreateDeployment(ns, name string, maxUnavailable intstr.IntOrString) func(context.Context, kubernetes.Interface) error {
	return func(ctx context.Context, cs kubernetes.Interface) error {
		labels := map[string]string{"app": name}
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Strategy: appsv1.DeploymentStrategy{
					Type:          appsv1.RollingUpdateDeploymentStrategyType,
					RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: &maxUnavailable},
				},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
				},
			},
		}
		_, err := cs.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
		return err
	}
}
