//go:build e2e

package e2e

import (
	"bufio"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kcedar/kcedar/test/e2e/framework"
)

// TestFrameworkRBAC: the admin can do anything, a token user without RBAC
// bindings is forbidden, an unknown token is unauthorized, and
// EnsureNamespace makes Pods admissible (ServiceAccount admission is on).
func TestFrameworkRBAC(t *testing.T) {
	c := framework.Start(t, framework.Options{
		Tokens: []framework.Token{{Token: "alice-token", User: "alice", UID: "alice-uid", Groups: []string{"devs", "qa"}}},
	})
	ctx := t.Context()
	admin := c.Client(t)

	c.EnsureNamespace(t, "e2e-rbac")
	c.EnsureNamespace(t, "e2e-rbac") // idempotent
	if _, err := admin.CoreV1().ServiceAccounts("e2e-rbac").Get(ctx, "default", metav1.GetOptions{}); err != nil {
		t.Fatalf("default ServiceAccount: %v", err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.invalid/none"}}},
	}
	if _, err := admin.CoreV1().Pods("e2e-rbac").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("admin creating a pod: %v", err)
	}

	_, err := c.ClientFor(t, "alice-token").CoreV1().Pods("e2e-rbac").List(ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("alice listing pods: got %v, want 403 Forbidden", err)
	}
	if !strings.Contains(err.Error(), `"alice"`) {
		t.Errorf("403 does not name alice: %v", err)
	}
	_, err = c.ClientFor(t, "no-such-token").CoreV1().Pods("e2e-rbac").List(ctx, metav1.ListOptions{})
	if !apierrors.IsUnauthorized(err) {
		t.Fatalf("unknown token: got %v, want 401 Unauthorized", err)
	}

	for _, f := range []string{c.Kubeconfig, c.CAFile} {
		if _, err := os.Stat(f); err != nil {
			t.Error(err)
		}
	}
	if !strings.Contains(c.Logs(), "Serving securely on 127.0.0.1") {
		t.Errorf("apiserver log tail does not look like an apiserver log:\n%s", c.Logs())
	}
}

// TestFrameworkWebhookAuthorizer runs the apiserver with an
// AuthorizationConfiguration whose webhook (a test server allowing only
// alice) is configured through Options.Files and {{.Dir}}, with RBAC behind it.
func TestFrameworkWebhookAuthorizer(t *testing.T) {
	var mu sync.Mutex
	var seen []authorizationv1.SubjectAccessReview
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var sar authorizationv1.SubjectAccessReview
		if err := json.NewDecoder(r.Body).Decode(&sar); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		seen = append(seen, sar)
		mu.Unlock()
		sar.Status = authorizationv1.SubjectAccessReviewStatus{Allowed: sar.Spec.User == "alice", Reason: "test webhook"}
		json.NewEncoder(w).Encode(sar)
	}))
	t.Cleanup(srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})

	c := framework.Start(t, framework.Options{
		Tokens: []framework.Token{
			{Token: "alice-token", User: "alice", Groups: []string{"devs"}},
			{Token: "bob-token", User: "bob"},
		},
		Files: map[string]string{
			"webhook/ca.crt": string(ca),
			"webhook/kubeconfig": fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: authz, cluster: {server: %q, certificate-authority: "{{.Dir}}/webhook/ca.crt"}}]
users: [{name: apiserver, user: {}}]
contexts: [{name: authz, context: {cluster: authz, user: apiserver}}]
current-context: authz
`, srv.URL),
		},
		AuthorizationConfig: `apiVersion: apiserver.config.k8s.io/v1
kind: AuthorizationConfiguration
authorizers:
- type: Webhook
  name: test-webhook
  webhook:
    timeout: 5s
    authorizedTTL: 1s
    unauthorizedTTL: 1s
    subjectAccessReviewVersion: v1
    matchConditionSubjectAccessReviewVersion: v1
    failurePolicy: Deny
    connectionInfo:
      type: KubeConfigFile
      kubeConfigFile: "{{.Dir}}/webhook/kubeconfig"
- type: RBAC
  name: rbac
`,
	})
	ctx := t.Context()
	if _, err := c.ClientFor(t, "alice-token").CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("alice (allowed by the webhook) listing namespaces: %v", err)
	}
	if _, err := c.ClientFor(t, "bob-token").CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("bob (denied by the webhook) listing namespaces: got %v, want 403", err)
	}
	mu.Lock()
	defer mu.Unlock()
	var alice bool
	for _, s := range seen {
		a := s.Spec.ResourceAttributes
		alice = alice || s.Spec.User == "alice" && a != nil && a.Verb == "list" && a.Resource == "namespaces" &&
			strings.Contains(strings.Join(s.Spec.Groups, ","), "devs")
	}
	if !alice {
		t.Errorf("webhook never saw alice's list namespaces; saw %d reviews", len(seen))
	}
}

// TestFrameworkCleanup: after a test's Cleanup nothing of its cluster or
// processes is left running, and the run dir is gone.
func TestFrameworkCleanup(t *testing.T) {
	var dir string
	var sleepPid int
	t.Run("cluster", func(t *testing.T) {
		c := framework.Start(t, framework.Options{})
		dir = c.Dir
		p := framework.StartProcess(t, "sleep", "1000")
		sleepPid = p.Pid()
		if pids := frameworkTestProcessesMentioning(dir); len(pids) != 2 {
			t.Fatalf("want etcd and kube-apiserver running with %s in their command line, got pids %v", dir, pids)
		}
		if p.Exited() {
			t.Fatalf("sleep exited: %v\n%s", p.ExitErr(), p.Logs())
		}
	})
	if pids := frameworkTestProcessesMentioning(dir); len(pids) != 0 {
		t.Errorf("processes left behind: %v", pids)
	}
	if frameworkTestAlive(sleepPid) {
		t.Errorf("sleep %d left behind", sleepPid)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("run dir %s not removed: %v", dir, err)
	}
}

// TestFrameworkProcessDiesWithTestBinary: processes die with the test binary, both
// when a test panics (Cleanup) and when the binary is SIGKILLed (Pdeathsig).
func TestFrameworkProcessDiesWithTestBinary(t *testing.T) {
	for _, how := range []string{"panic", "sigkill"} {
		t.Run(how, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestFrameworkHelperChild$", "-test.v")
			cmd.Env = append(os.Environ(), "FRAMEWORK_HELPER_CHILD="+how)
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stderr = cmd.Stdout
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var pid int
			var lines []string
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				lines = append(lines, sc.Text())
				if v, ok := strings.CutPrefix(sc.Text(), "CHILD_PID="); ok {
					pid, _ = strconv.Atoi(v)
				}
				if v, ok := strings.CutPrefix(sc.Text(), "CHILD_LOG="); ok && filepath.IsAbs(v) {
					t.Cleanup(func() { os.RemoveAll(filepath.Dir(v)) }) // kept: the child died or failed
				}
			}
			err = cmd.Wait()
			if pid == 0 {
				t.Fatalf("helper did not report a pid (%v):\n%s", err, strings.Join(lines, "\n"))
			}
			if err == nil {
				t.Errorf("helper test binary succeeded; want it to die")
			}
			deadline := time.Now().Add(10 * time.Second)
			for frameworkTestAlive(pid) && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
			if frameworkTestAlive(pid) {
				syscall.Kill(pid, syscall.SIGKILL)
				t.Fatalf("child %d survived its test binary (%s)", pid, how)
			}
		})
	}
}

// TestFrameworkHelperChild is run by TestFrameworkProcessDiesWithTestBinary in a child test
// binary; it does nothing otherwise.
func TestFrameworkHelperChild(t *testing.T) {
	how := os.Getenv("FRAMEWORK_HELPER_CHILD")
	if how == "" {
		t.Skip("helper for TestFrameworkProcessDiesWithTestBinary")
	}
	p := framework.StartProcess(t, "sleep", "1000")
	fmt.Printf("CHILD_LOG=%s\nCHILD_PID=%d\n", p.LogFile, p.Pid())
	os.Stdout.Sync()
	switch how {
	case "panic":
		panic("test panics")
	case "sigkill":
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		time.Sleep(time.Minute)
	}
}

// TestKcedarBinary builds cmd/kcedar and runs it.
func TestFrameworkKcedarBinary(t *testing.T) {
	bin := framework.KcedarBinary(t)
	if bin2 := framework.KcedarBinary(t); bin2 != bin {
		t.Errorf("second KcedarBinary = %s, want %s (built once)", bin2, bin)
	}
	p := framework.StartProcess(t, bin, "--help")
	select {
	case <-p.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("kcedar --help did not exit")
	}
	if err := p.ExitErr(); err != nil || strings.TrimSpace(p.Logs()) == "" {
		t.Fatalf("kcedar --help: %v\n%s", err, p.Logs())
	}
}

// frameworkTestProcessesMentioning returns the live processes whose command line contains s.
func frameworkTestProcessesMentioning(s string) []int {
	var pids []int
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range procs {
		b, err := os.ReadFile(f)
		if err != nil || !strings.Contains(string(b), s) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
		if pid != os.Getpid() && frameworkTestAlive(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// alive reports whether pid exists and is not a zombie.
func frameworkTestAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || len(s) < i+3 || s[i+2] != 'Z'
}

// TestFrameworkStartErrors: a failed start says why (with the apiserver's
// log), leaves nothing running, and keeps the run dir for inspection.
func TestFrameworkStartErrors(t *testing.T) {
	_, _, err := framework.StartCluster(framework.Options{ExtraFlags: []string{"--no-such-flag"}})
	if err == nil {
		t.Fatal("StartCluster with a bad apiserver flag succeeded")
	}
	if !strings.Contains(err.Error(), "unknown flag: --no-such-flag") {
		t.Errorf("error does not carry the apiserver log:\n%v", err)
	}
	_, dir, ok := strings.Cut(err.Error(), "run dir kept: ")
	dir = strings.TrimSuffix(strings.TrimSpace(dir), ")")
	if !ok || !strings.HasPrefix(dir, os.TempDir()) {
		t.Fatalf("error does not name the kept run dir:\n%v", err)
	}
	if pids := frameworkTestProcessesMentioning(dir); len(pids) != 0 {
		t.Errorf("processes left behind: %v", pids)
	}
	os.RemoveAll(dir)

	_, _, err = framework.StartCluster(framework.Options{Files: map[string]string{"tokens.csv": "x"}})
	if err == nil || !strings.Contains(err.Error(), "clashes") {
		t.Errorf("Files overwriting tokens.csv: got %v", err)
	}
}
