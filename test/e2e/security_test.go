//go:build e2e

package e2e

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/yaml"

	"github.com/kcedar/kcedar/internal/cluster/policyobjects"
	"github.com/kcedar/kcedar/test/e2e/framework"
)

// secNS is the namespace of the security cases.
const secNS = "team-a"

// secPolicies are the administrator's policies, served from a file: rights
// kcedar grants only on conditions, enforced in admission.
const secPolicies = `
@id("lead-pods-on-safe-node")
@reason("lead may run pods in team-a only on node safe-node")
permit(principal == k8s::User::"lead", action == k8s::Action::"create", resource is core::pods)
when { resource.namespace == "team-a" && resource has object && resource.object has v1 && resource.object.v1 has spec &&
       resource.object.v1.spec has nodeName && resource.object.v1.spec.nodeName == "safe-node" };

@id("ops-webhooks-but-kcedar")
permit(principal in k8s::Group::"ops", action == k8s::Action::"delete", resource is io::k8s::admissionregistration::validatingwebhookconfigurations)
unless { resource has oldObject && resource.oldObject.metadata has name && resource.oldObject.metadata.name like "kcedar*" };

@id("ops-unprotected-configmaps")
@reason("ops may delete configmaps unless they are labeled protected")
permit(principal in k8s::Group::"ops", action == k8s::Action::"delete", resource is core::configmaps)
unless { resource has oldObject && resource.oldObject.metadata has labels && resource.oldObject.metadata.labels.hasTag("protected") };
`

// secEnv is a cluster whose API server authorizes through kcedar serve
// --admission-enforcement --policy-objects, with both webhooks of kcedar
// manifests installed as printed (the webhook decision cache on, as in
// production), and users acting by impersonation.
type secEnv struct {
	c     *framework.Cluster
	admin kubernetes.Interface
	r     *poReplica
}

// startSecurity starts the cluster and kcedar, installs the webhooks and
// waits until kcedar has verified the conditions webhook (a conditional
// allow is answered Allow).
func startSecurity(t *testing.T) *secEnv {
	dir := t.TempDir()
	caFile, certFile, keyFile := poPKI(t, dir)
	secret := make([]byte, 32)
	rand.Read(secret)
	keysFile := filepath.Join(dir, "condition-keys")
	policies := filepath.Join(dir, "policies.cedar")
	for name, data := range map[string]string{keysFile: "k1 " + base64.StdEncoding.EncodeToString(secret) + "\n", policies: secPolicies} {
		if err := os.WriteFile(name, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	r := &poReplica{addr: "127.0.0.1:" + strconv.Itoa(framework.FreePort(t))}
	manifests := filepath.Join(dir, "manifests")
	out, err := exec.Command(framework.KcedarBinary(t), "manifests", "--url", "https://"+r.addr, "--ca-file", caFile, "--policy-objects", "--admission-enforcement",
		"--webhook-kubeconfig-path", framework.DirPlaceholder+"/kcedar-webhook.kubeconfig", "-o", manifests).CombinedOutput()
	if err != nil {
		t.Fatalf("kcedar manifests: %v\n%s", err, out)
	}
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(manifests, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	c := framework.Start(t, framework.Options{
		AuthorizationConfig: string(read("authorization-config.yaml")),
		Files:               map[string]string{"kcedar-webhook.kubeconfig": string(read("kcedar-webhook.kubeconfig"))},
	})
	admin := c.Client(t)
	for _, ns := range []string{secNS, "kcedar-system"} {
		c.EnsureNamespace(t, ns)
	}
	installPolicyCRDs(t, c)
	for _, file := range []string{"validating-webhook.yaml", "policy-webhook.yaml"} {
		var vwc admissionregistrationv1.ValidatingWebhookConfiguration
		if err := yaml.UnmarshalStrict(read(file), &vwc); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if _, err := admin.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(t.Context(), &vwc, metav1.CreateOptions{}); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	r.env = []string{"KUBECONFIG=" + c.Kubeconfig}
	r.args = []string{"serve", "--listen", r.addr, "--policies", policies, "--policy-objects", "--admission-enforcement",
		"--tls-cert-file", certFile, "--tls-private-key-file", keyFile, "--conditions-key-file", keysFile,
		"--status-lease-namespace", "kcedar-system", "--shutdown-delay", "1s"}
	r.start(t)
	ca, _ := os.ReadFile(caFile)
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: poolOf(t, ca)}}}
	waitReady(t, hc, r, 120*time.Second)
	env := &secEnv{c: c, admin: admin, r: r}
	secRBAC(t, env)
	// A SelfSubjectAccessReview is answered as the real request would be,
	// so once kcedar has verified the conditions webhook, lead's
	// conditional create is allowed. Each probe names another namespace
	// than team-a's, so the webhook cache holds nothing the cases ask.
	for i := 0; ; i++ {
		ssar := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: "delete", Resource: "configmaps", Namespace: "probe-" + strconv.Itoa(i)}}}
		got, err := env.clientAs(t, "ops", "ops").AuthorizationV1().SelfSubjectAccessReviews().Create(t.Context(), ssar, metav1.CreateOptions{})
		if err == nil && got.Status.Allowed {
			break
		}
		if i > 600 {
			t.Fatalf("kcedar never verified its conditions webhook: %v %+v\n%s", err, got, r.proc.Logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
	return env
}

// secRBAC binds the users' RBAC rights in team-a:
//   - lead: get/list/watch pods, and writes of NamespacedCedarPolicy;
//   - cm-writer: create and deletecollection of configmaps, both only for
//     resourceNames [app-config], get of app-config, and writes of
//     NamespacedCedarPolicy;
//   - cp-editor: get, update and patch of CedarPolicy objects, no delete.
func secRBAC(t *testing.T, env *secEnv) {
	t.Helper()
	ctx := t.Context()
	rbac := env.admin.RbacV1()
	policyWrites := rbacv1.PolicyRule{APIGroups: []string{policyobjects.Group}, Resources: []string{policyobjects.ResourceNamespaced},
		Verbs: []string{"get", "list", "create", "update", "patch", "delete"}}
	roles := map[string][]rbacv1.PolicyRule{
		"lead": {{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}}, policyWrites},
		"cm-writer": {{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"app-config"}, Verbs: []string{"create", "deletecollection", "get"}},
			policyWrites},
	}
	for user, rules := range roles {
		if _, err := rbac.Roles(secNS).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: rules}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user}, Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user}}
		if _, err := rbac.RoleBindings(secNS).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cr := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "cp-editor"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{policyobjects.Group}, Resources: []string{policyobjects.ResourceCluster}, Verbs: []string{"get", "list", "update", "patch"}}}}
	if _, err := rbac.ClusterRoles().Create(ctx, cr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "cp-editor"}, Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "cp-editor"}},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cp-editor"}}
	if _, err := rbac.ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// asUser is the admin's configuration impersonating user in groups.
func (env *secEnv) asUser(user string, groups ...string) *rest.Config {
	cfg := rest.CopyConfig(env.c.AdminConfig)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	return cfg
}

func (env *secEnv) clientAs(t *testing.T, user string, groups ...string) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(env.asUser(user, groups...))
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func (env *secEnv) dynamicAs(t *testing.T, user string, groups ...string) dynamic.Interface {
	t.Helper()
	dyn, err := dynamic.NewForConfig(env.asUser(user, groups...))
	if err != nil {
		t.Fatal(err)
	}
	return dyn
}

func secPod(name, node string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}
}

// TestSecurityGuards: each way around kcedar's guards that a security
// review found, through a real kube-apiserver with kcedar as its webhook
// authorizer and both admission webhooks, beside the controls that show
// the guards block nothing else.
func TestSecurityGuards(t *testing.T) {
	env := startSecurity(t)
	ctx := t.Context()
	t.Run("a conditional right is not a full right for the escalation check", func(t *testing.T) {
		lead := env.clientAs(t, "lead")
		if _, err := lead.CoreV1().Pods(secNS).Create(ctx, secPod("on-safe", "safe-node"), metav1.CreateOptions{}); err != nil {
			t.Fatalf("control: lead creates a pod on safe-node: %v", err)
		}
		_, err := lead.CoreV1().Pods(secNS).Create(ctx, secPod("on-control", "control-plane-1"), metav1.CreateOptions{})
		if err == nil || !strings.Contains(err.Error(), "lead-pods-on-safe-node") {
			t.Fatalf("control: lead's pod on control-plane-1: %v, want refused in admission", err)
		}
		// lead's own question, answered Allow and cached by the API server
		// for 30 s: it must not answer the escalation check.
		ssar := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: "create", Resource: "pods", Namespace: secNS}}}
		if got, err := lead.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, ssar, metav1.CreateOptions{}); err != nil || !got.Status.Allowed {
			t.Fatalf("lead asks whether they may create pods: %v %+v, want allowed (admission checks the node)", err, got)
		}
		ri := env.dynamicAs(t, "lead").Resource(policyobjects.NamespacedResource).Namespace(secNS)
		_, err = ri.Create(ctx, poObject(policyobjects.KindNamespaced, secNS, "self-grant", `@id("lead-any-node")
permit(principal == k8s::User::"lead", action == k8s::Action::"create", resource is core::pods);`), metav1.CreateOptions{})
		refused(t, "lead grants themselves pods on any node", err, `permit "lead-any-node"`, "create core pods in team-a")
		_, err = ri.Create(ctx, poObject(policyobjects.KindNamespaced, secNS, "share-reads", `@id("alice-reads-pods")
permit(principal == k8s::User::"alice", action in [k8s::Action::"get", k8s::Action::"list"], resource is core::pods);`), metav1.CreateOptions{})
		if err != nil {
			t.Errorf("control: lead shares the reads they hold: %v", err)
		}
	})

	t.Run("a conditional right on kinds no webhook sees is not an Allow", func(t *testing.T) {
		ops := env.clientAs(t, "mallory", "ops")
		err := ops.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, "kcedar-conditions", metav1.DeleteOptions{})
		if !apierrors.IsForbidden(err) {
			t.Fatalf("ops deletes kcedar-conditions: %v, want 403", err)
		}
		if _, err := env.admin.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "kcedar-conditions", metav1.GetOptions{}); err != nil {
			t.Fatalf("kcedar-conditions is gone: %v", err)
		}
		for name, labels := range map[string]map[string]string{"plain": nil, "kept": {"protected": "true"}} {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
			if _, err := env.admin.CoreV1().ConfigMaps(secNS).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		if err := ops.CoreV1().ConfigMaps(secNS).Delete(ctx, "plain", metav1.DeleteOptions{}); err != nil {
			t.Errorf("control: ops deletes an unprotected configmap (the webhook sees it): %v", err)
		}
		err = ops.CoreV1().ConfigMaps(secNS).Delete(ctx, "kept", metav1.DeleteOptions{})
		if err == nil || !strings.Contains(err.Error(), "ops-unprotected-configmaps") {
			t.Errorf("control: ops deletes a protected configmap: %v, want refused in admission", err)
		}
	})

	t.Run("an owner reference on a forbid needs what deleting it needs", func(t *testing.T) {
		adminDyn, err := dynamic.NewForConfig(env.c.AdminConfig)
		if err != nil {
			t.Fatal(err)
		}
		createPolicy(t, adminDyn.Resource(policyobjects.ClusterResource), policyobjects.KindCluster, "", "no-secrets",
			`@id("no-secrets-in-team-a") forbid(principal, action, resource is core::secrets) when { resource.namespace == "team-a" };`)
		ri := env.dynamicAs(t, "cp-editor").Resource(policyobjects.ClusterResource)
		update := func(mutate func(u *unstructured.Unstructured)) error {
			return retry.RetryOnConflict(retry.DefaultRetry, func() error {
				u, err := ri.Get(ctx, "no-secrets", metav1.GetOptions{})
				if err != nil {
					return err
				}
				mutate(u)
				_, err = ri.Update(ctx, u, metav1.UpdateOptions{})
				return err
			})
		}
		err = update(func(u *unstructured.Unstructured) {
			u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "gone", UID: "00000000-0000-0000-0000-000000000000"}})
		})
		refused(t, "cp-editor adds an owner that does not exist", err, "lets the garbage collector delete CedarPolicy/no-secrets", "you may not delete")
		if err := update(func(u *unstructured.Unstructured) { u.SetLabels(map[string]string{"reviewed": "yes"}) }); err != nil {
			t.Errorf("control: cp-editor labels the object: %v", err)
		}
	})

	t.Run("the check asks with the names authorization sees", func(t *testing.T) {
		ri := env.dynamicAs(t, "cm-writer").Resource(policyobjects.NamespacedResource).Namespace(secNS)
		_, err := ri.Create(ctx, poObject(policyobjects.KindNamespaced, secNS, "app-config", `@id("anyone-makes-app-config")
permit(principal, action in [k8s::Action::"create", k8s::Action::"deletecollection"], resource is core::configmaps) when { resource.name == "app-config" };`), metav1.CreateOptions{})
		refused(t, "cm-writer grants the create of app-config", err, "create core configmaps in team-a")
		_, err = ri.Create(ctx, poObject(policyobjects.KindNamespaced, secNS, "read-app-config", `@id("alice-reads-app-config")
permit(principal == k8s::User::"alice", action == k8s::Action::"get", resource is core::configmaps) when { resource.name == "app-config" };`), metav1.CreateOptions{})
		if err != nil {
			t.Errorf("control: cm-writer shares the get of app-config they hold: %v", err)
		}
	})
}
