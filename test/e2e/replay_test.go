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
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kcedar/kcedar/test/e2e/framework"
)

// replayAuditPolicy logs every request at Metadata level, every stage.
const replayAuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
rules:
- level: Metadata
`

// TestReplay has an RBAC cluster write an audit log while users (by token
// and by impersonation), a ServiceAccount and the admin make allowed and
// forbidden requests; `kcedar replay` of that log against `kcedar rbac
// convert` of the cluster's RBAC changes nothing, and against the RBAC
// with one RoleBinding removed it reports exactly the requests that
// binding allowed as newly denied.
func TestReplay(t *testing.T) {
	c := framework.Start(t, framework.Options{
		Tokens: []framework.Token{{Token: "alice-token", User: "alice"}, {Token: "bob-token", User: "bob"}, {Token: "eve-token", User: "eve"}},
		Files:  map[string]string{"audit/policy.yaml": replayAuditPolicy},
		ExtraFlags: []string{"--audit-policy-file=" + framework.DirPlaceholder + "/audit/policy.yaml",
			"--audit-log-path=" + framework.DirPlaceholder + "/audit/audit.log", "--audit-log-mode=blocking"},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	admin := c.Client(t)
	c.EnsureServiceAccount(t, "team", "robot")
	replayRBAC(ctx, t, admin)
	replayTraffic(ctx, t, c)

	bin, dir := framework.KcedarBinary(t), t.TempDir()
	logPath := filepath.Join(dir, "audit.log")
	waitForAuditMarker(t, c, logPath)

	run := func(args ...string) []byte {
		t.Helper()
		cmd := exec.Command(bin, args...)
		out, err := cmd.Output()
		if err != nil {
			var stderr string
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = string(ee.Stderr)
			}
			t.Fatalf("kcedar %s: %v\n%s\n%s", strings.Join(args, " "), err, out, stderr)
		}
		return out
	}
	replayOnce := func(name string) (changed []string) {
		rbac := filepath.Join(dir, name+".cedar")
		run("rbac", "convert", "--kubeconfig", c.Kubeconfig, "--file", rbac)
		var doc struct {
			NewlyDenied, NewlyAllowed, Decided, Conditional, Undecidable int
			ChangedRequests                                              []struct{ AuditID, Was, Now string }
		}
		out := run("replay", "--kubeconfig", c.Kubeconfig, "--audit-log", logPath, "-p", rbac, "--changes", "-o", "json")
		if err := json.Unmarshal(out, &doc); err != nil {
			t.Fatalf("replay output: %v\n%s", err, out)
		}
		for _, ch := range doc.ChangedRequests {
			changed = append(changed, ch.AuditID+" "+ch.Was+">"+ch.Now)
		}
		t.Logf("%s: decided %d, newly denied %d, newly allowed %d, conditional %d, undecidable %d",
			name, doc.Decided, doc.NewlyDenied, doc.NewlyAllowed, doc.Conditional, doc.Undecidable)
		if doc.Decided < 40 || doc.Conditional+doc.Undecidable != 0 {
			t.Errorf("%s: %s", name, out)
		}
		return changed
	}

	if changed := replayOnce("rbac"); len(changed) != 0 {
		t.Errorf("against the converted RBAC: changed %v", changed)
	}
	if err := admin.RbacV1().RoleBindings("team").Delete(ctx, "alice-reads-pods", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	changed := replayOnce("edited")
	want := alicePodRequests(t, logPath)
	if len(want) < 4 {
		t.Fatalf("only %d allowed pod requests of alice in the log", len(want))
	}
	slices.Sort(changed)
	if !slices.Equal(changed, want) {
		t.Errorf("with alice-reads-pods removed:\n got %v\nwant %v", changed, want)
	}
	replayTheChain(t, c, run, logPath, want)
}

// replayTheChain: kcedar (no policy objects: NoOpinion) before the
// cluster's RBAC, as kcedar manifests chains them. replay --cluster reads
// and converts the cluster's RBAC and decides as the chain: only what the
// RBAC change took away is newly denied. --kcedar-only counts every
// request RBAC allowed as newly denied.
func replayTheChain(t *testing.T, c *framework.Cluster, run func(...string) []byte, logPath string, want []string) {
	t.Helper()
	installPolicyCRDs(t, c)
	replay := func(extra ...string) (chain string, changed []string, denied int) {
		var doc struct {
			Chain           string
			NewlyDenied     int
			ChangedRequests []struct{ AuditID, Was, Now, DecidedBy string }
		}
		out := run(append([]string{"replay", "--cluster", "--kubeconfig", c.Kubeconfig, "--audit-log", logPath, "--changes", "-o", "json"}, extra...)...)
		if err := json.Unmarshal(out, &doc); err != nil {
			t.Fatalf("replay output: %v\n%s", err, out)
		}
		for _, ch := range doc.ChangedRequests {
			changed = append(changed, ch.AuditID+" "+ch.Was+">"+ch.Now)
		}
		slices.Sort(changed)
		return doc.Chain, changed, doc.NewlyDenied
	}
	chain, changed, _ := replay()
	if chain != "kcedar, then RBAC" || !slices.Equal(changed, want) {
		t.Errorf("replay --cluster (%s):\n got %v\nwant %v", chain, changed, want)
	}
	chain, _, denied := replay("--kcedar-only")
	if chain != "kcedar alone" || denied <= len(want) {
		t.Errorf("replay --cluster --kcedar-only (%s): %d newly denied, want every request RBAC allowed", chain, denied)
	}
	t.Logf("kcedar before RBAC: %d changed with the chain, %d newly denied with kcedar alone", len(changed), denied)
}

// replayRBAC: alice reads pods in team; the ServiceAccount team/robot reads
// configmaps there; bob may impersonate alice.
func replayRBAC(ctx context.Context, t *testing.T, admin kubernetes.Interface) {
	t.Helper()
	r := admin.RbacV1()
	roles := []*rbacv1.Role{
		{ObjectMeta: metav1.ObjectMeta{Name: "pod-reader", Namespace: "team"}, Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "cm-reader", Namespace: "team"}, Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list"}}}},
	}
	for _, role := range roles {
		if _, err := r.Roles("team").Create(ctx, role, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	bindings := []*rbacv1.RoleBinding{
		{ObjectMeta: metav1.ObjectMeta{Name: "alice-reads-pods", Namespace: "team"}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "pod-reader"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "robot-reads-configmaps", Namespace: "team"}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "cm-reader"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "robot", Namespace: "team"}}},
	}
	for _, b := range bindings {
		if _, err := r.RoleBindings("team").Create(ctx, b, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cr := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "impersonate-alice"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"users"}, Verbs: []string{"impersonate"}, ResourceNames: []string{"alice"}}}}
	if _, err := r.ClusterRoles().Create(ctx, cr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "bob-impersonates-alice"}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "impersonate-alice"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "bob"}}}
	if _, err := r.ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The authorizer's caches: wait until every binding shows.
	for _, check := range []authorizationv1.SubjectAccessReviewSpec{
		{User: "alice", ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "team", Verb: "list", Resource: "pods"}},
		{User: "system:serviceaccount:team:robot", ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "team", Verb: "list", Resource: "configmaps"}},
		{User: "bob", ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "impersonate", Resource: "users", Name: "alice"}},
	} {
		waitAllowed(ctx, t, admin, check)
	}
}

// replayTraffic makes allowed and forbidden requests as alice (token), bob
// impersonating alice, eve (nothing granted), the ServiceAccount and the
// admin; the outcome of each is the apiserver's business, only that it
// was decided matters.
func replayTraffic(ctx context.Context, t *testing.T, c *framework.Cluster) {
	t.Helper()
	token, err := c.Client(t).CoreV1().ServiceAccounts("team").CreateToken(ctx, "robot", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	impersonating := c.UserConfig("bob-token")
	impersonating.Impersonate = rest.ImpersonationConfig{UserName: "alice"}
	clients := []kubernetes.Interface{c.ClientFor(t, "alice-token"), kubernetes.NewForConfigOrDie(impersonating),
		c.ClientFor(t, "eve-token"), c.ClientFor(t, token.Status.Token), c.Client(t)}
	for round := range 3 {
		for _, cs := range clients {
			core := cs.CoreV1()
			_, _ = core.Pods("team").List(ctx, metav1.ListOptions{})
			_, _ = core.Pods("team").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
			_, _ = core.Pods("team").Get(ctx, "web", metav1.GetOptions{})
			_, _ = core.Pods("other").List(ctx, metav1.ListOptions{})
			_, _ = core.ConfigMaps("team").List(ctx, metav1.ListOptions{})
			_, _ = core.Secrets("team").List(ctx, metav1.ListOptions{})
			_, _ = core.ConfigMaps("team").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm-" + string(rune('a'+round))}}, metav1.CreateOptions{})
			_, _ = cs.Discovery().RESTClient().Get().AbsPath("/version").DoRaw(ctx)
		}
	}
	// The marker: the last request waitForAuditMarker looks for.
	_, _ = c.Client(t).CoreV1().Namespaces().Get(ctx, "replay-marker", metav1.GetOptions{})
}

// waitForAuditMarker waits until the marker request's ResponseComplete is
// in the audit log, then copies the log to dst.
func waitForAuditMarker(t *testing.T, c *framework.Cluster, dst string) {
	t.Helper()
	src := filepath.Join(c.Dir, "audit", "audit.log")
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		data, err := os.ReadFile(src)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			if strings.Contains(line, "/namespaces/replay-marker") && strings.Contains(line, `"stage":"ResponseComplete"`) {
				if err := os.WriteFile(dst, data, 0o600); err != nil {
					t.Fatal(err)
				}
				return
			}
		}
	}
	t.Fatal("the audit log never showed the marker request")
}

// alicePodRequests are the requests alice-reads-pods allowed, read from
// the log independently of kcedar: alice's (by token or impersonated)
// allowed requests on pods in team, as "auditID allow>NoOpinion".
func alicePodRequests(t *testing.T, logPath string) []string {
	t.Helper()
	f, err := os.Open(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var ev auditv1.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatal(err)
		}
		u := ev.User
		if ev.ImpersonatedUser != nil {
			u = *ev.ImpersonatedUser
		}
		if ev.Stage != auditv1.StageResponseComplete || u.Username != "alice" || ev.ObjectRef == nil ||
			ev.ObjectRef.Resource != "pods" || ev.ObjectRef.Namespace != "team" || ev.Annotations["authorization.k8s.io/decision"] != "allow" {
			continue
		}
		out = append(out, string(ev.AuditID)+" allow>NoOpinion")
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}
