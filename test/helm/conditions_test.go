package helm

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/releaseutil"
	"sigs.k8s.io/yaml"
)

// renderChartAt renders the chart as helm install would against a cluster
// of Kubernetes kubeVersion (its .Capabilities.KubeVersion).
func renderChartAt(t *testing.T, vals map[string]any, kubeVersion string) rendered {
	t.Helper()
	c, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := chartutil.ParseKubeVersion(kubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	install := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	install.ClientOnly, install.DryRun, install.Replace = true, true, true
	install.ReleaseName, install.Namespace, install.KubeVersion = "kcedar", "kcedar-system", kv
	rel, err := install.Run(c, vals)
	if err != nil {
		t.Fatalf("helm template at Kubernetes %s with %v: %v", kubeVersion, vals, err)
	}
	out := rendered{notes: rel.Info.Notes}
	for _, m := range releaseutil.SplitManifests(rel.Manifest) {
		o := obj{}
		if err := yaml.Unmarshal([]byte(m), &o); err != nil {
			t.Fatal(err)
		}
		if len(o) > 0 {
			out.objects = append(out.objects, o)
		}
	}
	return out
}

// TestConditionsEnforcement: conditions.enforcement chooses as kcedar
// manifests does. auto is native on Kubernetes 1.38 and later and kcedar's
// admission webhook before; kcedar serve gets --admission-enforcement
// exactly with the webhook (admissionWebhook, both), and the NOTES give the
// kcedar manifests flags of the choice, the webhook to apply, and the
// feature gate for native.
func TestConditionsEnforcement(t *testing.T) {
	for _, tc := range []struct {
		enforcement, kubeVersion string
		mode                     string // what it resolves to
		flags                    string // kcedar manifests' conditions flags in the NOTES
	}{
		{"auto", "v1.37.1", "admissionWebhook", " --admission-enforcement"},
		{"auto", "v1.38.0-beta.0", "native", " --conditions-review"},
		{"auto", "v1.39.0", "native", " --conditions-review"},
		{"native", "v1.37.1", "native", " --conditions-review"},
		{"admissionWebhook", "v1.38.0", "admissionWebhook", " --admission-enforcement"},
		{"both", "v1.38.0", "both", " --conditions-review --admission-enforcement"},
		{"none", "v1.38.0", "none", " --conditions-review=false --admission-enforcement=false"},
	} {
		name := tc.enforcement + "@" + tc.kubeVersion
		r := renderChartAt(t, values(t, "conditions: {enforcement: "+tc.enforcement+"}\n"), tc.kubeVersion)
		webhook := tc.mode == "admissionWebhook" || tc.mode == "both"
		if got := slices.Contains(args(t, find(t, r.objects, "Deployment", "kcedar")), "--admission-enforcement"); got != webhook {
			t.Errorf("%s: kcedar serve --admission-enforcement %v, want %v", name, got, webhook)
		}
		if !strings.Contains(r.notes, "--policy-objects"+tc.flags+" \\\n") {
			t.Errorf("%s: the NOTES' kcedar manifests lacks %q:\n%s", name, tc.flags, r.notes)
		}
		if !strings.Contains(r.notes, "Conditions of conditional permits (") || !strings.Contains(r.notes, tc.mode+"):") {
			t.Errorf("%s: the NOTES do not say the enforcement is %s:\n%s", name, tc.mode, r.notes)
		}
		if got := strings.Contains(r.notes, "kubectl apply --server-side -f kcedar-apiserver/validating-webhook.yaml"); got != webhook {
			t.Errorf("%s: the NOTES apply validating-webhook.yaml: %v, want %v:\n%s", name, got, webhook, r.notes)
		}
		gate := tc.mode == "native" || tc.mode == "both"
		if got := strings.Contains(r.notes, "--feature-gates=ConditionalAuthorization=true"); got != gate {
			t.Errorf("%s: the NOTES name the feature gate: %v, want %v:\n%s", name, got, gate, r.notes)
		}
	}
	bad := map[string]any{"conditions": map[string]any{"enforcement": "webhook"}}
	if _, err := renderChart("kcedar", "kcedar-system", bad); err == nil {
		t.Error("conditions.enforcement webhook (not one of the choices) was accepted")
	}
}

// TestChartAdmissionWebhookMatchesKustomizeComponent: the chart with
// conditions.enforcement admissionWebhook renders what deploy/ renders with
// components/admission-enforcement, for the Deployment and the DaemonSet.
func TestChartAdmissionWebhookMatchesKustomizeComponent(t *testing.T) {
	for _, tc := range []struct{ resource, values string }{
		{"deploy/overlays/deployment", "conditions: {enforcement: admissionWebhook}\n"},
		{"deploy/base", "kind: DaemonSet\nconditions: {enforcement: admissionWebhook}\n"},
	} {
		overlay := overlayWithComponent(t, tc.resource, "deploy/components/admission-enforcement")
		compareWithKustomize(t, tc.resource+" with components/admission-enforcement", overlay, tc.values)
	}
}

// overlayWithComponent writes an overlay of the repository's resource
// (a directory under deploy/, copied) with component, and returns its
// directory.
func overlayWithComponent(t *testing.T, resource, component string) string {
	t.Helper()
	work := t.TempDir()
	src := filepath.Join(repoRoot, "deploy")
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(work, "deploy", rel), 0o755)
		}
		return os.WriteFile(filepath.Join(work, "deploy", rel), readFile(t, p), 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	overlay := filepath.Join(work, "overlay")
	if err := os.MkdirAll(overlay, 0o755); err != nil {
		t.Fatal(err)
	}
	k := "resources:\n- ../" + resource + "\ncomponents:\n- ../" + component + "\n"
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	return overlay
}
