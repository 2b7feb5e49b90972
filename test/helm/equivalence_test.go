package helm

import (
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// sameAsDeployValues make the chart render what deploy/ renders: the Secrets
// of the serving certificate and of the client CA are the operator's
// (deploy/ mounts them by these names, docs/deploy.md makes them), the image
// is deploy/'s, the condition keys are given (deploy/'s are a placeholder
// that kcedar refuses, replaced in the operator's overlay), and conditions
// are enforced natively (deploy/ without components/admission-enforcement:
// no --admission-enforcement).
const sameAsDeployValues = `
image: {repository: kcedar, tag: latest}
tls: {existingSecret: kcedar-serving-cert}
clientCA: {existingSecret: kcedar-client-ca}
conditionKeys: {keys: "k1 AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n"}
conditions: {enforcement: native}
`

// TestChartMatchesKustomizeDeployment renders the chart (release kcedar in
// kcedar-system, the default Deployment) and deploy/overlays/deployment, and
// compares them object by object, field by field, after normalizing only the
// differences listed in normalizeHelmConventions and normalizeKustomize.
func TestChartMatchesKustomizeDeployment(t *testing.T) {
	compareWithKustomize(t, "deploy/overlays/deployment", filepath.Join(repoRoot, "deploy", "overlays", "deployment"), "")
}

// TestChartDaemonSetMatchesKustomizeBase does the same for kind: DaemonSet
// and deploy/base.
func TestChartDaemonSetMatchesKustomizeBase(t *testing.T) {
	compareWithKustomize(t, "deploy/base", filepath.Join(repoRoot, "deploy", "base"), "kind: DaemonSet\n")
}

// compareWithKustomize compares the chart, with sameAsDeployValues and
// extraValues, with the kustomization at path (named dir in messages).
func compareWithKustomize(t *testing.T, dir, path, extraValues string) {
	kust := kustomizeBuild(t, path)
	vals := values(t, sameAsDeployValues)
	maps.Copy(vals, values(t, extraValues))
	chart := mustRenderChart(t, "kcedar", "kcedar-system", vals).objects
	chartVersion := str(values(t, string(readFile(t, filepath.Join(chartDir, "Chart.yaml")))), "version")
	kust = normalizeKustomize(t, kust)
	for _, o := range chart {
		normalizeHelmConventions(t, o, "kcedar", chartVersion, "latest")
	}
	compareSecretKeys(t, chart, kust)
	c, k := byKey(chart), byKey(kust)
	for name, want := range k {
		got, ok := c[name]
		if !ok {
			t.Errorf("%s renders %s, the chart does not", dir, name)
			continue
		}
		for _, d := range diff(name, got, want) {
			t.Errorf("chart and %s differ: %s", dir, d)
		}
	}
	for name := range c {
		if _, ok := k[name]; !ok {
			t.Errorf("the chart renders %s, %s does not", name, dir)
		}
	}
	if len(k) < 10 {
		t.Fatalf("%s renders %d objects: the comparison would be vacuous", dir, len(k))
	}
	t.Logf("%d objects identical after normalization: %s", len(k), strings.Join(keys(kust), ", "))
}

// normalizeKustomize drops what deploy/ has and a chart by Helm's
// conventions does not: the Namespace. Helm installs into a namespace that
// exists or that --create-namespace makes; a chart that owned its namespace
// would delete it, with the status Lease and everything else in it, on
// helm uninstall.
func normalizeKustomize(t *testing.T, objs []obj) []obj {
	t.Helper()
	return slices.DeleteFunc(objs, func(o obj) bool {
		if o["kind"] != "Namespace" {
			return false
		}
		if str(o, "metadata", "name") != "kcedar-system" {
			t.Errorf("deploy/ renders the namespace %s, want kcedar-system", str(o, "metadata", "name"))
		}
		return true
	})
}

// normalizeHelmConventions removes from a chart object what Helm's
// conventions add, after checking each value:
//   - the standard labels helm.sh/chart, app.kubernetes.io/managed-by,
//     app.kubernetes.io/instance and app.kubernetes.io/version on every
//     object and pod template (deploy/ sets app.kubernetes.io/name only, which
//     stays compared);
//   - app.kubernetes.io/instance in the selectors (workload, PDB, Service,
//     topology spread): two releases must not select each other's pods;
//   - imagePullPolicy, a value of the chart (deploy/ leaves it to the API
//     server's default);
//   - the CRDs' helm.sh/resource-policy: keep, so that helm uninstall does
//     not delete every policy object with the CRDs.
func normalizeHelmConventions(t *testing.T, o obj, release, chartVersion, appVersion string) {
	t.Helper()
	standard := map[string]string{
		"helm.sh/chart":                "kcedar-" + chartVersion,
		"app.kubernetes.io/managed-by": "Helm",
		"app.kubernetes.io/instance":   release,
		"app.kubernetes.io/version":    appVersion,
	}
	dropLabels(t, key(o)+" metadata.labels", mapAt(o, "metadata", "labels"), standard)
	dropLabels(t, key(o)+" pod template labels", mapAt(o, "spec", "template", "metadata", "labels"), standard)
	instance := map[string]string{"app.kubernetes.io/instance": release}
	switch o["kind"] {
	case "Deployment", "DaemonSet", "PodDisruptionBudget":
		dropLabels(t, key(o)+" selector", mapAt(o, "spec", "selector", "matchLabels"), instance)
	case "Service":
		dropLabels(t, key(o)+" selector", mapAt(o, "spec", "selector"), instance)
	case "CustomResourceDefinition":
		ann := mapAt(o, "metadata", "annotations")
		if ann["helm.sh/resource-policy"] != "keep" {
			t.Errorf("%s: annotations %v, want helm.sh/resource-policy: keep", key(o), ann)
		}
		delete(o["metadata"].(map[string]any), "annotations")
	}
	if spread, ok := get(o, "spec", "template", "spec", "topologySpreadConstraints").([]any); ok {
		for _, c := range spread {
			dropLabels(t, key(o)+" topologySpreadConstraints", mapAt(c, "labelSelector", "matchLabels"), instance)
		}
	}
	if cs, ok := get(o, "spec", "template", "spec", "containers").([]any); ok {
		for _, c := range cs {
			if c.(map[string]any)["imagePullPolicy"] != "IfNotPresent" {
				t.Errorf("%s: imagePullPolicy %v, want the value's IfNotPresent", key(o), c.(map[string]any)["imagePullPolicy"])
			}
			delete(c.(map[string]any), "imagePullPolicy")
		}
	}
}

// dropLabels checks that labels hold want and deletes those keys.
func dropLabels(t *testing.T, where string, labels map[string]any, want map[string]string) {
	t.Helper()
	if labels == nil {
		return
	}
	for k, v := range want {
		if labels[k] != v {
			t.Errorf("%s: %s=%v, want %q", where, k, labels[k], v)
		}
		delete(labels, k)
	}
}

// compareSecretKeys checks the condition-key Secrets apart: deploy/'s holds
// the placeholder kcedar refuses to start with, the chart's the keys given.
func compareSecretKeys(t *testing.T, chart, kust []obj) {
	t.Helper()
	const name = "kcedar-condition-keys"
	k, c := find(t, kust, "Secret", name), find(t, chart, "Secret", name)
	if got := str(k, "stringData", "keys"); got != "REPLACE-ME REPLACE-ME\n" {
		t.Errorf("deploy/'s condition keys are %q, not the placeholder this test expects", got)
	}
	if got := str(c, "stringData", "keys"); !strings.HasPrefix(got, "k1 ") {
		t.Errorf("the chart's condition keys are %q, want the keys of the values", got)
	}
	delete(k["stringData"].(map[string]any), "keys")
	delete(c["stringData"].(map[string]any), "keys")
}
