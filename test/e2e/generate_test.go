//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/kcedar/kcedar/internal/cluster/policyobjects"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/tools/generate"
	"github.com/kcedar/kcedar/test/e2e/framework"
)

// generateAuditPolicy logs every request at Metadata level.
const generateAuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
rules:
- level: Metadata
`

// TestGenerate has an RBAC cluster write an audit log while users, a
// group's member and a ServiceAccount, with broader RBAC than they use,
// make allowed and forbidden requests. `kcedar generate` of the server's
// own log writes policies that `kcedar validate` accepts and with which
// `kcedar replay` of the log allows every allowed request but the system
// identities' and none of the forbidden ones; `kcedar diff` from the
// cluster's own RBAC (`kcedar rbac convert` without the bootstrap
// bindings: the users' requests need none of them) to them shows only
// lost access.
func TestGenerate(t *testing.T) {
	c := framework.Start(t, framework.Options{
		Tokens: []framework.Token{{Token: "alice-token", User: "alice"}, {Token: "bob-token", User: "bob", Groups: []string{"dev"}},
			{Token: "carol-token", User: "carol", Groups: []string{"dev"}}, {Token: "eve-token", User: "eve"}},
		Files: map[string]string{"audit/policy.yaml": generateAuditPolicy},
		ExtraFlags: []string{"--audit-policy-file=" + framework.DirPlaceholder + "/audit/policy.yaml",
			"--audit-log-path=" + framework.DirPlaceholder + "/audit/audit.log", "--audit-log-mode=blocking"},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	admin := c.Client(t)
	c.EnsureNamespace(t, "team")
	c.EnsureNamespace(t, "other")
	c.EnsureServiceAccount(t, "team", "robot")
	generateRBAC(ctx, t, admin)
	generateTraffic(ctx, t, c)

	bin, dir := framework.KcedarBinary(t), t.TempDir()
	logPath, gen := filepath.Join(dir, "audit.log"), filepath.Join(dir, "generated")
	waitForGenerateMarker(t, c, logPath)
	run := func(args ...string) []byte {
		t.Helper()
		out, err := exec.Command(bin, args...).Output()
		if err != nil {
			var stderr string
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = string(ee.Stderr)
			}
			t.Fatalf("kcedar %s: %v\n%s\n%s", strings.Join(args, " "), err, out, stderr)
		}
		return out
	}
	// The commands of docs/least-privilege.md.
	run("generate", "--kubeconfig", c.Kubeconfig, "--audit-log", logPath, "--group-subject", "dev", "-o", gen)
	run("validate", "--kubeconfig", c.Kubeconfig, gen)
	stdout := string(run("generate", "--kubeconfig", c.Kubeconfig, "--audit-log", logPath))
	if !strings.Contains(stdout, `principal == k8s::User::"carol"`) || !strings.Contains(stdout, "system:masters members: ") {
		t.Errorf("want a policy for carol and the admin counted as left out:\n%s", stdout)
	}
	if files, _ := filepath.Glob(filepath.Join(gen, "*.cedar")); len(files) != 3 {
		t.Errorf("want the policies of alice, the group dev and the ServiceAccount, got %v", files)
	}
	generateReplay(t, run, c.Kubeconfig, logPath, gen)
	rbac := filepath.Join(dir, "rbac.cedar")
	run("rbac", "convert", "--kubeconfig", c.Kubeconfig, "--skip-bootstrap-bindings", "--file", rbac)
	var diff struct {
		Regions []struct {
			Kind      string
			Subject   struct{ Kind, Name string }
			Verbs     []string
			Resources []string
		}
	}
	out := run("diff", "--kubeconfig", c.Kubeconfig, rbac, gen, "-o", "json")
	if err := json.Unmarshal(out, &diff); err != nil {
		t.Fatalf("diff: %v\n%s", err, out)
	}
	lostForAlice := false
	for _, r := range diff.Regions {
		if r.Kind != "lost" {
			t.Errorf("the generated policies give access the RBAC does not: %+v", r)
		}
		lostForAlice = lostForAlice || r.Subject.Name == "alice" && strings.Contains(strings.Join(r.Resources, " "), "secrets")
	}
	if !lostForAlice {
		t.Errorf("the diff does not show alice losing the secrets she never used: %s", out)
	}
	t.Logf("diff from the converted RBAC: %d regions, all lost", len(diff.Regions))
}

// generateReplay replays the log with the generated policies alone: every
// allowed request of a non-system identity stays allowed, no forbidden
// request is allowed.
func generateReplay(t *testing.T, run func(...string) []byte, kubeconfig, logPath, gen string) {
	t.Helper()
	var doc struct {
		Decided, NewlyDenied, NewlyAllowed int
		ChangedRequests                    []struct{ AuditID, Was, Now, User string }
	}
	out := run("replay", "--kubeconfig", kubeconfig, "--audit-log", logPath, "-p", gen, "--changes", "-o", "json")
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatalf("replay output: %v\n%s", err, out)
	}
	users, allowed, forbidden := auditUsers(t, logPath)
	for _, ch := range doc.ChangedRequests {
		u := users[ch.AuditID]
		if ch.Was != "allow" || generate.SystemClass(u) == "" {
			t.Errorf("replay with the generated policies: %+v (user %+v)", ch, u)
		}
	}
	t.Logf("replay: decided %d, newly denied %d (system identities), newly allowed %d; the log: %d allowed and %d forbidden requests of other users",
		doc.Decided, doc.NewlyDenied, doc.NewlyAllowed, allowed, forbidden)
	if doc.NewlyAllowed != 0 || allowed < 20 || forbidden < 8 {
		t.Errorf("want no request newly allowed, and a log of enough allowed and forbidden requests: %s", out)
	}
}

// auditUsers reads the log independently of kcedar: the user of each
// request (impersonated where there is one), and the counts of allowed
// and forbidden requests of non-system identities.
func auditUsers(t *testing.T, logPath string) (users map[string]entities.UserInfo, allowed, forbidden int) {
	t.Helper()
	f, err := os.Open(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	users = map[string]entities.UserInfo{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var ev auditv1.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Stage != auditv1.StageResponseComplete {
			continue
		}
		u := ev.User
		if ev.ImpersonatedUser != nil {
			u = *ev.ImpersonatedUser
		}
		users[string(ev.AuditID)] = entities.UserInfo{Name: u.Username, Groups: u.Groups}
		if generate.SystemClass(users[string(ev.AuditID)]) != "" {
			continue
		}
		switch ev.Annotations["authorization.k8s.io/decision"] {
		case "allow":
			allowed++
		case "forbid":
			forbidden++
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return users, allowed, forbidden
}

// generateRBAC grants more than the traffic uses: alice edits pods,
// configmaps and secrets in team; the group dev reads pods and
// deployments everywhere; the ServiceAccount team/robot reads configmaps
// and pods in team; eve nothing.
func generateRBAC(ctx context.Context, t *testing.T, admin kubernetes.Interface) {
	t.Helper()
	r := admin.RbacV1()
	rules := map[string][]rbacv1.PolicyRule{
		"gen-editor": {{APIGroups: []string{""}, Resources: []string{"pods", "configmaps", "secrets"}, Verbs: []string{"*"}}},
		"gen-reader": {{APIGroups: []string{"", "apps"}, Resources: []string{"pods", "pods/log", "deployments"}, Verbs: []string{"get", "list", "watch"}}},
		"gen-robot":  {{APIGroups: []string{""}, Resources: []string{"configmaps", "pods"}, Verbs: []string{"get", "list", "watch"}}},
	}
	for name, rs := range rules {
		if _, err := r.ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rs}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ref := func(name string) rbacv1.RoleRef {
		return rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}
	}
	for _, b := range []*rbacv1.RoleBinding{
		{ObjectMeta: metav1.ObjectMeta{Name: "alice-edits", Namespace: "team"}, RoleRef: ref("gen-editor"),
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "robot-reads", Namespace: "team"}, RoleRef: ref("gen-robot"),
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "robot", Namespace: "team"}}},
	} {
		if _, err := r.RoleBindings("team").Create(ctx, b, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "dev-reads"}, RoleRef: ref("gen-reader"),
		Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "dev"}}}
	if _, err := r.ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, spec := range []authorizationv1.SubjectAccessReviewSpec{
		{User: "alice", ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "team", Verb: "list", Resource: "secrets"}},
		{User: "bob", Groups: []string{"dev"}, ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "list", Resource: "pods"}},
		{User: "system:serviceaccount:team:robot", ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "team", Verb: "list", Resource: "configmaps"}},
	} {
		waitAllowed(ctx, t, admin, spec)
	}
}

// generateTraffic is what the users do: some of what RBAC grants them,
// and some it does not (their outcome is the API server's business).
func generateTraffic(ctx context.Context, t *testing.T, c *framework.Cluster) {
	t.Helper()
	token, err := c.Client(t).CoreV1().ServiceAccounts("team").CreateToken(ctx, "robot", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	alice, bob, carol := c.ClientFor(t, "alice-token"), c.ClientFor(t, "bob-token"), c.ClientFor(t, "carol-token")
	robot, eve := c.ClientFor(t, token.Status.Token), c.ClientFor(t, "eve-token")
	for round := range 3 {
		name := "cm-" + string(rune('a'+round))
		_, _ = alice.CoreV1().ConfigMaps("team").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		_, _ = alice.CoreV1().ConfigMaps("team").Get(ctx, name, metav1.GetOptions{})
		_ = alice.CoreV1().ConfigMaps("team").Delete(ctx, name, metav1.DeleteOptions{})
		_, _ = alice.CoreV1().Pods("team").List(ctx, metav1.ListOptions{})
		_, _ = alice.CoreV1().Pods("team").Get(ctx, "web", metav1.GetOptions{})
		_, _ = alice.CoreV1().Secrets("other").List(ctx, metav1.ListOptions{}) // forbidden
		_, _ = alice.CoreV1().Nodes().List(ctx, metav1.ListOptions{})          // forbidden
		_, _ = bob.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		_, _ = bob.AppsV1().Deployments("team").Get(ctx, "web", metav1.GetOptions{})
		_, _ = bob.CoreV1().Secrets("team").Get(ctx, "token", metav1.GetOptions{}) // forbidden
		_, _ = carol.CoreV1().Pods("other").Get(ctx, "db", metav1.GetOptions{})
		_ = carol.CoreV1().Pods("other").Delete(ctx, "db", metav1.DeleteOptions{}) // forbidden
		_, _ = robot.CoreV1().ConfigMaps("team").List(ctx, metav1.ListOptions{})
		_, _ = robot.CoreV1().Secrets("team").List(ctx, metav1.ListOptions{}) // forbidden
		_, _ = eve.CoreV1().Pods("team").List(ctx, metav1.ListOptions{})      // forbidden
	}
	// The marker: the last request waitForGenerateMarker looks for.
	_, _ = c.Client(t).CoreV1().Namespaces().Get(ctx, "generate-marker", metav1.GetOptions{})
}

// waitForGenerateMarker waits until the marker request's ResponseComplete
// is in the audit log, then copies the log to dst.
func waitForGenerateMarker(t *testing.T, c *framework.Cluster, dst string) {
	t.Helper()
	src := filepath.Join(c.Dir, "audit", "audit.log")
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		data, err := os.ReadFile(src)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			if strings.Contains(line, "/namespaces/generate-marker") && strings.Contains(line, `"stage":"ResponseComplete"`) {
				if err := os.WriteFile(dst, data, 0o600); err != nil {
					t.Fatal(err)
				}
				return
			}
		}
	}
	t.Fatal("the audit log never showed the marker request")
}

// generateConditionalPermit is the node-restricted permit of kcedar issue
// 44: the policy in force that generate is given.
const generateConditionalPermit = `@id("payments-dev-on-node-1")
permit (principal in k8s::Group::"payments-dev", action == k8s::Action::"create", resource is core::pods)
when { resource.namespace == "payments" && resource has object && resource.object has v1 && resource.object.v1 has spec
  && resource.object.v1.spec has nodeName && resource.object.v1.spec.nodeName == "payments-node-1" };
`

// generateServedPolicies are what kcedar serves: the conditional permit,
// and what payments-dev and alice do beyond it (what generate writes).
const generateServedPolicies = generateConditionalPermit + `
@id("payments-dev-pods")
permit (principal in k8s::Group::"payments-dev", action in [k8s::Action::"get", k8s::Action::"list", k8s::Action::"delete"], resource is core::pods)
when { resource.namespace == "payments" };

@id("alice-configmaps")
permit (principal == k8s::User::"alice", action in [k8s::Action::"get", k8s::Action::"create"], resource is core::configmaps)
when { resource.namespace == "payments" };
`

// TestGenerateOnAClusterRunningKcedar runs kcedar as the real
// kube-apiserver's webhook authorizer with admission enforcement, set up
// as kcedar manifests prints it, with the conditional permit of issue 44
// enforced, and runs generate on the server's own audit log: the creates
// the conditional permit allowed (and the one admission refused) are not
// generated, nor anything allowing them; kcedar's own ServiceAccount
// (which the matchConditions send around kcedar) and what the bootstrap
// RBAC gives every user (discovery, self-reviews) are left out and
// counted; generated pod names are a pattern; the policy objects are
// NamespacedCedarPolicy objects in payments. With --cluster the same holds
// against the cluster's CedarPolicy objects and its live RBAC.
func TestGenerateOnAClusterRunningKcedar(t *testing.T) {
	c := startGenerateKcedar(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	podNames := generateKcedarTraffic(ctx, t, c)
	dir := t.TempDir()
	logPath := filepath.Join(dir, "audit.log")
	waitForGenerateMarker(t, c, logPath)
	counts := countIssue44(t, logPath)
	counts.podNames = podNames
	t.Logf("the log: %+v", counts)
	bin := framework.KcedarBinary(t)
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(bin, args...).Output()
		if err != nil {
			var stderr string
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = string(ee.Stderr)
			}
			t.Fatalf("kcedar %s: %v\n%s\n%s", strings.Join(args, " "), err, out, stderr)
		}
		return string(out)
	}
	existing := filepath.Join(dir, "existing.cedar")
	if err := os.WriteFile(existing, []byte(generateConditionalPermit), 0o600); err != nil {
		t.Fatal(err)
	}
	out := run("generate", "--kubeconfig", c.Kubeconfig, "--audit-log", logPath, "--policies", existing)
	checkGeneratedForIssue44(t, out, counts, "the bootstrap RBAC every user has")
	gen := filepath.Join(dir, "generated.cedar")
	if err := os.WriteFile(gen, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	run("validate", "--kubeconfig", c.Kubeconfig, existing, gen)

	objs := run("generate", "--kubeconfig", c.Kubeconfig, "--audit-log", logPath, "--policies", existing, "--output-format", "policy-objects")
	if strings.Count(objs, "kind: NamespacedCedarPolicy") != 2 || strings.Contains(objs, "kind: CedarPolicy") || strings.Count(objs, "namespace: payments") != 2 {
		t.Errorf("want alice's and bob's policies as NamespacedCedarPolicy objects in payments:\n%s", objs)
	}
	objFile := filepath.Join(dir, "objects.yaml")
	if err := os.WriteFile(objFile, []byte(objs), 0o600); err != nil {
		t.Fatal(err)
	}
	if v := run("validate", "--kubeconfig", c.Kubeconfig, "--policy-objects", objFile); strings.Contains(v, "not used") {
		t.Errorf("validate --policy-objects: %s", v)
	}

	// The conditional permit as a CedarPolicy object of the cluster.
	installPolicyCRDs(t, c)
	dyn, err := dynamic.NewForConfig(c.AdminConfig)
	if err != nil {
		t.Fatal(err)
	}
	createPolicy(t, dyn.Resource(policyobjects.ClusterResource), policyobjects.KindCluster, "", "payments-dev-on-node-1", generateConditionalPermit)
	out = run("generate", "--kubeconfig", c.Kubeconfig, "--cluster", "--audit-log", logPath)
	checkGeneratedForIssue44(t, out, counts, "the cluster's RBAC (")
	t.Logf("generate --cluster:\n%s", out)
}

// countIssue44 counts, read from the log independently of kcedar, the
// creates of pods in payments by payments-dev logged allowed, and the
// requests of kcedar's ServiceAccount.
func countIssue44(t *testing.T, logPath string) issue44Counts {
	t.Helper()
	data, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	var n issue44Counts
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var ev auditv1.Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Stage != auditv1.StageResponseComplete {
			continue
		}
		switch {
		case ev.User.Username == "system:serviceaccount:kcedar-system:kcedar":
			n.kcedarSA++
		case slices.Contains(ev.User.Groups, "payments-dev") && ev.Verb == "create" && podsOf(ev.RequestURI) &&
			ev.Annotations["authorization.k8s.io/decision"] == "allow":
			n.conditionalCreates++
		}
	}
	return n
}

// podsOf reports whether uri is the pods collection of payments.
func podsOf(uri string) bool {
	path, _, _ := strings.Cut(uri, "?")
	return path == "/api/v1/namespaces/payments/pods"
}

// issue44Counts are what the log holds, counted independently of kcedar.
type issue44Counts struct {
	// conditionalCreates are payments-dev's creates of pods in payments
	// logged allowed; kcedarSA the requests of kcedar's ServiceAccount.
	conditionalCreates, kcedarSA int
	// podNames are the names alice's pods were given.
	podNames []string
}

// checkGeneratedForIssue44 checks generate's output on the log.
func checkGeneratedForIssue44(t *testing.T, out string, n issue44Counts, rbac string) {
	t.Helper()
	for _, want := range []string{
		fmt.Sprintf("// %d allowed requests are allowed by the existing policies on conditions", n.conditionalCreates),
		fmt.Sprintf("//   %d requests: excluded by the matchCondition of authorizer kcedar: request.user != 'system:serviceaccount:kcedar-system:kcedar'", n.kcedarSA),
		"allowed requests are allowed by " + rbac,
		`@id("generated/alice/configmaps-create")`, `@id("generated/alice/configmaps-get")`, `@id("generated/bob/pods-get")`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("want %q in:\n%s", want, out)
		}
	}
	for _, unwanted := range []string{"pods-create", "kcedar-system/kcedar", "nonresource", "selfsubject"} {
		if strings.Contains(out, unwanted) {
			t.Errorf("%q in:\n%s", unwanted, out)
		}
	}
	digits := slices.ContainsFunc(n.podNames, func(name string) bool { return strings.ContainsAny(name[len(name)-5:], "0123456789") })
	if digits != strings.Contains(out, `resource.name like "build-*"`) {
		t.Errorf("pod names %v: want them as build-* when one has a digit in its suffix:\n%s", n.podNames, out)
	}
}

// startGenerateKcedar starts kcedar serve --admission-enforcement with
// generateServedPolicies and a cluster configured as kcedar manifests
// --admission-enforcement prints it (its matchConditions skip kcedar's own
// ServiceAccount kcedar-system/kcedar), writing an audit log; it returns
// once admission enforces the conditions.
func startGenerateKcedar(t *testing.T) *framework.Cluster {
	t.Helper()
	bin, dir := framework.KcedarBinary(t), t.TempDir()
	policies, caFile, adminKubeconfig := filepath.Join(dir, "policies.cedar"), filepath.Join(dir, "kcedar-ca.crt"), filepath.Join(dir, "admin.kubeconfig")
	if err := os.WriteFile(policies, []byte(generateServedPolicies), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(framework.FreePort(t))
	// kcedar verifies the ValidatingWebhookConfiguration through KUBECONFIG,
	// a file written once the cluster runs (kcedar retries until then).
	kcedar := framework.StartProcess(t, "env", "KUBECONFIG="+adminKubeconfig, bin, "serve", "--listen", addr, "--policies", policies,
		"--write-ca", caFile, "--admission-enforcement", "--reload-interval", "200ms")
	kcedar.WaitForTLS(t, addr, caFile, 60*time.Second)
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
		t.Fatal(err)
	}
	c := framework.Start(t, framework.Options{
		AuthorizationConfig: condTestAuthorizationConfig(t, read("authorization-config.yaml")),
		Files: map[string]string{"kcedar-webhook.kubeconfig": string(read("kcedar-webhook.kubeconfig")),
			"audit/policy.yaml": generateAuditPolicy},
		Tokens: []framework.Token{{Token: "alice-token", User: "alice", Groups: []string{"payments-dev"}},
			{Token: "bob-token", User: "bob", Groups: []string{"payments-dev"}}, {Token: "eve-token", User: "eve"}},
		ExtraFlags: []string{"--audit-policy-file=" + framework.DirPlaceholder + "/audit/policy.yaml",
			"--audit-log-path=" + framework.DirPlaceholder + "/audit/audit.log", "--audit-log-mode=blocking"},
	})
	kubeconfig, err := os.ReadFile(c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(adminKubeconfig, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	admin := c.Client(t)
	if _, err := admin.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(t.Context(), &vwc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.EnsureNamespace(t, "payments")
	bob := c.ClientFor(t, "bob-token")
	within(t, time.Minute, "admission enforcing the conditions (bob's pod on another node refused)", func() bool {
		_, err := bob.CoreV1().Pods("payments").Create(t.Context(), condPod("probe", "payments-node-2"), metav1.CreateOptions{})
		if err == nil {
			_ = admin.CoreV1().Pods("payments").Delete(t.Context(), "probe", metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
		}
		return condRejected(err)
	})
	return c
}

// generateKcedarTraffic is what the users do on the cluster running kcedar,
// and kcedar's own ServiceAccount; it returns the names alice's pods got.
func generateKcedarTraffic(ctx context.Context, t *testing.T, c *framework.Cluster) []string {
	t.Helper()
	admin := c.Client(t)
	c.EnsureServiceAccount(t, "kcedar-system", "kcedar")
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "kcedar-reads"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"", "coordination.k8s.io"}, Resources: []string{"configmaps", "leases"}, Verbs: []string{"get", "list"}}}}
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "kcedar-reads"}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "kcedar-reads"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "kcedar", Namespace: "kcedar-system"}}}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	token, err := admin.CoreV1().ServiceAccounts("kcedar-system").CreateToken(ctx, "kcedar", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sa := c.ClientFor(t, token.Status.Token)
	waitAllowed(ctx, t, admin, authorizationv1.SubjectAccessReviewSpec{User: "system:serviceaccount:kcedar-system:kcedar",
		Groups: []string{"system:serviceaccounts"}, ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "list", Resource: "configmaps"}})
	for range 3 {
		_, _ = sa.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{})
		_, _ = sa.CoordinationV1().Leases("kcedar-system").Get(ctx, "kcedar", metav1.GetOptions{})
	}
	var podNames []string
	alice, bob := c.ClientFor(t, "alice-token"), c.ClientFor(t, "bob-token")
	for range 6 {
		pod := condPod("", "payments-node-1")
		pod.GenerateName = "build-"
		created, err := alice.CoreV1().Pods("payments").Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("alice's pod on payments-node-1: %v", err)
		}
		podNames = append(podNames, created.Name)
		_, _ = alice.CoreV1().Pods("payments").Get(ctx, created.Name, metav1.GetOptions{})
		_ = alice.CoreV1().Pods("payments").Delete(ctx, created.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	}
	if _, err := bob.CoreV1().Pods("payments").Create(ctx, condPod("web", "payments-node-1"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("bob's pod on payments-node-1: %v", err)
	}
	if _, err := bob.CoreV1().Pods("payments").Create(ctx, condPod("web-2", "payments-node-2"), metav1.CreateOptions{}); !condRejected(err) {
		t.Fatalf("bob's pod on payments-node-2: want refused in admission, got %v", err)
	}
	_, _ = bob.CoreV1().Pods("payments").Get(ctx, "web", metav1.GetOptions{})
	_, _ = alice.CoreV1().ConfigMaps("payments").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "alice-settings"}}, metav1.CreateOptions{})
	_, _ = alice.CoreV1().ConfigMaps("payments").Get(ctx, "alice-settings", metav1.GetOptions{})
	// Discovery and self-reviews, which the bootstrap RBAC gives every user.
	_, _ = alice.Discovery().ServerVersion()
	_, _ = alice.Discovery().ServerGroups()
	_ = alice.Discovery().RESTClient().Get().AbsPath("/openapi/v3").Do(ctx).Error()
	_, _ = alice.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "payments", Verb: "create", Resource: "pods"}}}, metav1.CreateOptions{})
	_, _ = c.ClientFor(t, "eve-token").CoreV1().Secrets("payments").List(ctx, metav1.ListOptions{}) // forbidden
	_, _ = admin.CoreV1().Namespaces().Get(ctx, "generate-marker", metav1.GetOptions{})
	return podNames
}
