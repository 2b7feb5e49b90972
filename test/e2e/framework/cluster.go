package framework

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Default versions of the binaries, and the layout of their cache; keep in
// sync with hack/kube-binaries.sh.
const (
	DefaultKubeVersion = "v1.37.1"
	DefaultEtcdVersion = "v3.7.3"
)

// DirPlaceholder is replaced with the cluster's run directory in
// Options.AuthorizationConfig, Options.Files contents and Options.ExtraFlags.
const DirPlaceholder = "{{.Dir}}"

// Options configures a cluster.
type Options struct {
	// AuthorizationConfig is the content (YAML) of an
	// apiserver.config.k8s.io/v1 AuthorizationConfiguration, passed with
	// --authorization-config. Empty means --authorization-mode=RBAC.
	AuthorizationConfig string
	// Tokens are static token users in addition to the admin.
	Tokens []Token
	// ExtraFlags are appended to the kube-apiserver command line (after the
	// harness's own flags, so they win for single-valued flags).
	ExtraFlags []string
	// Files are written into the run directory before the apiserver starts:
	// relative file name (may contain directories) -> content. Reference
	// them as {{.Dir}}/name, e.g. a webhook kubeconfig and its CA. Names the
	// harness uses itself (etcd/, pki/, *.log, tokens.csv, kubeconfig,
	// authorization-config.yaml) are rejected.
	Files map[string]string
}

// Token is a static token user (--token-auth-file). Token and User are
// required; UID defaults to User. The apiserver adds system:authenticated to
// Groups.
type Token struct {
	Token, User, UID string
	Groups           []string
}

// Cluster is a running etcd + kube-apiserver.
type Cluster struct {
	Dir        string // run directory: logs, etcd data, pki, tokens, kubeconfig, Files
	Server     string // https://127.0.0.1:PORT
	CAFile     string // CA bundle that verifies Server
	Kubeconfig string // admin kubeconfig file
	AdminToken string // token of user "admin" in group system:masters
	EtcdURL    string // http://127.0.0.1:PORT

	// AdminConfig is a client config for the admin user. It has no
	// client-side rate limit. Don't modify it; copy it (rest.CopyConfig).
	AdminConfig *rest.Config

	etcd, apiserver *Process
	startup         time.Duration // from start to ready
	stopOnce        sync.Once
}

// Binaries returns the etcd and kube-apiserver binaries the harness runs:
// $ETCD_BIN / $KUBE_APISERVER_BIN, else the hack/kube-binaries.sh cache. It
// fails if one is missing; it never builds them.
func Binaries() (etcd, apiserver string, err error) {
	cache := os.Getenv("KUBE_E2E_CACHE")
	if cache == "" {
		d, err := os.UserCacheDir() // $XDG_CACHE_HOME or $HOME/.cache
		if err != nil {
			return "", "", fmt.Errorf("locating the kube-e2e cache: %w (set KUBE_E2E_CACHE)", err)
		}
		cache = filepath.Join(d, "kube-e2e")
	}
	find := func(env, name, versionEnv, version string) (string, error) {
		p := os.Getenv(env)
		if p == "" {
			if v := os.Getenv(versionEnv); v != "" {
				version = v
			}
			p = filepath.Join(cache, name, version, name)
		}
		if fi, err := os.Stat(p); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return "", fmt.Errorf("no %s binary at %s: run `make e2e`, or build and cache it with hack/kube-binaries.sh "+
				"and export the ETCD_BIN / KUBE_APISERVER_BIN it prints", name, p)
		}
		return p, nil
	}
	if etcd, err = find("ETCD_BIN", "etcd", "ETCD_VERSION", DefaultEtcdVersion); err != nil {
		return "", "", err
	}
	if apiserver, err = find("KUBE_APISERVER_BIN", "kube-apiserver", "KUBE_VERSION", DefaultKubeVersion); err != nil {
		return "", "", err
	}
	return etcd, apiserver, nil
}

// Start starts a cluster for the test and stops it in the test's Cleanup
// (apiserver first, then etcd), which also removes the run directory unless
// the test failed; then the directory is kept and its path printed. It fails
// the test if the binaries are missing (see Binaries) or the apiserver is not
// ready within 90 s (KUBE_E2E_TIMEOUT).
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	c, err := startCluster(opts)
	if err != nil {
		t.Fatalf("starting cluster: %v", err)
	}
	t.Logf("cluster ready in %v at %s (run dir %s)", c.startup.Round(time.Millisecond), c.Server, c.Dir)
	t.Cleanup(func() {
		c.Stop()
		if t.Failed() {
			t.Logf("cluster run dir kept: %s; last lines of apiserver.log:\n%s", c.Dir, tail(c.apiserver.Logs(), 30))
			return
		}
		os.RemoveAll(c.Dir)
	})
	return c
}

// StartCluster is Start for programs other than tests (see
// test/e2e/framework/cmd/with-cluster). The returned function stops the
// processes (apiserver first, then etcd) and removes the run directory; call
// it exactly once. On error nothing is left running, and the run directory is
// kept if the processes had started (the error names it).
func StartCluster(opts Options) (c *Cluster, stop func(), err error) {
	c, err = startCluster(opts)
	if err != nil {
		return nil, nil, err
	}
	return c, func() { c.Stop(); os.RemoveAll(c.Dir) }, nil
}

// readyTimeout is how long to wait for /readyz.
func readyTimeout() time.Duration {
	if s, err := strconv.Atoi(os.Getenv("KUBE_E2E_TIMEOUT")); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	return 90 * time.Second
}

func startCluster(opts Options) (*Cluster, error) {
	etcdBin, apiserverBin, err := Binaries()
	if err != nil {
		return nil, err
	}
	// A free port can be taken by someone else before etcd or the apiserver
	// binds it; then start over on new ports.
	for attempt := 1; ; attempt++ {
		c, err := startOnce(opts, etcdBin, apiserverBin)
		if err == nil || !errors.Is(err, errPortTaken) || attempt == 3 || c == nil {
			return c, err
		}
		os.RemoveAll(c.Dir)
	}
}

var errPortTaken = errors.New("port taken")

// reservedNames are the run directory entries the harness writes itself.
var reservedNames = map[string]bool{
	"etcd": true, "etcd.log": true, "apiserver.log": true, "pki": true,
	"tokens.csv": true, "authorization-config.yaml": true, "kubeconfig": true,
}

// startOnce starts one cluster. On error, the processes are stopped and the
// returned *Cluster (if not nil) names the run directory, which is kept.
func startOnce(opts Options, etcdBin, apiserverBin string) (rc *Cluster, err error) {
	began := time.Now()
	dir, err := os.MkdirTemp("", "kube-e2e-run.")
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir}
	defer func() {
		if err != nil {
			c.Stop()
			if c.etcd == nil {
				os.RemoveAll(dir)
				rc = nil
			} else {
				err = fmt.Errorf("%w\n(run dir kept: %s)", err, dir)
			}
		}
	}()
	expand := func(s string) string { return strings.ReplaceAll(s, DirPlaceholder, dir) }

	// Files, token file, service-account key, authorization config.
	for name, content := range opts.Files {
		if !filepath.IsLocal(name) {
			return c, fmt.Errorf("Options.Files: %q is not a relative path inside the run dir", name)
		}
		if first, _, _ := strings.Cut(filepath.ToSlash(filepath.Clean(name)), "/"); reservedNames[first] {
			return c, fmt.Errorf("Options.Files: %q clashes with the harness's own files (%s)", name, strings.Join(slices.Sorted(maps.Keys(reservedNames)), ", "))
		}
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return c, err
		}
		if err := os.WriteFile(p, []byte(expand(content)), 0o600); err != nil {
			return c, err
		}
	}
	pki := filepath.Join(dir, "pki")
	if err := os.MkdirAll(pki, 0o700); err != nil {
		return c, err
	}
	saKey, err := serviceAccountKeyPEM()
	if err != nil {
		return c, err
	}
	if err := os.WriteFile(filepath.Join(pki, "sa.key"), saKey, 0o600); err != nil {
		return c, err
	}
	c.AdminToken = randomHex(16)
	tokens := append([]Token{{Token: c.AdminToken, User: "admin", UID: "admin-uid", Groups: []string{"system:masters"}}}, opts.Tokens...)
	if err := writeTokenFile(filepath.Join(dir, "tokens.csv"), tokens); err != nil {
		return c, err
	}
	authz := []string{"--authorization-mode=RBAC"}
	if opts.AuthorizationConfig != "" {
		p := filepath.Join(dir, "authorization-config.yaml")
		if err := os.WriteFile(p, []byte(expand(opts.AuthorizationConfig)), 0o600); err != nil {
			return c, err
		}
		authz = []string{"--authorization-config=" + p}
	}

	// etcd.
	var etcdPort, peerPort, apiPort int
	for _, p := range []*int{&etcdPort, &peerPort, &apiPort} {
		if *p, err = freePort(); err != nil {
			return c, err
		}
	}
	c.EtcdURL = fmt.Sprintf("http://127.0.0.1:%d", etcdPort)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	c.etcd, err = startProcess(filepath.Join(dir, "etcd.log"), etcdBin,
		"--name=e2e", "--data-dir="+filepath.Join(dir, "etcd"), "--log-level=warn", "--unsafe-no-fsync",
		"--listen-client-urls="+c.EtcdURL, "--advertise-client-urls="+c.EtcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=e2e="+peerURL)
	if err != nil {
		return c, err
	}

	// kube-apiserver.
	c.Server = fmt.Sprintf("https://127.0.0.1:%d", apiPort)
	args := []string{
		"--etcd-servers=" + c.EtcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port=" + strconv.Itoa(apiPort),
		"--cert-dir=" + pki, "--token-auth-file=" + filepath.Join(dir, "tokens.csv"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + filepath.Join(pki, "sa.key"),
		"--service-account-signing-key-file=" + filepath.Join(pki, "sa.key"),
		"--service-cluster-ip-range=10.0.0.0/24", "--endpoint-reconciler-type=none",
	}
	args = append(args, authz...)
	for _, f := range opts.ExtraFlags {
		args = append(args, expand(f))
	}
	c.apiserver, err = startProcess(filepath.Join(dir, "apiserver.log"), apiserverBin, args...)
	if err != nil {
		return c, err
	}

	// --cert-dir self-signs: apiserver.crt is the serving cert followed by
	// the CA that signed it, so it serves as the CA bundle.
	c.CAFile = filepath.Join(pki, "apiserver.crt")
	if err := c.waitReady(readyTimeout()); err != nil {
		return c, fmt.Errorf("%w\n--- etcd.log (tail) ---\n%s\n--- apiserver.log (tail) ---\n%s",
			err, tail(c.etcd.Logs(), 20), tail(c.apiserver.Logs(), 40))
	}
	c.AdminConfig = &rest.Config{
		Host:            c.Server,
		BearerToken:     c.AdminToken,
		TLSClientConfig: rest.TLSClientConfig{CAFile: c.CAFile},
		QPS:             -1, // no client-side rate limiting
		Timeout:         time.Minute,
	}
	if err := c.checkAdminConfig(); err != nil {
		return c, err
	}
	c.Kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(c.Kubeconfig, c.kubeconfig(), 0o600); err != nil {
		return c, err
	}
	c.startup = time.Since(began)
	debugf("cluster ready in %v at %s (run dir %s)", c.startup.Round(time.Millisecond), c.Server, dir)
	return c, nil
}

// waitReady polls /readyz until it says ok, a process exits, or timeout.
func (c *Cluster) waitReady(timeout time.Duration) error {
	client := &http.Client{
		Timeout:   2 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, // the CA is not written yet
	}
	defer client.CloseIdleConnections()
	deadline := time.Now().Add(timeout)
	var last string
	for {
		req, _ := http.NewRequest("GET", c.Server+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+c.AdminToken)
		resp, err := client.Do(req)
		if err == nil {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && string(b) == "ok" {
				return nil
			}
			last = fmt.Sprintf("%s: %s", resp.Status, tail(string(b), 10))
		} else {
			last = err.Error()
		}
		for _, p := range []*Process{c.etcd, c.apiserver} {
			if p.Exited() {
				err := fmt.Errorf("%s exited (%v) before the apiserver was ready", p, p.waitErr)
				if strings.Contains(p.Logs(), "address already in use") {
					err = fmt.Errorf("%w: %w", errPortTaken, err)
				}
				return err
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kube-apiserver not ready after %v; last /readyz: %s", timeout, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// checkAdminConfig verifies that AdminConfig (CA bundle, token) works.
func (c *Cluster) checkAdminConfig() error {
	hc, err := rest.HTTPClientFor(c.AdminConfig)
	if err != nil {
		return err
	}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get(c.Server + "/readyz")
	if err != nil {
		return fmt.Errorf("apiserver ready, but the admin client config does not work: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("apiserver ready, but /readyz as admin with %s: %s", c.CAFile, resp.Status)
	}
	return nil
}

func (c *Cluster) kubeconfig() []byte {
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	return fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: admin
  user:
    token: %s
contexts:
- name: e2e
  context:
    cluster: e2e
    user: admin
current-context: e2e
`, q(c.Server), q(c.CAFile), q(c.AdminToken))
}

// Stop stops the apiserver, then etcd (each with SIGTERM, then SIGKILL after
// 5 s), and keeps the run directory. It is idempotent; Start's Cleanup and
// StartCluster's stop function call it.
func (c *Cluster) Stop() {
	c.stopOnce.Do(func() {
		for _, p := range []*Process{c.apiserver, c.etcd} {
			if p != nil {
				t0 := time.Now()
				p.Stop()
				debugf("stopped %s in %v", p, time.Since(t0).Round(time.Millisecond))
			}
		}
	})
}

// APIServerPid returns the kube-apiserver's process id, e.g. to read its CPU
// time from /proc (benchmarks).
func (c *Cluster) APIServerPid() int { return c.apiserver.Pid() }

// EtcdPid returns etcd's process id.
func (c *Cluster) EtcdPid() int { return c.etcd.Pid() }

// UserConfig returns a client config that authenticates with token (one of
// Options.Tokens, or any other string, which the apiserver rejects with 401);
// an empty token makes an anonymous client.
func (c *Cluster) UserConfig(token string) *rest.Config {
	cfg := rest.CopyConfig(c.AdminConfig)
	cfg.BearerToken = token
	return cfg
}

// Client returns a clientset for the admin (system:masters).
func (c *Cluster) Client(t testing.TB) kubernetes.Interface {
	t.Helper()
	return c.ClientFor(t, c.AdminToken)
}

// ClientFor returns a clientset that authenticates with token (see UserConfig).
func (c *Cluster) ClientFor(t testing.TB, token string) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(c.UserConfig(token))
	if err != nil {
		t.Fatalf("creating clientset: %v", err)
	}
	return cs
}

// Logs returns the last 100 lines of the apiserver's log.
func (c *Cluster) Logs() string {
	if c.apiserver == nil {
		return ""
	}
	return tail(c.apiserver.Logs(), 100)
}

// EnsureNamespace creates namespace ns (if it does not exist) and its
// "default" ServiceAccount, which Pod admission needs since no controller
// creates it.
func (c *Cluster) EnsureNamespace(t testing.TB, ns string) {
	t.Helper()
	c.EnsureServiceAccount(t, ns, "default")
}

// EnsureServiceAccount creates ServiceAccount ns/name, and namespace ns, if
// they do not exist.
func (c *Cluster) EnsureServiceAccount(t testing.TB, ns, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // usable from Cleanup too
	defer cancel()
	cs := c.Client(t)
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating namespace %s: %v", ns, err)
	}
	_, err = cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating serviceaccount %s/%s: %v", ns, name, err)
	}
}

func writeTokenFile(path string, tokens []Token) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	for _, tk := range tokens {
		if tk.Token == "" || tk.User == "" {
			f.Close()
			return fmt.Errorf("token %+v: Token and User must be set", tk)
		}
		uid := tk.UID
		if uid == "" {
			uid = tk.User
		}
		rec := []string{tk.Token, tk.User, uid}
		if len(tk.Groups) > 0 {
			rec = append(rec, strings.Join(tk.Groups, ","))
		}
		w.Write(rec)
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

var (
	saKeyOnce sync.Once
	saKey     []byte
	saKeyErr  error
)

// serviceAccountKeyPEM returns an RSA private key, generated once per process.
func serviceAccountKeyPEM() ([]byte, error) {
	saKeyOnce.Do(func() {
		var k *rsa.PrivateKey
		if k, saKeyErr = rsa.GenerateKey(rand.Reader, 2048); saKeyErr == nil {
			saKey = pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})
		}
	})
	return saKey, saKeyErr
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// debugf logs to stderr when KUBE_E2E_DEBUG is set; in tests prefer t.Logf.
func debugf(format string, args ...any) {
	if os.Getenv("KUBE_E2E_DEBUG") != "" {
		fmt.Fprintf(os.Stderr, "kube-e2e: "+format+"\n", args...)
	}
}
