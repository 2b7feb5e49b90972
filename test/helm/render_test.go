package helm

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/releaseutil"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// obj is one rendered Kubernetes object, as JSON decodes it.
type obj = map[string]any

var (
	repoRoot = filepath.Join("..", "..")
	chartDir = filepath.Join(repoRoot, "charts", "kcedar")
)

// values parses a YAML document of chart values.
func values(t *testing.T, doc string) map[string]any {
	t.Helper()
	v := map[string]any{}
	if err := yaml.Unmarshal([]byte(doc), &v); err != nil {
		t.Fatalf("values %q: %v", doc, err)
	}
	return v
}

// rendered is what helm template prints: the objects, and NOTES.txt.
type rendered struct {
	objects []obj
	notes   string
}

// monitoringAPIs are the API versions of the Prometheus operator's CRDs,
// which the chart's ServiceMonitor and PrometheusRule need.
var monitoringAPIs = chartutil.VersionSet{"monitoring.coreos.com/v1"}

// renderChart renders the chart as `helm template RELEASE charts/kcedar
// --namespace NS --api-versions monitoring.coreos.com/v1` does, with Helm's
// Go SDK (values checked against values.schema.json): for a cluster with
// the Prometheus operator's CRDs.
func renderChart(release, namespace string, vals map[string]any) (rendered, error) {
	return renderChartFor(release, namespace, vals, monitoringAPIs)
}

// renderChartFor renders the chart for a cluster that serves apis besides
// Kubernetes' own (helm template --api-versions).
func renderChartFor(release, namespace string, vals map[string]any, apis chartutil.VersionSet) (rendered, error) {
	c, err := loader.Load(chartDir)
	if err != nil {
		return rendered{}, err
	}
	cfg := &action.Configuration{Log: func(string, ...any) {}}
	install := action.NewInstall(cfg)
	install.ClientOnly, install.DryRun, install.Replace = true, true, true
	install.ReleaseName, install.Namespace = release, namespace
	install.APIVersions = apis
	rel, err := install.Run(c, vals)
	if err != nil {
		return rendered{}, err
	}
	out := rendered{notes: rel.Info.Notes}
	manifests := releaseutil.SplitManifests(rel.Manifest)
	for _, key := range slices.Sorted(maps.Keys(manifests)) {
		o := obj{}
		if err := yaml.Unmarshal([]byte(manifests[key]), &o); err != nil {
			return rendered{}, fmt.Errorf("%s: %v\n%s", key, err, manifests[key])
		}
		if len(o) > 0 {
			out.objects = append(out.objects, o)
		}
	}
	return out, nil
}

func mustRenderChart(t *testing.T, release, namespace string, vals map[string]any) rendered {
	t.Helper()
	r, err := renderChart(release, namespace, vals)
	if err != nil {
		t.Fatalf("helm template %s with %v: %v", release, vals, err)
	}
	return r
}

// kustomizeBuild renders dir as kubectl apply -k does.
func kustomizeBuild(t *testing.T, dir string) []obj {
	t.Helper()
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	var out []obj
	for _, r := range m.Resources() {
		y, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		o := obj{}
		if err := yaml.Unmarshal(y, &o); err != nil {
			t.Fatal(err)
		}
		out = append(out, o)
	}
	return out
}

// key names an object: kind, namespace/name.
func key(o obj) string {
	return fmt.Sprintf("%s %s/%s", o["kind"], str(o, "metadata", "namespace"), str(o, "metadata", "name"))
}

func byKey(objs []obj) map[string]obj {
	m := map[string]obj{}
	for _, o := range objs {
		m[key(o)] = o
	}
	return m
}

// find returns the object of kind named name, or fails.
func find(t *testing.T, objs []obj, kind, name string) obj {
	t.Helper()
	for _, o := range objs {
		if o["kind"] == kind && str(o, "metadata", "name") == name {
			return o
		}
	}
	t.Fatalf("no %s %s among %v", kind, name, keys(objs))
	return nil
}

func keys(objs []obj) []string {
	var ks []string
	for _, o := range objs {
		ks = append(ks, key(o))
	}
	sort.Strings(ks)
	return ks
}

// get follows path through nested maps; nil when a step is missing.
func get(o any, path ...string) any {
	for _, p := range path {
		m, ok := o.(map[string]any)
		if !ok {
			return nil
		}
		o = m[p]
	}
	return o
}

func str(o any, path ...string) string {
	s, _ := get(o, path...).(string)
	return s
}

func mapAt(o any, path ...string) map[string]any {
	m, _ := get(o, path...).(map[string]any)
	return m
}

// container returns the pod template's only container.
func container(t *testing.T, workload obj) map[string]any {
	t.Helper()
	cs, _ := get(workload, "spec", "template", "spec", "containers").([]any)
	if len(cs) != 1 {
		t.Fatalf("%s: %d containers, want 1", key(workload), len(cs))
	}
	return cs[0].(map[string]any)
}

func args(t *testing.T, workload obj) []string {
	t.Helper()
	var out []string
	for _, a := range container(t, workload)["args"].([]any) {
		out = append(out, a.(string))
	}
	return out
}

// diff lists the paths where a and b differ.
func diff(path string, a, b any) []string {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		var out []string
		for _, k := range slices.Sorted(maps.Keys(merged(am, bm))) {
			out = append(out, diff(path+"."+k, am[k], bm[k])...)
		}
		return out
	}
	as, aok := a.([]any)
	bs, bok := b.([]any)
	if aok && bok && len(as) == len(bs) {
		var out []string
		for i := range as {
			out = append(out, diff(fmt.Sprintf("%s[%d]", path, i), as[i], bs[i])...)
		}
		return out
	}
	if !reflect.DeepEqual(a, b) {
		return []string{fmt.Sprintf("%s: chart %s, kustomize %s", path, short(a), short(b))}
	}
	return nil
}

func merged(a, b map[string]any) map[string]any {
	m := maps.Clone(a)
	maps.Copy(m, b)
	return m
}

func short(v any) string {
	if v == nil {
		return "(absent)"
	}
	b, _ := yaml.Marshal(v)
	s := strings.TrimSpace(string(b))
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
