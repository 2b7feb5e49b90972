//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kcedar/kcedar/internal/cluster/webhooks"
	"github.com/kcedar/kcedar/test/docs"
	"github.com/kcedar/kcedar/test/e2e/framework"
)

// replaySetupPolicies: kcedar lets carol read pods in team (RBAC grants
// her the same, so replay against the converted RBAC changes nothing).
const replaySetupPolicies = `
@id("carol-reads-pods")
permit (principal == k8s::User::"carol", action in [k8s::Action::"get", k8s::Action::"list", k8s::Action::"watch"], resource is core::pods)
when { resource.namespace == "team" };
`

// TestReplayOnAClusterRunningKcedar runs kube-apiserver as an operator
// would: kcedar's webhook authorizer with the AuthorizationConfiguration
// kcedar manifests writes, kcedar's CRDs installed, and the audit log of
// docs/reviewing-changes.md (its policy and flags). Requests the
// matchConditions exclude never reach kcedar (its decision log), and
// replay leaves out exactly those (and system:masters'); a watch still
// open is decided at its ResponseStarted; the doc's "Before switching from
// RBAC" block runs as written and changes nothing.
func TestReplayOnAClusterRunningKcedar(t *testing.T) {
	decisions := filepath.Join(t.TempDir(), "decisions.jsonl")
	_, opts := startKcedarWebhook(t, replaySetupPolicies, "--decision-log", decisions, "--decision-log-sample-allows", "1")
	opts.AuthorizationConfig = manifestsAuthorizationConfig(t, opts.Files["kcedar-ca.crt"])
	opts.Tokens = []framework.Token{{Token: "carol-token", User: "carol"}, {Token: "eve-token", User: "eve"}}
	policy, flags := auditSetupFromDocs(t)
	opts.Files["audit/audit-policy.yaml"] = policy
	opts.ExtraFlags = append(flags, "--audit-log-mode=blocking")
	c := framework.Start(t, opts)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	installPolicyCRDs(t, c)
	admin := c.Client(t)
	c.EnsureNamespace(t, "team")
	c.EnsureServiceAccount(t, "kube-system", "replay-robot")
	grantCarolPods(ctx, t, admin)

	token, err := admin.CoreV1().ServiceAccounts("kube-system").CreateToken(ctx, "replay-robot", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	carol, robot := c.ClientFor(t, "carol-token"), c.ClientFor(t, token.Status.Token)
	open, err := carol.CoreV1().Pods("team").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer open.Stop()
	for _, cs := range []kubernetes.Interface{carol, c.ClientFor(t, "eve-token"), robot, admin} {
		_, _ = cs.CoreV1().Pods("team").List(ctx, metav1.ListOptions{})
		_, _ = cs.CoreV1().ConfigMaps("team").List(ctx, metav1.ListOptions{})
		_, _ = cs.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{})
	}
	_, _ = admin.CoreV1().Namespaces().Get(ctx, "replay-marker", metav1.GetOptions{})
	work := t.TempDir()
	logPath := filepath.Join(work, "audit.log")
	waitForAuditMarkerIn(t, filepath.Join(c.Dir, "audit", "audit.log"), logPath)

	// Every decision is logged, NoOpinions too (eve's): the ServiceAccount's
	// requests are absent because they never reached kcedar.
	if log, err := os.ReadFile(decisions); err != nil || !strings.Contains(string(log), `"carol"`) || !strings.Contains(string(log), `"eve"`) ||
		strings.Contains(string(log), "replay-robot") {
		t.Errorf("kcedar's decision log should show carol and eve and not the kube-system ServiceAccount (%v):\n%s", err, log)
	}
	checkReplayLeavesOut(t, c, logPath)
	runReplayRecipe(t, c, work)
}

// grantCarolPods gives carol by RBAC what kcedar's policy gives her.
func grantCarolPods(ctx context.Context, t *testing.T, admin kubernetes.Interface) {
	t.Helper()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "pod-reader", Namespace: "team"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}}}}
	if _, err := admin.RbacV1().Roles("team").Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "carol-reads-pods", Namespace: "team"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "pod-reader"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "carol"}}}
	if _, err := admin.RbacV1().RoleBindings("team").Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitAllowed(ctx, t, admin, authorizationv1.SubjectAccessReviewSpec{User: "carol", ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "team", Verb: "watch", Resource: "pods"}})
}

// manifestsAuthorizationConfig is the authorization-config.yaml kcedar
// manifests writes, its webhook kubeconfig the one startKcedarWebhook's
// files hold.
func manifestsAuthorizationConfig(t *testing.T, caPEM string) string {
	t.Helper()
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(ca, []byte(caPEM), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	cmd := exec.Command(framework.KcedarBinary(t), "manifests", "--url", "https://127.0.0.1:8443", "--ca-file", ca,
		"--webhook-kubeconfig-path", framework.DirPlaceholder+"/kcedar-webhook.kubeconfig", "--output-dir", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kcedar manifests: %v\n%s", err, b)
	}
	data, err := os.ReadFile(filepath.Join(out, "authorization-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "matchConditions") {
		t.Fatalf("no matchConditions in:\n%s", data)
	}
	return string(data)
}

// auditSetupFromDocs is the audit policy and the kube-apiserver flags
// docs/reviewing-changes.md shows, with the run directory for their paths.
func auditSetupFromDocs(t *testing.T) (policy string, flags []string) {
	t.Helper()
	root, err := framework.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "reviewing-changes.md"))
	if err != nil {
		t.Fatal(err)
	}
	policy = fencedAfter(t, string(doc), "```yaml\n# /etc/kubernetes/audit-policy.yaml\n")
	for _, f := range strings.Fields(fencedAfter(t, string(doc), "```text\n--audit-policy-file=")) {
		f = strings.Replace(f, "/etc/kubernetes/", framework.DirPlaceholder+"/audit/", 1)
		flags = append(flags, strings.Replace(f, "/var/log/kubernetes/", framework.DirPlaceholder+"/audit/", 1))
	}
	if len(flags) < 2 || !strings.HasPrefix(flags[0], "--audit-policy-file=") {
		t.Fatalf("audit flags from the doc: %v", flags)
	}
	return policy, flags
}

// fencedAfter is the body of the fenced block that opens with start (its
// first body line kept when start includes it).
func fencedAfter(t *testing.T, doc, start string) string {
	t.Helper()
	i := strings.Index(doc, start)
	if i < 0 {
		t.Fatalf("docs/reviewing-changes.md has no block starting %q", start)
	}
	body := doc[i+strings.Index(start, "\n")+1:]
	return body[:strings.Index(body, "```")]
}

// waitForAuditMarkerIn waits until the marker request's ResponseComplete is
// in the log at src, then copies the log to dst.
func waitForAuditMarkerIn(t *testing.T, src, dst string) {
	t.Helper()
	within(t, time.Minute, "the marker request in the audit log", func() bool {
		data, err := os.ReadFile(src)
		if err != nil || !strings.Contains(string(data), "/namespaces/replay-marker") {
			return false
		}
		for _, line := range strings.Split(string(data), "\n") {
			if strings.Contains(line, "/namespaces/replay-marker") && strings.Contains(line, `"stage":"ResponseComplete"`) {
				return os.WriteFile(dst, data, 0o600) == nil
			}
		}
		return false
	})
}

// checkReplayLeavesOut replays the log against the served policies with
// the default matchConditions (kcedar manifests'): the kube-system
// ServiceAccount's and the admin's requests are left out, counted as the
// log holds them; the open watch is decided at its ResponseStarted.
func checkReplayLeavesOut(t *testing.T, c *framework.Cluster, logPath string) {
	t.Helper()
	pol := filepath.Join(t.TempDir(), "p.cedar")
	if err := os.WriteFile(pol, []byte(replaySetupPolicies), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(framework.KcedarBinary(t), "replay", "--kubeconfig", c.Kubeconfig, "--audit-log", logPath, "-p", pol, "-o", "json").Output()
	if err != nil {
		t.Fatalf("replay: %v\n%s", err, out)
	}
	var sum struct {
		NotSeen, Decided, DecidedAtResponseStarted int
		NotSeenWhy                                 map[string]int
	}
	if err := json.Unmarshal(out, &sum); err != nil {
		t.Fatal(err)
	}
	robot, masters := countRequests(t, logPath)
	// The fourth condition kcedar manifests writes: kube-system's ServiceAccounts.
	exprs, err := webhooks.Bypass{ServiceAccount: "kcedar-system/kcedar", ControlPlane: true}.AuthorizerMatchConditions()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"user in group system:masters (allowed before any authorizer)": masters,
		"excluded by the matchCondition of authorizer kcedar: " + exprs[3]: robot}
	for why, n := range want {
		if sum.NotSeenWhy[why] != n || n == 0 {
			t.Errorf("not seen %q: %d, the log has %d:\n%s", why, sum.NotSeenWhy[why], n, out)
		}
	}
	if sum.DecidedAtResponseStarted < 1 || sum.Decided < 6 {
		t.Errorf("decided %d (%d at ResponseStarted):\n%s", sum.Decided, sum.DecidedAtResponseStarted, out)
	}
}

// countRequests counts, read from the log independently of kcedar, the
// requests (ResponseComplete, or ResponseStarted alone) of kube-system
// ServiceAccounts and of system:masters members.
func countRequests(t *testing.T, logPath string) (kubeSystem, masters int) {
	t.Helper()
	f, err := os.Open(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	final := map[string]auditv1.Event{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var ev auditv1.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Stage == auditv1.StageResponseComplete || ev.Stage == auditv1.StageResponseStarted {
			final[string(ev.AuditID)] = ev
		}
	}
	for _, ev := range final {
		switch {
		case strings.HasPrefix(ev.User.Username, "system:serviceaccount:kube-system:"):
			kubeSystem++
		case slices.Contains(ev.User.Groups, "system:masters"):
			masters++
		}
	}
	return kubeSystem, masters
}

// runReplayRecipe runs the "Before switching from RBAC" block of
// docs/reviewing-changes.md as written: ~/.kube/config is the cluster's
// kubeconfig, audit.log the log, kcedar on the PATH.
func runReplayRecipe(t *testing.T, c *framework.Cluster, work string) {
	t.Helper()
	root, err := framework.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := docs.ReadE2EBlocks(filepath.Join(root, "docs", "reviewing-changes.md"))
	if err != nil {
		t.Fatal(err)
	}
	block, ok := doc.Commands["replay-before-rbac"]
	if !ok {
		t.Fatal("docs/reviewing-changes.md has no block marked <!-- e2e: replay-before-rbac -->")
	}
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".kube"), 0o700); err != nil {
		t.Fatal(err)
	}
	kc, err := os.ReadFile(c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".kube", "config"), kc, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", block)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "HOME="+home, "PATH="+filepath.Dir(framework.KcedarBinary(t))+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the doc's block:\n%s\nfailed: %v\n%s", block, err, out)
	}
	t.Logf("the doc's block:\n%s\n%s", block, out)
}
