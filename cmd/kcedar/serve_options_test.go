package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/kcedar/kcedar/cedar"
	gen "github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/testing/schematest"
	publicschema "github.com/kcedar/kcedar/schemagen"
)

// fakeAPIServer records the paths it is asked for and answers 503; each
// request also ticks asks (dropped when a tick is already waiting).
type fakeAPIServer struct {
	*httptest.Server
	mu    sync.Mutex
	paths []string
	asks  chan struct{}
}

func newFakeAPIServer(t *testing.T) *fakeAPIServer {
	f := &fakeAPIServer{asks: make(chan struct{}, 1)}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.paths = append(f.paths, r.URL.Path)
		f.mu.Unlock()
		select {
		case f.asks <- struct{}{}:
		default:
		}
		http.Error(w, "not here", http.StatusServiceUnavailable)
	}))
	t.Cleanup(f.Close)
	return f
}

// waitAsked waits until the server was asked for a path under prefix,
// checking after every request it answers.
func (f *fakeAPIServer) waitAsked(t *testing.T, prefix string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for !f.asked(prefix) {
		select {
		case <-f.asks:
		case <-deadline:
			f.mu.Lock()
			defer f.mu.Unlock()
			t.Fatalf("K's server was not asked for %s: %q", prefix, f.paths)
		}
	}
}

func (f *fakeAPIServer) asked(prefix string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.paths {
		if strings.HasPrefix(p, prefix) {
			return true
		}
	}
	return false
}

// writeKubeconfig writes a kubeconfig for server and returns its path.
func writeKubeconfig(t *testing.T, server string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kubeconfig")
	kc := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "` + server + `"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: ctx, context: {cluster: c, user: u}}]
current-context: ctx
`
	if err := os.WriteFile(p, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// parseServe parses args into completed, validated serve options.
func parseServe(t *testing.T, args ...string) *serveOptions {
	t.Helper()
	o := &serveOptions{}
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	if err := o.Complete(); err != nil {
		t.Fatal(err)
	}
	if err := o.Validate(); err != nil {
		t.Fatalf("%q: %v", args, err)
	}
	return o
}

// kcedar serve --policy-objects --kubeconfig K works outside a cluster: the
// flags pass, and the policy objects, their status Lease and the namespace
// informer all connect to K's server, as the live schema does.
func TestServePolicyObjectsFollowKubeconfig(t *testing.T) {
	t.Setenv("KUBECONFIG", "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "") // not in a cluster
	api := newFakeAPIServer(t)
	o := parseServe(t, "--policy-objects", "--kubeconfig", writeKubeconfig(t, api.URL))
	if !o.nsObjects || !o.src.IsLive() {
		t.Fatalf("--kubeconfig: namespace objects %v, live schema %v; want both on", o.nsObjects, o.src.IsLive())
	}
	cfg, err := o.clusterConfig("--policy-objects")
	if err != nil || cfg.Host != api.URL {
		t.Fatalf("cluster config %v, %v; want host %s", cfg, err, api.URL)
	}
	po, err := newPolicyObjects(&o.objects, o.clusterConfig, o.logger)
	if err != nil {
		t.Fatalf("--policy-objects --kubeconfig: %v", err)
	}
	if po.source() == nil || po.source().StatusLease == nil {
		t.Fatal("no policy objects or status Lease")
	}
	source, err := cedar.NewFileSource(gen.ToPublic(schematest.Schema()).(*publicschema.Schema), nil, cedar.FileSourceOptions{Logger: o.logger, PolicyObjects: po.source()})
	if err != nil {
		t.Fatal(err)
	}
	ns, err := o.namespaceInformer()
	if err != nil || ns == nil {
		t.Fatalf("namespace informer %v, %v", ns, err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() { _ = source.Run(ctx) }()
	go ns.Run(ctx)
	for _, path := range []string{"/apis/kcedar.dev/", "/apis/coordination.k8s.io/", "/api/v1/namespaces"} {
		api.waitAsked(t, path)
	}
	cancel()

	// The whole command gets past its flags and asks K's server for the
	// live schema (which this server refuses).
	out, code := run(t, newServeCmd(), "--policy-objects", "--kubeconfig", writeKubeconfig(t, api.URL), "--listen", "127.0.0.1:0")
	if code == 2 && !strings.Contains(out, "schema from live cluster") || strings.Contains(out, "policy-objects-kubeconfig") {
		t.Fatalf("exit %d: %s", code, out)
	}
	if !api.asked("/api") {
		t.Fatal("K's server was not asked for discovery")
	}
}

// Without a kubeconfig or a cluster, --policy-objects says how to connect.
func TestServePolicyObjectsOutsideACluster(t *testing.T) {
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "missing"))
	t.Setenv("HOME", t.TempDir())
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	o := parseServe(t, "--policy-objects")
	_, err := newPolicyObjects(&o.objects, o.clusterConfig, o.logger)
	if err == nil || !strings.Contains(err.Error(), "--policy-objects") || !strings.Contains(err.Error(), "give --kubeconfig") {
		t.Fatalf("err %v", err)
	}
}

// The admission webhook's verification: none without
// --admission-enforcement, always with --unverified-admission-webhook,
// else a verifier that starts unverified.
func TestServeAdmissionVerification(t *testing.T) {
	if f, v := parseServe(t, "--policies", "x").admission.verification(nil); f != nil || v != nil {
		t.Error("a verification without --admission-enforcement")
	}
	if f, v := parseServe(t, "--policies", "x", "--admission-enforcement", "--unverified-admission-webhook").admission.verification(nil); f == nil || !f("alice", nil) || v != nil {
		t.Error("--unverified-admission-webhook: want always verified, no verifier")
	}
	if f, v := parseServe(t, "--policies", "x", "--admission-enforcement").admission.verification(nil); f == nil || f("alice", nil) || v == nil {
		t.Error("--admission-enforcement: want a verifier, unverified until it sees the webhook")
	}
}

// The APIServices are followed with --admission-enforcement, verified or
// not (an aggregated API's requests bypass the webhook either way), and
// every group version counts as aggregated until they are listed.
func TestServeAdmissionFollowsAPIServices(t *testing.T) {
	if a := parseServe(t, "--policies", "x").admission.apiServices(nil); a != nil {
		t.Error("APIServices followed without --admission-enforcement")
	}
	for _, args := range [][]string{{"--admission-enforcement"}, {"--admission-enforcement", "--unverified-admission-webhook"}} {
		a := parseServe(t, append([]string{"--policies", "x"}, args...)...).admission.apiServices(nil)
		if a == nil || !a.MayBeAggregated("", "v1") || !a.MayBeAggregated("apps", "v1") {
			t.Errorf("%v: want APIServices followed, every group version aggregated until listed", args)
		}
	}
}
