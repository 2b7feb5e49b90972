//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/kcedar/kcedar/internal/cluster/policyobjects"
	"github.com/kcedar/kcedar/test/docs"
	"github.com/kcedar/kcedar/test/e2e/framework"
)

// TestDeploy runs docs/deploy.md: its blocks marked <!-- e2e: NAME --> (the
// line above the fence, see test/docs) with bash
// -euo pipefail (and openssl), kcedar being the binary under test and
// kubectl the server-side-apply subset of test/e2e/framework/cmd/kubectl
// (`apply --server-side -k DIR | -f FILE|-`; it refuses anything else), and
// its <!-- e2e file: PATH --> blocks written as they are, in a work directory
// laid out like the checkout the guide stands in (deploy/, and
// policies/quickstart). The only changes made to the blocks: the port 8443
// becomes a free port, and /etc/kcedar, /etc/kubernetes/... become
// directories of the test. The API server is a real kube-apiserver
// configured with the files the docs' `kcedar manifests` wrote.
//
// Then it checks that the API server holds every object the kustomize
// deploy renders (the CRDs established, RBAC, the DaemonSet, the
// PodDisruptionBudget, the Secrets), and accepts the Deployment overlay and
// the static pod too (server-side dry runs); applies the CRDs-and-RBAC
// component the static-pod section applies; runs kcedar as the DaemonSet's
// pod and as the static pod describe it (their args, Secrets and hostPath
// files, their probes), with a token of kcedar's ServiceAccount, so with
// exactly deploy/'s RBAC; applies the policies the docs' way and sees them
// decide through the API server and refuse an invalid policy at admission;
// and finds no request of kcedar's ServiceAccount that RBAC refused in the
// API server's audit log.
//
// The docs' other command blocks are marked <!-- illustration --> (see
// test/docs): pushing the image, `rollout status`, installing files on real
// nodes, the token kubeconfig (this cluster has no nodes and no
// controllers). The token kubeconfig is written here instead, with a token
// from the TokenRequest API, which is what the docs' `kubectl create token`
// asks for.
func TestDeploy(t *testing.T) {
	for _, tool := range []string{"bash", "openssl"} { // the docs' blocks use them
		if _, err := exec.LookPath(tool); err != nil {
			// The CI's contract is Go (and gcc for -race); a machine
			// without the docs' tools cannot run the docs. Say so loudly.
			t.Skipf("SKIPPED: TestDeploy runs docs/deploy.md's shell blocks, which need %s: install it (Debian: apt-get install %s)", tool, tool)
		}
	}
	root := moduleRoot(t)
	doc, err := docs.ReadE2EBlocks(filepath.Join(root, "docs", "deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	node := filepath.Join(work, "node") // the root of a control-plane node's file system
	copyTree(t, filepath.Join(root, "deploy"), filepath.Join(work, "deploy"))
	copyTree(t, filepath.Join(root, "policies", "quickstart"), filepath.Join(work, "policies", "quickstart"))
	bin := filepath.Join(work, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(framework.KcedarBinary(t), filepath.Join(bin, "kcedar")); err != nil {
		t.Fatal(err)
	}
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "kubectl"), "./test/e2e/framework/cmd/kubectl")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the e2e kubectl: %v\n%s", err, out)
	}
	daemonSetPort, staticPodPort := framework.FreePort(t), framework.FreePort(t)
	sh := &docShell{t: t, doc: doc, dir: work, env: append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))}

	// Certificates, then the API server's configuration, as the docs make
	// them; the API server finds its files under its run directory.
	sh.run("certs", nil)
	sh.run("condition-keys", nil)
	sh.run("manifests", map[string]string{"127.0.0.1:8443": "127.0.0.1:" + strconv.Itoa(daemonSetPort), "/etc/kubernetes/kcedar/": framework.DirPlaceholder + "/kcedar/"})
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(work, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	c := framework.Start(t, framework.Options{
		AuthorizationConfig: read("kcedar-apiserver/authorization-config.yaml"),
		Files: map[string]string{
			"kcedar/webhook.kubeconfig":    read("kcedar-apiserver/kcedar-webhook.kubeconfig"),
			"kcedar/admission.kubeconfig":  read("kcedar-apiserver/kcedar-admission.kubeconfig"),
			"kcedar/admission-config.yaml": read("kcedar-apiserver/admission-config.yaml"),
			"audit-policy.yaml":            deployAuditPolicy,
		},
		ExtraFlags: []string{
			"--admission-control-config-file=" + framework.DirPlaceholder + "/kcedar/admission-config.yaml",
			"--audit-policy-file=" + framework.DirPlaceholder + "/audit-policy.yaml",
			"--audit-log-path=" + framework.DirPlaceholder + "/audit.log",
		},
		Tokens: []framework.Token{
			{Token: "alice-token", User: "alice", Groups: []string{"dev"}},
			{Token: "carol-token", User: "carol", Groups: []string{"contractors"}},
		},
	})
	sh.env = append(sh.env, "KUBECONFIG="+c.Kubeconfig)
	ctx := t.Context()
	admin := c.Client(t)
	dyn, err := dynamic.NewForConfig(c.AdminConfig)
	if err != nil {
		t.Fatal(err)
	}

	// deploy/ through the operator's overlay.
	sh.run("overlay", nil)
	sh.write("kcedar-overlay/kustomization.yaml")
	sh.run("apply", nil)
	rendered := kustomizeBuild(t, filepath.Join(work, "kcedar-overlay"))
	mapper := newMapper(t, c)
	for _, u := range rendered {
		ri := resourceFor(t, mapper, dyn, u)
		if _, err := ri.Get(ctx, u.GetName(), metav1.GetOptions{}); err != nil {
			t.Errorf("%s %s/%s is not in the API server after the docs' apply: %v", u.GetKind(), u.GetNamespace(), u.GetName(), err)
		}
	}
	deployEventually(t, 30*time.Second, "kcedar's CRDs established", func() bool {
		for _, name := range []string{"cedarpolicies.kcedar.dev", "namespacedcedarpolicies.kcedar.dev"} {
			u, err := dyn.Resource(apiextensionsv1.SchemeGroupVersion.WithResource("customresourcedefinitions")).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false
			}
			var crd apiextensionsv1.CustomResourceDefinition
			if runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &crd) != nil {
				return false
			}
			if !slices.ContainsFunc(crd.Status.Conditions, func(c apiextensionsv1.CustomResourceDefinitionCondition) bool {
				return c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue
			}) {
				return false
			}
		}
		return true
	})
	// The Deployment overlay: the API server accepts every object (a
	// server-side dry run, so the DaemonSet's Secrets stay as they are).
	for _, u := range kustomizeBuild(t, filepath.Join(work, "deploy", "overlays", "deployment")) {
		body, err := u.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		force := true
		if _, err := resourceFor(t, mapper, dyn, u).Patch(ctx, u.GetName(), types.ApplyPatchType, body,
			metav1.PatchOptions{FieldManager: "e2e", Force: &force, DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Errorf("overlays/deployment: the API server refuses %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
	sh.run("policy-webhook", nil)

	// The static-pod section's CRDs and RBAC, from the component alone (the
	// overlay applied them already: the same objects, the same manager).
	sh.run("crds-rbac", nil)
	for _, u := range kustomizeBuild(t, filepath.Join(work, "deploy", "components", "crds-rbac")) {
		if _, err := resourceFor(t, mapper, dyn, u).Get(ctx, u.GetName(), metav1.GetOptions{}); err != nil {
			t.Errorf("components/crds-rbac: %s %s/%s is not in the API server: %v", u.GetKind(), u.GetNamespace(), u.GetName(), err)
		}
	}

	// kcedar's credentials: a token of its ServiceAccount (what the pod's
	// in-cluster config and the static pod's kubeconfig hold).
	saKubeconfig := filepath.Join(work, "kcedar.kubeconfig")
	writeServiceAccountKubeconfig(t, c, "kcedar-system", "kcedar", saKubeconfig)

	// Replica 1: the DaemonSet's pod, as the API server stored it.
	ds, err := admin.AppsV1().DaemonSets("kcedar-system").Get(ctx, "kcedar", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	daemonSetPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kcedar-system", Name: "kcedar-ds"}, Spec: ds.Spec.Template.Spec}
	r1 := startPodProcess(t, c, daemonSetPod, podEmulation{work: filepath.Join(work, "pod-ds"), node: node, kubeconfig: saKubeconfig, ports: map[int]int{8443: daemonSetPort}})

	// Replica 2: the static pod the docs install on a node.
	sh.run("static-pod", map[string]string{"127.0.0.1:8443": "127.0.0.1:" + strconv.Itoa(staticPodPort)})
	sh.run("static-pod-files", map[string]string{"/etc/kcedar": node + "/etc/kcedar", "/etc/kubernetes/manifests": node + "/etc/kubernetes/manifests"})
	var staticPod corev1.Pod
	if err := yaml.UnmarshalStrict([]byte(read("node/etc/kubernetes/manifests/kcedar.yaml")), &staticPod); err != nil {
		t.Fatalf("the static pod is not a strict corev1.Pod: %v", err)
	}
	c.EnsureNamespace(t, "kube-system")
	if _, err := admin.CoreV1().Pods("kube-system").Create(ctx, &staticPod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Errorf("the API server refuses the static pod as a Pod: %v", err)
	}
	r2 := startPodProcess(t, c, &staticPod, podEmulation{work: filepath.Join(work, "pod-static"), node: node})

	for _, r := range []*podProcess{r1, r2} {
		r.waitProbes(t, 120*time.Second)
	}

	// The policies, the docs' way: validated, packed, applied through the
	// policy webhook (replica 1, with the API server's client certificate).
	sh.run("policies", nil)
	cluster := dyn.Resource(policyobjects.ClusterResource)
	deployEventually(t, 30*time.Second, "the packed CedarPolicy Accepted=True with its policy ids", func() bool {
		list, err := cluster.List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) != 1 {
			return false
		}
		u := list.Items[0]
		ids, _, _ := unstructured.NestedStringSlice(u.Object, "status", "policies")
		return accepted(&u) == "True" && slices.Contains(ids, "dev-team-reads-own-namespace") && slices.Contains(ids, "no-secrets-for-contractors")
	})
	client := deployClientCert(t, work)
	for _, r := range []*podProcess{r1, r2} {
		deployEventually(t, 10*time.Second, r.name+" allows the dev group to list pods in dev", func() bool {
			return r.sar(t, client, "alice", []string{"dev"}, "list", "pods", "dev") == "allowed"
		})
		if got := r.sar(t, client, "carol", []string{"contractors"}, "get", "secrets", "dev"); got != "denied" {
			t.Errorf("%s: carol getting secrets: %s, want denied", r.name, got)
		}
	}
	alice, carol := c.ClientFor(t, "alice-token"), c.ClientFor(t, "carol-token")
	if _, err := alice.CoreV1().Pods("dev").List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("alice (group dev) listing pods in dev through the API server: %v", err)
	}
	if _, err := alice.CoreV1().Pods("prod").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("alice listing pods in prod: %v, want forbidden (no policy, no RBAC)", err)
	}
	if _, err := carol.CoreV1().Secrets("dev").Get(ctx, "x", metav1.GetOptions{}); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "no-secrets-for-contractors") {
		t.Errorf("carol getting a secret: %v, want forbidden by no-secrets-for-contractors", err)
	}
	// An invalid policy is refused at admission, through the client
	// certificate of the admission configuration.
	bad := &unstructured.Unstructured{Object: map[string]any{"apiVersion": policyobjects.GroupVersion.String(), "kind": policyobjects.KindCluster,
		"metadata": map[string]any{"name": "bad"}, "spec": map[string]any{"content": "permit(principal, action, resource is core::pods)\nwhen { resource.nmespace == \"a\" };"}}}
	if _, err := cluster.Create(ctx, bad, metav1.CreateOptions{}); err == nil || !strings.Contains(err.Error(), "CedarPolicy/bad:2:") {
		t.Errorf("an invalid CedarPolicy: %v, want refused at CedarPolicy/bad:2:...", err)
	}

	checkDeployAudit(t, c)
}

// deployAuditPolicy logs the metadata of every request of kcedar's
// ServiceAccount, with the authorization decision.
const deployAuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  users: ["system:serviceaccount:kcedar-system:kcedar"]
- level: None
`

// checkDeployAudit fails on any request of kcedar's ServiceAccount that the
// API server did not allow, and checks that kcedar made the calls deploy/'s
// RBAC is for (so the check is not vacuous).
func checkDeployAudit(t *testing.T, c *framework.Cluster) {
	t.Helper()
	f, err := os.Open(filepath.Join(c.Dir, "audit.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen, refused := map[string]int{}, map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev struct {
			Verb           string `json:"verb"`
			RequestURI     string `json:"requestURI"`
			User           struct{ Username string }
			ObjectRef      *struct{ Resource, Subresource, APIGroup, Namespace string } `json:"objectRef"`
			Annotations    map[string]string                                            `json:"annotations"`
			ResponseStatus *struct{ Code int }                                          `json:"responseStatus"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatal(err)
		}
		if ev.User.Username != "system:serviceaccount:kcedar-system:kcedar" {
			continue
		}
		path, _, _ := strings.Cut(ev.RequestURI, "?")
		what := ev.Verb + " " + path
		if ev.ObjectRef != nil {
			what = ev.Verb + " " + strings.TrimPrefix(ev.ObjectRef.APIGroup+"/", "/") + ev.ObjectRef.Resource
			if ev.ObjectRef.Subresource != "" {
				what += "/" + ev.ObjectRef.Subresource
			}
		}
		if d := ev.Annotations["authorization.k8s.io/decision"]; d != "allow" {
			if refused[what] == 0 {
				t.Errorf("kcedar's ServiceAccount was refused %s (%s): deploy/components/crds-rbac/rbac.yaml lacks a rule", what, ev.RequestURI)
			}
			refused[what]++
			continue
		}
		seen[what]++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	var calls []string
	for k, n := range seen {
		calls = append(calls, fmt.Sprintf("%s (%d)", k, n))
	}
	slices.Sort(calls)
	t.Logf("kcedar's requests, all allowed by deploy/'s RBAC:\n  %s", strings.Join(calls, "\n  "))
	// Informers list with a watch (WatchList) where the API server supports
	// it, so the lists may show as watches.
	for _, want := range []string{"watch kcedar.dev/cedarpolicies", "watch kcedar.dev/namespacedcedarpolicies", "watch namespaces",
		"get kcedar.dev/cedarpolicies", "update kcedar.dev/cedarpolicies/status", "get coordination.k8s.io/leases", "update coordination.k8s.io/leases", "get /openapi/v3"} {
		if seen[want] == 0 {
			t.Errorf("no %q by kcedar in the audit log: the RBAC check did not see the call it is for", want)
		}
	}
}

// docShell runs docs/deploy.md's marked blocks.
type docShell struct {
	t   *testing.T
	doc *docs.E2EBlocks
	dir string
	env []string
}

// run runs block name with bash -euo pipefail in the work directory, after
// replacing each key of subst (which must occur) with its value.
func (s *docShell) run(name string, subst map[string]string) {
	s.t.Helper()
	block, ok := s.doc.Commands[name]
	if !ok {
		s.t.Fatalf("docs/deploy.md has no block marked <!-- e2e: %s -->", name)
	}
	for from, to := range subst {
		if !strings.Contains(block, from) {
			s.t.Fatalf("block %s no longer contains %q, which the test replaces: update TestDeploy", name, from)
		}
		block = strings.ReplaceAll(block, from, to)
	}
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", block)
	cmd.Dir, cmd.Env = s.dir, s.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		s.t.Fatalf("docs/deploy.md block %s: %v\n--- script ---\n%s\n--- output ---\n%s", name, err, block, out)
	}
	s.t.Logf("block %s:\n%s", name, strings.TrimSpace(string(out)))
}

// write writes the docs' file block for path.
func (s *docShell) write(path string) {
	s.t.Helper()
	content, ok := s.doc.Files[path]
	if !ok {
		s.t.Fatalf("docs/deploy.md has no block marked <!-- e2e file: %s -->", path)
	}
	p := filepath.Join(s.dir, path)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		s.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		s.t.Fatal(err)
	}
}

// podEmulation says how to run a pod's container as a local process: work
// holds its materialized Secret volumes, node is the root of the node's
// file system for hostPath volumes, kubeconfig stands for the pod's
// in-cluster credentials (its ServiceAccount's token), ports maps the
// container's ports to free local ones.
type podEmulation struct {
	work, node, kubeconfig string
	ports                  map[int]int
}

type podProcess struct {
	name      string
	container corev1.Container
	ports     map[int]int
	proc      *framework.Process
}

// startPodProcess runs the pod's only container with the kcedar binary, as
// kubelet would: its args with every mount path replaced by the local
// directory of its volume (Secrets read from the API server, hostPaths under
// node), its environment (fieldRef and resourceFieldRef resolved), and, for a
// pod with a ServiceAccount, the in-cluster config as a kubeconfig: the
// KUBECONFIG of kcedar's one connection to the cluster (in-cluster by
// default).
func startPodProcess(t *testing.T, c *framework.Cluster, pod *corev1.Pod, e podEmulation) *podProcess {
	t.Helper()
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("pod %s: %d containers", pod.Name, len(pod.Spec.Containers))
	}
	ctr := pod.Spec.Containers[0]
	if ctr.Command != nil || len(ctr.Args) == 0 || ctr.Args[0] != "serve" {
		t.Fatalf("pod %s runs %q %q, not the image's entrypoint with serve", pod.Name, ctr.Command, ctr.Args)
	}
	volumes := map[string]string{}
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.Secret != nil:
			s, err := c.Client(t).CoreV1().Secrets(pod.Namespace).Get(t.Context(), v.Secret.SecretName, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("pod %s volume %s: %v", pod.Name, v.Name, err)
			}
			dir := filepath.Join(e.work, "volumes", v.Name)
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			for k, val := range s.Data {
				if err := os.WriteFile(filepath.Join(dir, k), val, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			volumes[v.Name] = dir
		case v.HostPath != nil:
			dir := filepath.Join(e.node, v.HostPath.Path)
			if info, err := os.Stat(dir); err != nil || !info.IsDir() {
				t.Fatalf("pod %s volume %s: hostPath %s is not a directory on the node (%v)", pod.Name, v.Name, v.HostPath.Path, err)
			}
			volumes[v.Name] = dir
		default:
			t.Fatalf("pod %s volume %s: a kind the emulation does not know", pod.Name, v.Name)
		}
	}
	local := func(arg string) string {
		for _, m := range ctr.VolumeMounts {
			if dir, ok := volumes[m.Name]; ok && strings.Contains(arg, "="+m.MountPath+"/") {
				return strings.Replace(arg, "="+m.MountPath+"/", "="+dir+"/", 1)
			}
		}
		return arg
	}
	var args []string
	for _, a := range ctr.Args[1:] {
		a = local(a)
		for from, to := range e.ports {
			a = strings.Replace(a, ":"+strconv.Itoa(from), ":"+strconv.Itoa(to), 1)
		}
		if strings.HasPrefix(a, "--listen=:") { // all addresses: only loopback here
			a = "--listen=127.0.0.1" + strings.TrimPrefix(a, "--listen=")
		}
		args = append(args, a)
	}
	env := []string{}
	for _, ev := range ctr.Env {
		switch {
		case ev.ValueFrom == nil:
			env = append(env, ev.Name+"="+ev.Value)
		case ev.ValueFrom.FieldRef != nil && ev.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			env = append(env, ev.Name+"="+pod.Namespace)
		case ev.ValueFrom.ResourceFieldRef != nil && ev.ValueFrom.ResourceFieldRef.Resource == "limits.memory":
			env = append(env, ev.Name+"="+strconv.FormatInt(ctr.Resources.Limits.Memory().Value(), 10))
		default:
			t.Fatalf("pod %s env %s: a source the emulation does not know", pod.Name, ev.Name)
		}
	}
	if pod.Spec.ServiceAccountName != "" {
		env = append(env, "KUBECONFIG="+e.kubeconfig)
	}
	t.Logf("pod %s/%s: kcedar %s (env %s)", pod.Namespace, pod.Name, strings.Join(args, " "), strings.Join(env, " "))
	p := &podProcess{name: pod.Name, container: ctr, ports: e.ports}
	p.proc = framework.StartProcess(t, "env", append(append(env, framework.KcedarBinary(t), "serve"), args...)...)
	return p
}

// probeURL is where kubelet would send probe pr.
func (p *podProcess) probeURL(pr *corev1.Probe) string {
	port := pr.HTTPGet.Port.IntValue()
	if local, ok := p.ports[port]; ok {
		port = local
	}
	return fmt.Sprintf("%s://127.0.0.1:%d%s", strings.ToLower(string(pr.HTTPGet.Scheme)), port, pr.HTTPGet.Path)
}

// waitProbes waits until the startup, liveness and readiness probes succeed
// as kubelet runs them (HTTPS without verifying the certificate).
func (p *podProcess) waitProbes(t *testing.T, timeout time.Duration) {
	t.Helper()
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	defer hc.CloseIdleConnections()
	start := time.Now()
	for _, pr := range []*corev1.Probe{p.container.StartupProbe, p.container.LivenessProbe, p.container.ReadinessProbe} {
		if pr == nil || pr.HTTPGet == nil {
			t.Fatalf("pod %s: a probe is missing or not httpGet", p.name)
		}
		url, last := p.probeURL(pr), ""
		deployEventually(t, timeout, fmt.Sprintf("pod %s: probe %s", p.name, url), func() bool {
			resp, err := hc.Get(url)
			if err != nil {
				last = err.Error()
				return false
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			last = string(b)
			return resp.StatusCode >= 200 && resp.StatusCode < 400
		}, func() string { return last + "\n" + p.proc.Logs() })
	}
	t.Logf("pod %s: probes succeed after %v", p.name, time.Since(start).Round(time.Millisecond))
}

// sar asks the replica directly: "allowed", "denied" or "no opinion".
func (p *podProcess) sar(t *testing.T, hc *http.Client, user string, groups []string, verb, resource, ns string) string {
	t.Helper()
	sar := authorizationv1.SubjectAccessReview{TypeMeta: metav1.TypeMeta{APIVersion: "authorization.k8s.io/v1", Kind: "SubjectAccessReview"},
		Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: groups, ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Version: "v1", Resource: resource, Namespace: ns}}}
	body, _ := json.Marshal(sar)
	resp, err := hc.Post(strings.TrimSuffix(p.probeURL(p.container.ReadinessProbe), "/readyz")+"/v1/authorize", "application/json", bytes.NewReader(body))
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return resp.Status
	}
	var out authorizationv1.SubjectAccessReview
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	switch {
	case out.Status.Allowed:
		return "allowed"
	case out.Status.Denied:
		return "denied"
	}
	return "no opinion"
}

// deployClientCert is an HTTP client with the API server's client
// certificate the docs made, trusting the docs' serving CA.
func deployClientCert(t *testing.T, work string) *http.Client {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(filepath.Join(work, "apiserver-client.crt"), filepath.Join(work, "apiserver-client.key"))
	if err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(filepath.Join(work, "serving-ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		t.Fatal("serving-ca.crt: no certificate")
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}}}}
}

// writeServiceAccountKubeconfig writes a kubeconfig with a token of the
// ServiceAccount (TokenRequest: the e2e cluster has no token controller).
func writeServiceAccountKubeconfig(t *testing.T, c *framework.Cluster, ns, name, path string) {
	t.Helper()
	exp := int64(3600)
	tr, err := c.Client(t).CoreV1().ServiceAccounts(ns).CreateToken(t.Context(), name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("a token for %s/%s: %v", ns, name, err)
	}
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster: {server: %s, certificate-authority: %s}
users:
- name: %s
  user: {token: %s}
contexts:
- name: e2e
  context: {cluster: e2e, user: %s}
current-context: e2e
`, q(c.Server), q(c.CAFile), q(name), q(tr.Status.Token), q(name))
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
}

// kustomizeBuild renders dir with kustomize, as kubectl apply -k does.
func kustomizeBuild(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	var out []*unstructured.Unstructured
	for _, r := range m.Resources() {
		obj, err := r.Map()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, &unstructured.Unstructured{Object: obj})
	}
	return out
}

func newMapper(t *testing.T, c *framework.Cluster) meta.RESTMapper {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(c.AdminConfig)
	if err != nil {
		t.Fatal(err)
	}
	return restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
}

func resourceFor(t *testing.T, mapper meta.RESTMapper, dyn dynamic.Interface, u *unstructured.Unstructured) dynamic.ResourceInterface {
	t.Helper()
	gvk := u.GroupVersionKind()
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		t.Fatalf("%s: %v", gvk, err)
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return dyn.Resource(m.Resource).Namespace(u.GetNamespace())
	}
	return dyn.Resource(m.Resource)
}

// deployEventually polls ok until it holds or d has passed; detail (if
// given) says more when it fails.
func deployEventually(t *testing.T, d time.Duration, what string, ok func() bool, detail ...func() string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	for !ok() {
		select {
		case <-ctx.Done():
			more := ""
			for _, f := range detail {
				more += "\n" + f()
			}
			t.Fatalf("not within %v: %s%s", d, what, more)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// copyTree copies the regular files under src to dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}
