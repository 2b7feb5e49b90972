//go:build e2e

package e2e

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/dynamic"

	"github.com/kcedar/kcedar/internal/cluster/policyobjects"
	"github.com/kcedar/kcedar/test/e2e/framework"
)

// pluginPolicies are the cluster's policy objects the plugin reads: a read
// grant in dev, and a create that depends on the object (a condition).
const pluginPolicies = `@id("dev-reads-pods")
permit (principal == k8s::User::"alice", action in [k8s::Action::"get", k8s::Action::"list"], resource is core::pods)
when { resource.namespace == "dev" };
@id("prod-reads-pods")
permit (principal == k8s::User::"alice", action == k8s::Action::"get", resource is core::pods)
when { resource.namespace == "prod" };
@id("dev-creates-web-pods")
permit (principal == k8s::User::"alice", action == k8s::Action::"create", resource is core::pods)
when { resource.namespace == "dev" && resource has object && resource.object.metadata has name && resource.object.metadata.name like "web-*" };`

// kubectlBinary is kubectl v1.37.1 as hack/kube-binaries.sh builds it from
// the Go module proxy ($KUBECTL_BIN, else its cache), never one on PATH.
func kubectlBinary(t *testing.T) string {
	p := os.Getenv("KUBECTL_BIN")
	if p == "" {
		cache := os.Getenv("KUBE_E2E_CACHE")
		if cache == "" {
			d, _ := os.UserCacheDir()
			cache = filepath.Join(d, "kube-e2e")
		}
		p = filepath.Join(cache, "kubectl", framework.DefaultKubeVersion, "kubectl")
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("no kubectl at %s: run `make e2e`, or hack/kube-binaries.sh and export the KUBECTL_BIN it prints", p)
	}
	return p
}

// A real kubectl runs kcedar as the plugin `kubectl cedar` against a real
// API server: the answers come from the cluster's policy objects and live
// schema, read through it, and equal kcedar's.
func TestKubectlPlugin(t *testing.T) {
	kubectl := kubectlBinary(t)
	c := framework.Start(t, framework.Options{})
	installPolicyCRDs(t, c)
	dyn, err := dynamic.NewForConfig(c.AdminConfig)
	if err != nil {
		t.Fatal(err)
	}
	createPolicy(t, dyn.Resource(policyobjects.GroupVersion.WithResource(policyobjects.ResourceCluster)), "CedarPolicy", "", "pods", pluginPolicies)

	// kubectl finds plugins on PATH: only the plugin is there.
	pathDir := t.TempDir()
	kcedar := framework.KcedarBinary(t)
	data, err := os.ReadFile(kcedar)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pathDir, "kubectl-cedar"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "PATH="+pathDir, "KUBECONFIG="+c.Kubeconfig, "HOME="+t.TempDir())
	run := func(bin string, args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s %q: %v\n%s\n%s", filepath.Base(bin), args, err, out, stderr.String())
		}
		return string(out)
	}
	if out := run(kubectl, "plugin", "list"); !strings.Contains(out, "kubectl-cedar") {
		t.Fatalf("kubectl plugin list does not find kubectl-cedar:\n%s", out)
	}

	plugin := run(kubectl, "cedar", "who-can", "get", "pods", "-n", "dev")
	direct := run(kcedar, "who-can", "get", "pods", "-n", "dev", "--cluster", "--kubeconfig", c.Kubeconfig)
	if plugin != direct || !strings.Contains(plugin, "dev-reads-pods") {
		t.Errorf("kubectl cedar who-can:\n%s\nkcedar who-can --cluster:\n%s", plugin, direct)
	}
	t.Logf("kubectl cedar who-can get pods -n dev:\n%s", plugin)

	list := run(kubectl, "cedar", "can-i", "--list", "--as", "alice", "-n", "dev")
	if !strings.Contains(list, "dev-creates-web-pods") || !strings.Contains(list, `resource.object.metadata.name like "web-*"`) {
		t.Errorf("kubectl cedar can-i --list shows no condition:\n%s", list)
	}
	t.Logf("kubectl cedar can-i --list --as alice -n dev:\n%s", list)

	why := run(kubectl, "cedar", "why", "get", "pods", "--as", "alice", "-n", "dev")
	if !strings.Contains(why, "decision: Allow") || !strings.Contains(why, "permit dev-reads-pods") || !strings.Contains(why, "prod-reads-pods") {
		t.Errorf("kubectl cedar why:\n%s", why)
	}
	t.Logf("kubectl cedar why get pods --as alice -n dev:\n%s", why)

	var ex struct {
		Decision string `json:"decision"`
		Deciding []struct {
			ID string `json:"id"`
		} `json:"deciding"`
	}
	out := run(kubectl, "cedar", "why", "get", "pods", "--as", "alice", "-n", "dev", "-o", "json")
	if err := json.Unmarshal([]byte(out), &ex); err != nil || ex.Decision != "Allow" || len(ex.Deciding) != 1 || ex.Deciding[0].ID != "dev-reads-pods" {
		t.Errorf("kubectl cedar why -o json: %v %+v\n%s", err, ex, out)
	}
	var rar map[string]any
	if out := run(kubectl, "cedar", "who-can", "get", "pods", "-n", "dev", "-o", "json"); json.Unmarshal([]byte(out), &rar) != nil {
		t.Errorf("kubectl cedar who-can -o json does not parse:\n%s", out)
	}
	pluginCanI(t, kubectl, env)
}

// pluginCanI: kubectl cedar can-i answers one request for the cluster's
// chain: yes if the conditions hold where kubectl auth can-i says no, and,
// without --as, for the caller (the admin, whom the cluster's RBAC
// allows after kcedar's NoOpinion).
func pluginCanI(t *testing.T, kubectl string, env []string) {
	t.Helper()
	canI := func(args ...string) (string, int) {
		cmd := exec.Command(kubectl, append([]string{"cedar", "can-i"}, args...)...)
		cmd.Env = env
		out, err := cmd.Output()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return string(out), ee.ExitCode()
		}
		if err != nil {
			t.Fatalf("kubectl cedar can-i %q: %v", args, err)
		}
		return string(out), 0
	}
	out, code := canI("create", "pods", "-n", "dev", "--as", "alice", "--mode", "conditions-review")
	if code != 4 || !strings.Contains(out, "yes, if:") || !strings.Contains(out, `resource.object.metadata.name like "web-*"`) {
		t.Errorf("kubectl cedar can-i create pods --as alice: exit %d\n%s", code, out)
	}
	t.Logf("kubectl cedar can-i create pods -n dev --as alice --mode conditions-review:\n%s", out)
	cmd := exec.Command(kubectl, "auth", "can-i", "create", "pods", "-n", "dev", "--as", "alice")
	cmd.Env = env
	if plain, _ := cmd.Output(); strings.TrimSpace(string(plain)) != "no" {
		t.Errorf("kubectl auth can-i create pods --as alice: %q, want no (it does not ask for conditions)", plain)
	}
	out, code = canI("delete", "nodes", "n1")
	if code != 0 || !strings.HasPrefix(out, "yes\n") || !strings.Contains(out, "chain: kcedar, then RBAC (the cluster's RBAC") {
		t.Errorf("kubectl cedar can-i delete nodes (the admin): exit %d\n%s", code, out)
	}
}
