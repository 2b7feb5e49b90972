//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/client-go/kubernetes"

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
		genWaitAllowed(ctx, t, admin, spec)
	}
}

func genWaitAllowed(ctx context.Context, t *testing.T, admin kubernetes.Interface, spec authorizationv1.SubjectAccessReviewSpec) {
	t.Helper()
	for ctx.Err() == nil {
		sar, err := admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
		if err == nil && sar.Status.Allowed {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("never allowed: %+v", spec)
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
