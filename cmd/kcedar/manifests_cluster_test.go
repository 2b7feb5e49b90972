package main

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	"sigs.k8s.io/yaml"

	"github.com/kcedar/kcedar/internal/cluster/webhooks"
)

func TestManifestsForPolicyObjects(t *testing.T) {
	ca := writeCA(t, t.TempDir()) // a real PEM certificate: manifests checks it
	o := manifestOptions{url: "https://127.0.0.1:8443", caFile: ca, failurePolicy: "Deny", kubeconfigPath: "/k", policyObjects: true, serviceAccount: "kcedar-system/kcedar", bypassControlPlane: true}
	files, err := o.render()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string][]byte{}
	for _, f := range files {
		byName[f.name] = f.data
	}
	var authz struct {
		Authorizers []struct {
			Type    string `json:"type"`
			Name    string `json:"name"`
			Webhook struct {
				MatchConditions []struct {
					Expression string `json:"expression"`
				} `json:"matchConditions"`
			} `json:"webhook"`
		} `json:"authorizers"`
	}
	if err := yaml.Unmarshal(byName["authorization-config.yaml"], &authz); err != nil {
		t.Fatal(err)
	}
	var order []string
	var exprs []string
	for _, a := range authz.Authorizers {
		order = append(order, a.Type)
		for _, mc := range a.Webhook.MatchConditions {
			exprs = append(exprs, mc.Expression)
		}
	}
	if strings.Join(order, ",") != "Node,Webhook,RBAC" {
		t.Fatalf("authorizer order %v: RBAC must follow kcedar", order)
	}
	all := strings.Join(exprs, "\n")
	for _, want := range []string{"system:serviceaccount:kcedar-system:kcedar", "'system:masters' in request.groups", "'system:nodes' in request.groups", "system:serviceaccount:kube-system:", "system:kube-controller-manager"} {
		if !strings.Contains(all, want) {
			t.Errorf("matchConditions do not exclude %s:\n%s", want, all)
		}
	}
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	if err := yaml.UnmarshalStrict(byName["policy-webhook.yaml"], &vwc); err != nil {
		t.Fatal(err)
	}
	w := vwc.Webhooks[0]
	if *w.ClientConfig.URL != "https://127.0.0.1:8443/v1/validate-policy" || *w.FailurePolicy != admissionregistrationv1.Fail || w.Rules[0].APIGroups[0] != "kcedar.dev" || len(w.Rules[0].Resources) != 2 {
		t.Fatalf("policy webhook %+v", w)
	}
	// kcedar serve verifies exactly what the manifests register: create,
	// update and delete of both kinds, failing closed.
	if err := webhooks.CheckPolicyWebhook(&vwc); err != nil {
		t.Fatalf("kcedar serve would not verify the printed policy webhook: %v", err)
	}

	o.serviceAccount = "bad"
	if _, err := o.render(); err == nil {
		t.Fatal("a malformed --service-account was accepted")
	}
}

// staticPod renders kcedar-static-pod.yaml and decodes it strictly.
func staticPod(t *testing.T, o manifestOptions) corev1.Pod {
	t.Helper()
	files, err := o.render()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if f.name == "kcedar-static-pod.yaml" {
			var pod corev1.Pod
			if err := yaml.UnmarshalStrict(f.data, &pod); err != nil {
				t.Fatalf("not a strict corev1.Pod: %v\n%s", err, f.data)
			}
			return pod
		}
	}
	t.Fatal("no kcedar-static-pod.yaml")
	return corev1.Pod{}
}

func TestManifestsStaticPod(t *testing.T) {
	dir := t.TempDir()
	ca := writeCA(t, dir)
	certFile, keyFile := writeClientPair(t, dir)
	for _, objects := range []bool{true, false} {
		t.Run(fmt.Sprintf("policy-objects=%v", objects), func(t *testing.T) {
			o := manifestOptions{url: "https://127.0.0.1:9443", caFile: ca, clientCert: certFile, clientKey: keyFile, failurePolicy: "Deny", kubeconfigPath: "/k",
				policyObjects: objects, serviceAccount: "auth/kc", bypassControlPlane: true, staticPod: true, image: "registry.example/kcedar:v1", hostDir: "/srv/kcedar/"}
			pod := staticPod(t, o)
			spec := pod.Spec
			if !spec.HostNetwork || pod.Namespace != "kube-system" || spec.PriorityClassName != "system-node-critical" || len(spec.Containers) != 1 {
				t.Fatalf("pod %s/%s hostNetwork=%v priorityClass=%q containers=%d", pod.Namespace, pod.Name, spec.HostNetwork, spec.PriorityClassName, len(spec.Containers))
			}
			c := spec.Containers[0]
			if c.Image != o.image {
				t.Errorf("image %q", c.Image)
			}
			for name, p := range map[string]*corev1.Probe{"startup": c.StartupProbe, "liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
				want := "/livez"
				if name == "readiness" {
					want = "/readyz"
				}
				if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != want || p.HTTPGet.Scheme != corev1.URISchemeHTTPS || p.HTTPGet.Host != "127.0.0.1" || p.HTTPGet.Port.IntValue() != 9443 {
					t.Errorf("%s probe %+v: want HTTPS GET 127.0.0.1:9443%s", name, p, want)
				}
			}

			// The args are what kcedar serve accepts, and every file they
			// name is inside a read-only hostPath mount of the same path.
			if len(c.Args) == 0 || c.Args[0] != "serve" {
				t.Fatalf("args %q do not start with serve", c.Args)
			}
			serve := newServeCmd()
			if err := serve.ParseFlags(c.Args[1:]); err != nil {
				t.Fatalf("kcedar serve refuses the static pod's args %q: %v", c.Args, err)
			}
			if n := serve.Flags().NArg(); n != 0 {
				t.Fatalf("stray positional args: %q", serve.Flags().Args())
			}
			get := func(name string) string { return serve.Flags().Lookup(name).Value.String() }
			if get("listen") != "127.0.0.1:9443" || get("policy-objects") != strconv.FormatBool(objects) {
				t.Errorf("listen %s policy-objects %s", get("listen"), get("policy-objects"))
			}
			files := []string{get("tls-cert-file"), get("tls-private-key-file"), get("client-ca-file"), get("conditions-key-file")}
			if objects {
				files = append(files, get("kubeconfig"))
				if get("status-lease-namespace") != "auth" {
					t.Errorf("status lease in %q, want the ServiceAccount's namespace auth (deploy/ grants the Lease there)", get("status-lease-namespace"))
				}
				// One connection: --kubeconfig serves the schema and the
				// policy objects, so it appears once.
				n := 0
				for _, a := range c.Args {
					if name, _, _ := strings.Cut(a, "="); strings.Contains(name, "kubeconfig") {
						n++
					}
				}
				if n != 1 {
					t.Errorf("args name a kubeconfig %d times: %q", n, c.Args)
				}
			} else {
				files = append(files, strings.Trim(get("policies"), "[]"))
			}
			mounts := map[string]string{}
			for _, v := range spec.Volumes {
				if v.HostPath == nil || *v.HostPath.Type != corev1.HostPathDirectory {
					t.Fatalf("volume %s: static pods can only read the node's files (hostPath Directory)", v.Name)
				}
				mounts[v.Name] = v.HostPath.Path
			}
			for _, f := range files {
				ok := false
				for _, m := range c.VolumeMounts {
					if strings.HasPrefix(f, m.MountPath+"/") && m.ReadOnly && mounts[m.Name] == m.MountPath && m.MountPath == "/srv/kcedar" {
						ok = true
					}
				}
				if !ok {
					t.Errorf("file %q is not inside the read-only hostPath mount of /srv/kcedar", f)
				}
			}
		})
	}

	t.Run("refused", func(t *testing.T) {
		base := manifestOptions{url: "https://127.0.0.1:8443", caFile: ca, failurePolicy: "Deny", staticPod: true, image: "i", hostDir: "/etc/kcedar"}
		for name, change := range map[string]func(*manifestOptions){
			"no image":          func(o *manifestOptions) { o.image = "" },
			"not loopback":      func(o *manifestOptions) { o.url = "https://10.0.0.1:8443" },
			"a path prefix":     func(o *manifestOptions) { o.url = "https://127.0.0.1:8443/kcedar" },
			"relative host dir": func(o *manifestOptions) { o.hostDir = "etc/kcedar" },
			"root host dir":     func(o *manifestOptions) { o.hostDir = "/" },
		} {
			o := base
			change(&o)
			if _, err := o.render(); err == nil {
				t.Errorf("%s: accepted", name)
			}
		}
		o := base
		o.url = "https://localhost"
		if got := staticPod(t, o).Spec.Containers[0].Args[1]; got != "--listen=127.0.0.1:443" {
			t.Errorf("https://localhost: %s", got)
		}
	})
}

// TestManifestsOutputDir: --output-dir writes every file, and the webhook
// kubeconfig, which embeds the API server's client key, only for its owner.
func TestManifestsOutputDir(t *testing.T) {
	dir := t.TempDir()
	ca := writeCA(t, dir)
	certFile, keyFile := writeClientPair(t, dir)
	out := filepath.Join(dir, "out")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	// An existing world-readable file must not keep its mode.
	if err := os.WriteFile(filepath.Join(out, "kcedar-webhook.kubeconfig"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if msg, code := run(t, newManifestsCmd(), "--url", "https://127.0.0.1:8443", "--ca-file", ca, "--client-certificate", certFile, "--client-key", keyFile,
		"--policy-objects", "--admission-enforcement", "--static-pod", "--image", "i", "--output-dir", out); code != 0 {
		t.Fatalf("exit %d: %s", code, msg)
	}
	want := map[string]os.FileMode{"authorization-config.yaml": 0o644, "kcedar-webhook.kubeconfig": 0o600, "validating-webhook.yaml": 0o644,
		"policy-webhook.yaml": 0o644, "kcedar-static-pod.yaml": 0o644, "admission-config.yaml": 0o644, "kcedar-admission.kubeconfig": 0o600}
	entries, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(want) {
		t.Errorf("wrote %d files, want %d", len(entries), len(want))
	}
	for name, mode := range want {
		info, err := os.Stat(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm() != mode {
			t.Errorf("%s: mode %v, want %v", name, info.Mode().Perm(), mode)
		}
	}
	kc, err := os.ReadFile(filepath.Join(out, "kcedar-webhook.kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(kc), "client-key-data") {
		t.Error("the webhook kubeconfig lacks the client key")
	}

	// The admission webhooks get the client certificate too: the
	// AdmissionConfiguration names the kubeconfig, whose only user is
	// kcedar's host:port (the name the API server looks up).
	var ac struct {
		APIVersion, Kind string
		Plugins          []struct {
			Name          string
			Configuration struct {
				APIVersion, Kind, KubeConfigFile string
			}
		}
	}
	data, err := os.ReadFile(filepath.Join(out, "admission-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, &ac); err != nil {
		t.Fatal(err)
	}
	if ac.Kind != "AdmissionConfiguration" || len(ac.Plugins) != 1 || ac.Plugins[0].Name != "ValidatingAdmissionWebhook" ||
		ac.Plugins[0].Configuration.Kind != "WebhookAdmissionConfiguration" || ac.Plugins[0].Configuration.KubeConfigFile != "/etc/kubernetes/kcedar-admission.kubeconfig" {
		t.Fatalf("admission-config.yaml: %+v", ac)
	}
	cfg, err := clientcmd.LoadFromFile(filepath.Join(out, "kcedar-admission.kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	if u, ok := cfg.AuthInfos["127.0.0.1:8443"]; len(cfg.AuthInfos) != 1 || !ok || len(u.ClientCertificateData) == 0 || len(u.ClientKeyData) == 0 {
		t.Fatalf("admission kubeconfig users %v: want only 127.0.0.1:8443 with the client certificate", cfg.AuthInfos)
	}
	for url, want := range map[string]string{"https://kcedar.kcedar-system.svc": "kcedar.kcedar-system.svc:443", "https://[::1]:9443/v1/authorize": "[::1]:9443"} {
		c, err := admissionKubeconfig(url, clientcmdv1.AuthInfo{})
		if err != nil || c.AuthInfos[0].Name != want {
			t.Errorf("%s: user %v (%v), want %s", url, c.AuthInfos, err, want)
		}
	}
	// Without a client certificate there is nothing to present.
	o := manifestOptions{url: "https://127.0.0.1:8443", caFile: ca, failurePolicy: "Deny", policyObjects: true}
	files, err := o.render()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasPrefix(f.name, "admission-") || strings.Contains(f.name, "admission.kubeconfig") {
			t.Errorf("%s written without --client-certificate", f.name)
		}
	}
}

// writeClientPair writes a self-signed client certificate and its key.
func writeClientPair(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kube-apiserver"}, NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	return writeSelfSigned(t, dir, "client", tmpl)
}
