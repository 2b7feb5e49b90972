package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/kcedar/kcedar/internal/cluster/webhooks"
)

// fakeCluster serves /version as a kube-apiserver of gitVersion and
// writes a kubeconfig for it; calls counts the requests.
func fakeCluster(t *testing.T, gitVersion string) (kubeconfig string, calls *atomic.Int32) {
	t.Helper()
	calls = new(atomic.Int32)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if r.URL.Path != "/version" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintf(w, `{"major":"1","minor":"%s","gitVersion":"%s"}`, strings.Split(gitVersion, ".")[1], gitVersion)
	}))
	t.Cleanup(srv.Close)
	kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	cfg := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: %q}}]\nusers: [{name: u, user: {token: t}}]\n"+
		"contexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n", srv.URL)
	if err := os.WriteFile(kubeconfig, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return kubeconfig, calls
}

// manifestsMode is what one run of kcedar manifests configured.
type manifestsMode struct {
	conditionsReview, conditionsContext, webhook, gateHeader bool
	notes                                                    string
}

// runManifestsMode runs kcedar manifests with args into a directory and
// reads which enforcement it wrote.
func runManifestsMode(t *testing.T, ca string, args ...string) (manifestsMode, int, string) {
	t.Helper()
	out := t.TempDir()
	msg, code := run(t, newManifestsCmd(), append([]string{"--url", "https://127.0.0.1:8443", "--ca-file", ca, "--output-dir", out}, args...)...)
	if code != 0 {
		return manifestsMode{}, code, msg
	}
	authz, err := os.ReadFile(filepath.Join(out, "authorization-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	kc, err := clientcmd.LoadFromFile(filepath.Join(out, "kcedar-webhook.kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	_, webhookErr := os.Stat(filepath.Join(out, "validating-webhook.yaml"))
	m := manifestsMode{conditionsReview: strings.Contains(string(authz), "conditionsReview:"), webhook: webhookErr == nil,
		gateHeader: strings.HasPrefix(string(authz), "# conditionsReview needs Kubernetes 1.38 or later with --feature-gates=ConditionalAuthorization=true"),
		notes:      msg}
	_, m.conditionsContext = kc.Contexts["conditions"]
	return m, 0, msg
}

// TestManifestsModeFollowsKubernetesVersion: without --conditions-review or
// --admission-enforcement, kcedar manifests configures the API server's
// conditions (conditionsReview, the kubeconfig's conditions context, the
// gate said in the file and the notes) on 1.38 and later, and kcedar's
// admission webhook before; --kubernetes-version overrides the cluster's
// version; explicit flags decide; an unreadable version configures
// neither, and says so.
func TestManifestsModeFollowsKubernetesVersion(t *testing.T) {
	dir := t.TempDir()
	ca := writeCA(t, dir)
	t.Setenv("KUBECONFIG", filepath.Join(dir, "none"))
	kube137, calls137 := fakeCluster(t, "v1.37.1")
	kube138, calls138 := fakeCluster(t, "v1.38.0-beta.0")
	native := manifestsMode{conditionsReview: true, conditionsContext: true, gateHeader: true}
	webhook := manifestsMode{webhook: true}
	for _, tc := range []struct {
		name  string
		args  []string
		want  manifestsMode
		notes []string
	}{
		{"a 1.37 cluster", []string{"--kubeconfig", kube137}, webhook, []string{"Kubernetes 1.37.1 (from the cluster)", "--admission-enforcement, and apply validating-webhook.yaml"}},
		{"a 1.38 cluster", []string{"--kubeconfig", kube138}, native, []string{"Kubernetes 1.38.0-beta.0 (from the cluster)", "--feature-gates=ConditionalAuthorization=true", "AuthorizationConditionsEnforcer"}},
		{"--kubernetes-version over the cluster's", []string{"--kubeconfig", kube138, "--kubernetes-version", "1.37"}, webhook, []string{"(from --kubernetes-version)"}},
		{"--kubernetes-version v1.39.2", []string{"--kubernetes-version", "v1.39.2"}, native, nil},
		{"no cluster", nil, manifestsMode{}, []string{"could not be read", "conditional permits do not allow"}},
		{"explicitly none on a 1.37 cluster", []string{"--kubeconfig", kube137, "--admission-enforcement=false"}, manifestsMode{}, nil},
		{"explicitly both", []string{"--admission-enforcement", "--conditions-review"}, manifestsMode{conditionsReview: true, conditionsContext: true, gateHeader: true, webhook: true}, nil},
	} {
		got, code, msg := runManifestsMode(t, ca, tc.args...)
		if code != 0 {
			t.Errorf("%s: exit %d: %s", tc.name, code, msg)
			continue
		}
		notes := got.notes
		got.notes = ""
		if got != tc.want {
			t.Errorf("%s: wrote %+v, want %+v\n%s", tc.name, got, tc.want, notes)
		}
		for _, n := range tc.notes {
			if !strings.Contains(notes, n) {
				t.Errorf("%s: the notes do not say %q:\n%s", tc.name, n, notes)
			}
		}
	}
	if calls138.Load() != 1 || calls137.Load() != 1 {
		t.Errorf("/version read %d times on 1.38 and %d on 1.37, want once each: --kubernetes-version and explicit flags need no cluster", calls138.Load(), calls137.Load())
	}
	for _, args := range [][]string{{"--conditions-review", "--kubernetes-version", "1.37"}, {"--kubernetes-version", "latest"}} {
		if _, code, msg := runManifestsMode(t, ca, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2: %s", args, code, msg)
		}
	}
}

// TestManifestsBypassAgrees: for every combination of --service-account
// and --bypass-control-plane, the conditions webhook kcedar manifests
// writes is one kcedar serve verifies (webhooks.Inspect), and the
// identities it leaves out of admission are those the
// AuthorizationConfiguration of the same run sends past kcedar: the same
// list, rendered for each side.
func TestManifestsBypassAgrees(t *testing.T) {
	ca := writeCA(t, t.TempDir())
	for _, sa := range []string{"kcedar-system/kcedar", "", "auth/kc"} {
		for _, controlPlane := range []bool{true, false} {
			o := manifestOptions{url: "https://127.0.0.1:8443", caFile: ca, failurePolicy: "Deny", kubeconfigPath: "/k",
				admissionEnforcement: true, serviceAccount: sa, bypassControlPlane: controlPlane}
			files, err := o.render()
			if err != nil {
				t.Fatal(err)
			}
			var authz struct {
				Authorizers []struct {
					Webhook struct {
						MatchConditions []struct{ Expression string } `json:"matchConditions"`
					} `json:"webhook"`
				} `json:"authorizers"`
			}
			var vwc admissionregistrationv1.ValidatingWebhookConfiguration
			for _, f := range files {
				switch f.name {
				case "authorization-config.yaml":
					err = yaml.Unmarshal(f.data, &authz)
				case "validating-webhook.yaml":
					err = yaml.UnmarshalStrict(f.data, &vwc)
				}
				if err != nil {
					t.Fatalf("%s: %v", f.name, err)
				}
			}
			b, err := webhooks.Inspect(&vwc)
			if err != nil {
				t.Fatalf("--service-account %q --bypass-control-plane=%v: kcedar serve would not verify the webhook: %v", sa, controlPlane, err)
			}
			if b != (webhooks.Bypass{ServiceAccount: sa, ControlPlane: controlPlane}) {
				t.Errorf("--service-account %q --bypass-control-plane=%v: the webhook leaves out %+v", sa, controlPlane, b)
			}
			want, _ := b.AuthorizerMatchConditions()
			var got []string
			for _, mc := range authz.Authorizers[1].Webhook.MatchConditions {
				got = append(got, mc.Expression)
			}
			if !slices.Equal(got, want) {
				t.Errorf("--service-account %q --bypass-control-plane=%v: the authorizer's match conditions\n  %q\nare not the webhook's list\n  %q", sa, controlPlane, got, want)
			}
		}
	}
}
