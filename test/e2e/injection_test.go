//go:build e2e

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/test/e2e/framework"
)

// injectedPolicy ends a `//` comment, and every other reader's line, and
// writes a permit-everything: the text a namespace admin puts in a
// RoleBinding subject's name, or in a URL that is authorized before its
// name is validated.
func injectedPolicy(id string) string {
	return "x\n@id(\"" + id + "\") permit (principal, action, resource);\r\u2028x\n"
}

// TestClusterTextNeverBecomesPolicy: a namespace admin of a real
// kube-apiserver writes a RoleBinding whose User subject carries a policy,
// beside a real subject, and asks for a ConfigMap whose name carries one
// (authorized, then 404, and logged allowed). `kcedar rbac convert` of the
// cluster and `kcedar generate` of the audit log (plain, --audit, policy
// objects) write only the policies they built: the hostile text stays a
// quoted string, the real subject keeps its grant, and `kcedar validate`
// accepts every output.
func TestClusterTextNeverBecomesPolicy(t *testing.T) {
	c := framework.Start(t, framework.Options{
		Tokens: []framework.Token{{Token: "nsadmin-token", User: "nsadmin"}},
		Files:  map[string]string{"audit/policy.yaml": generateAuditPolicy},
		ExtraFlags: []string{"--audit-policy-file=" + framework.DirPlaceholder + "/audit/policy.yaml",
			"--audit-log-path=" + framework.DirPlaceholder + "/audit/audit.log", "--audit-log-mode=blocking"},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	admin := c.Client(t)
	c.EnsureNamespace(t, "team")
	// A namespace admin's rights (the aggregated admin ClusterRole is empty
	// without kube-controller-manager): RoleBindings and reading ConfigMaps.
	if _, err := admin.RbacV1().Roles("team").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "team-admin"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"rolebindings"}, Verbs: []string{"create", "get", "list"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list"}},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bind(ctx, t, admin, "team", "nsadmin-admin", "Role", "team-admin", "nsadmin")
	waitAllowed(ctx, t, admin, authorizationv1.SubjectAccessReviewSpec{User: "nsadmin", ResourceAttributes: &authorizationv1.ResourceAttributes{
		Namespace: "team", Verb: "create", Group: rbacv1.GroupName, Resource: "rolebindings"}})
	nsadmin := c.ClientFor(t, "nsadmin-token")
	bind(ctx, t, nsadmin, "team", "viewers", "Role", "team-admin", injectedPolicy("ns-viewers"), "bob")
	if _, err := nsadmin.CoreV1().ConfigMaps("team").Get(ctx, injectedPolicy("from-the-log"), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the hostile name: want 404 (authorized, then not found), got %v", err)
	}
	c.EnsureNamespace(t, "generate-marker")

	dir := t.TempDir()
	logPath := filepath.Join(dir, "audit.log")
	waitForGenerateMarker(t, c, logPath)
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(framework.KcedarBinary(t), args...).Output()
		if err != nil {
			t.Fatalf("kcedar %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	rbac := run("rbac", "convert", "--kubeconfig", c.Kubeconfig)
	onlyBuilt(t, "rbac convert", rbac, "rbac/")
	if !strings.Contains(rbac, `principal == k8s::User::"bob"`) {
		t.Errorf("rbac convert: the real subject bob lost its grant:\n%s", rbac)
	}
	for _, args := range [][]string{{}, {"--audit"}} {
		out := run(append([]string{"generate", "--kubeconfig", c.Kubeconfig, "--audit-log", logPath}, args...)...)
		onlyBuilt(t, "generate "+strings.Join(args, " "), out, "generated/")
	}
	objects := run("generate", "--kubeconfig", c.Kubeconfig, "--audit-log", logPath, "--output-format", "policy-objects")
	for _, doc := range strings.Split(objects, "\n---\n") {
		var obj struct {
			Spec struct{ Policies string } `json:"spec"`
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("generate --output-format policy-objects: %v\n%s", err, doc)
		}
		onlyBuilt(t, "generate --output-format policy-objects", obj.Spec.Policies, "generated/")
	}
	path := filepath.Join(dir, "rbac.cedar")
	if err := os.WriteFile(path, []byte(rbac), 0o600); err != nil {
		t.Fatal(err)
	}
	run("validate", "--kubeconfig", c.Kubeconfig, path)
}

// onlyBuilt checks that text parses to policies whose ids all start with
// prefix (the tool's own), none of them the injected ones.
func onlyBuilt(t *testing.T, what, text, prefix string) {
	t.Helper()
	ps, err := cedarlang.ParsePolicies(what, []byte(text))
	if err != nil {
		t.Fatalf("%s: the output does not parse: %v\n%s", what, err, text)
	}
	for _, p := range ps {
		if !strings.HasPrefix(p.ID, prefix) {
			t.Errorf("%s: a policy the tool did not build: %q\n%s", what, p.ID, text)
		}
	}
}

// bind makes a RoleBinding in ns of the role (of kind Role or
// ClusterRole) to the users, as client.
func bind(ctx context.Context, t *testing.T, client kubernetes.Interface, ns, name, kind, role string, users ...string) {
	t.Helper()
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: role}}
	for _, u := range users {
		rb.Subjects = append(rb.Subjects, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: u})
	}
	if _, err := client.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatalf("RoleBinding %s/%s: %v", ns, name, err)
	}
}
