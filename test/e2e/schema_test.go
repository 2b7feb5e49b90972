//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/openapi"

	"github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/testing/crdtest"
	"github.com/kcedar/kcedar/test/e2e/framework"
)

// liveExportBudget is the bound for `kcedar schema export` against a
// live cluster with the test CRDs installed. Under the race detector (make e2e),
// KcedarBinary builds kcedar with -race too, which makes it about ten times
// slower; the budget scales accordingly and the plain number is measured by
// `go test -tags e2e` without -race.
const liveExportBudget = 3 * time.Second

// raceBuild reports whether this test binary (and so the kcedar binary
// KcedarBinary builds) runs under the race detector.
func raceBuild() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" && s.Value == "true" {
			return true
		}
	}
	return false
}

// TestSchemaExportLive installs the schemagen test CRDs (cert-manager
// Certificate, Gateway API HTTPRoute, Argo CD Application, a Crossplane claim)
// into a real kube-apiserver, waits until their OpenAPI v3 is published, runs
// `kcedar schema export --kubeconfig` and checks that every served version of
// every CRD is typed, and that the live export agrees with what the unit
// tests generate offline for the same CRDs.
func TestSchemaExportLive(t *testing.T) {
	c := framework.Start(t, framework.Options{})
	crds, err := crdtest.Load("../../internal/schemagen/testdata/crds")
	if err != nil {
		t.Fatal(err)
	}
	if len(crds) < 4 {
		t.Fatalf("only %d test CRDs", len(crds))
	}
	installCRDs(t, c, crds)

	bin := framework.KcedarBinary(t)
	dir := t.TempDir()
	cedarFile, jsonFile := filepath.Join(dir, "schema.cedarschema"), filepath.Join(dir, "schema.json")

	// Warm up (page cache, apiserver's OpenAPI caches), then time a run.
	runKcedar(t, bin, "schema", "export", "--kubeconfig", c.Kubeconfig, "--file", cedarFile)
	start := time.Now()
	stderr := runKcedar(t, bin, "schema", "export", "--kubeconfig", c.Kubeconfig, "--file", cedarFile, "--verbose")
	elapsed := time.Since(start)
	t.Logf("kcedar schema export --kubeconfig (4 CRDs): %v\n%s", elapsed.Round(time.Millisecond), firstLines(stderr, 14))
	budget := liveExportBudget
	if raceBuild() {
		budget *= 10
		t.Logf("race detector: kcedar is instrumented, budget %v", budget)
	}
	if elapsed > budget {
		t.Errorf("export from the live cluster took %v, budget %v", elapsed, budget)
	}
	runKcedar(t, bin, "schema", "export", "--kubeconfig", c.Kubeconfig, "-o", "json", "--file", jsonFile)

	// In-process timing of the two halves, for the record.
	fetchStart := time.Now()
	docs, err := schemagen.FetchLiveContext(context.Background(), c.AdminConfig)
	if err != nil {
		t.Fatal(err)
	}
	fetched := time.Since(fetchStart)
	genStart := time.Now()
	if _, err := schemagen.Generate(docs); err != nil {
		t.Fatal(err)
	}
	t.Logf("in process: fetch %v, generate %v", fetched.Round(time.Millisecond), time.Since(genStart).Round(time.Millisecond))

	text, err := os.ReadFile(cedarFile)
	if err != nil {
		t.Fatal(err)
	}
	js, err := os.ReadFile(jsonFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("schema size: %d bytes (Cedar), %d bytes (JSON)", len(text), len(js))
	live, err := schemagen.ParseSchema(text)
	if err != nil {
		t.Fatalf("the exported schema does not parse back: %v", err)
	}
	liveJSON, err := schemagen.ParseSchema(js)
	if err != nil {
		t.Fatalf("the exported JSON schema does not parse back: %v", err)
	}
	if !reflect.DeepEqual(live, liveJSON) {
		t.Error("the Cedar and JSON exports describe different schemas")
	}

	// Every served version of every CRD has its typed object.
	for _, crd := range crds {
		key := schemagen.ResourceKey{Group: crd.Spec.Group, Resource: crd.Spec.Names.Plural}
		r, ok := live.Lookup(key.Group, key.Resource, "")
		if !ok {
			t.Errorf("%s: no entity in the live schema", crd.Name)
			continue
		}
		if r.EntityType != schemagen.ResourceEntityType(key.Group, key.Resource, "") {
			t.Errorf("%s: entity type %s", crd.Name, r.EntityType)
		}
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			ov, ok := r.Versions[v.Name]
			if !ok {
				t.Errorf("%s: version %s missing", crd.Name, v.Name)
				continue
			}
			if ov.APIVersion != key.Group+"/"+v.Name || ov.Kind != crd.Spec.Names.Kind {
				t.Errorf("%s %s: object %s %s", crd.Name, v.Name, ov.APIVersion, ov.Kind)
			}
			// Each top-level property of the CRD schema is typed (or reported).
			for prop := range v.Schema.OpenAPIV3Schema.Properties {
				if prop == "apiVersion" || prop == "kind" || prop == "metadata" {
					continue
				}
				if _, ok := ov.Fields.Attributes[prop]; !ok {
					t.Errorf("%s %s: %s is not typed", crd.Name, v.Name, prop)
				}
			}
			if v.Subresources != nil && v.Subresources.Status != nil {
				if _, ok := live.Lookup(key.Group, key.Resource, "status"); !ok {
					t.Errorf("%s: no status subresource entity", crd.Name)
				}
			}
		}
	}
	for _, c := range []struct {
		group, resource, version string
		path                     []string
		want                     any
	}{
		{"cert-manager.io", "certificates", "v1", []string{"spec", "privateKey", "size"}, schemagen.LongType{}},
		{"cert-manager.io", "certificates", "v1beta1", []string{"spec", "keyAlgorithm"}, schemagen.StringType{}},
		{"cert-manager.io", "certificates", "v1", []string{"status", "notAfter"}, schemagen.DatetimeType{}},
		{"gateway.networking.k8s.io", "httproutes", "v1", []string{"spec", "rules", "[]", "matches", "[]", "headers", "[]", "value"}, schemagen.StringType{}},
		{"gateway.networking.k8s.io", "httproutes", "v1beta1", []string{"spec", "parentRefs", "[]", "port"}, schemagen.LongType{}},
		{"argoproj.io", "applications", "v1alpha1", []string{"spec", "source", "kustomize", "replicas", "[]", "count"}, schemagen.StringType{}},
		{"argoproj.io", "applications", "v1alpha1", []string{"status", "history", "[]", "id"}, schemagen.LongType{}},
		{"database.example.org", "postgresqlinstances", "v1alpha1", []string{"spec", "parameters", "storageGB"}, schemagen.LongType{}},
		{"database.example.org", "postgresqlinstances", "v1beta1", []string{"spec", "parameters", "databases", "{}", "owner"}, schemagen.StringType{}},
	} {
		got, err := walk(live, live.Resources[schemagen.ResourceKey{Group: c.group, Resource: c.resource}].Versions[c.version].Fields, c.path)
		if err != nil {
			t.Errorf("%s %s: %v", c.resource, c.version, err)
		} else if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s %s %s: %#v, want %#v", c.resource, c.version, strings.Join(c.path, "."), got, c.want)
		}
	}
	if !strings.Contains(string(text), "namespace io::cert_manager {") || !strings.Contains(string(text), "namespace io::k8s::networking::gateway {") {
		t.Error("CRD group namespaces missing from the Cedar text")
	}

	// The unit tests' offline emulation of the apiserver (crdtest) gives the
	// same CRD entities as the live cluster.
	offlineDocs, err := schemagen.Default()
	if err != nil {
		t.Fatal(err)
	}
	groups, openapiDocs, err := crdtest.Publish(crds)
	if err != nil {
		t.Fatal(err)
	}
	offlineDocs.APIs.Items = append(offlineDocs.APIs.Items, groups...)
	for p, d := range openapiDocs {
		offlineDocs.OpenAPI[p] = d
	}
	offline, err := schemagen.Generate(offlineDocs)
	if err != nil {
		t.Fatal(err)
	}
	for _, crd := range crds {
		for _, sub := range []string{"", "status"} {
			key := schemagen.ResourceKey{Group: crd.Spec.Group, Resource: crd.Spec.Names.Plural, Subresource: sub}
			lr, or := live.Resources[key], offline.Resources[key]
			if lr == nil && or == nil {
				continue // no such subresource
			}
			if lr == nil || or == nil {
				t.Errorf("%v: missing from the live (%v) or offline (%v) schema", key, lr != nil, or != nil)
				continue
			}
			// Short names and categories come from discovery, which the
			// offline documents (built from the CRD objects) do not all carry.
			l, o := *lr, *or
			l.Names, o.Names = schemagen.Names{}, schemagen.Names{}
			if !reflect.DeepEqual(l, o) {
				t.Errorf("%v: the live schema differs from the offline one", key)
			}
		}
	}
	offlineText, _ := offline.MarshalCedar()
	t.Logf("live export identical to the offline default+CRDs schema: %v", bytes.Equal(offlineText, text))
}

// TestSchemaCaptureLive captures a live cluster's documents and exports from
// the directory: the same schema as the live export.
func TestSchemaCaptureLive(t *testing.T) {
	c := framework.Start(t, framework.Options{})
	bin := framework.KcedarBinary(t)
	dir := t.TempDir()
	runKcedar(t, bin, "schema", "capture", "--kubeconfig", c.Kubeconfig, "--output-dir", filepath.Join(dir, "docs"))
	runKcedar(t, bin, "schema", "export", "--from-dir", filepath.Join(dir, "docs"), "--file", filepath.Join(dir, "from-dir.cedarschema"))
	runKcedar(t, bin, "schema", "export", "--kubeconfig", c.Kubeconfig, "--file", filepath.Join(dir, "live.cedarschema"))
	runKcedar(t, bin, "schema", "export", "--file", filepath.Join(dir, "default.cedarschema"))
	a, _ := os.ReadFile(filepath.Join(dir, "from-dir.cedarschema"))
	b, _ := os.ReadFile(filepath.Join(dir, "live.cedarschema"))
	d, _ := os.ReadFile(filepath.Join(dir, "default.cedarschema"))
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Error("export --from-dir of a capture differs from the live export")
	}
	// A stock v1.37 apiserver is what the embedded default was captured from.
	t.Logf("live export identical to the embedded default: %v", bytes.Equal(b, d))
}

func installCRDs(t *testing.T, c *framework.Cluster, crds []*apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	ctx := context.Background()
	client, err := apiextensionsclient.NewForConfig(c.AdminConfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, crd := range crds {
		if _, err := client.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd.DeepCopy(), metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating %s: %v", crd.Name, err)
		}
	}
	dc, err := discovery.NewDiscoveryClientForConfig(c.AdminConfig)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		for _, crd := range crds {
			got, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			established := false
			for _, cond := range got.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					established = true
				}
			}
			if !established {
				return false, nil
			}
		}
		ok, err := openAPIPublished(ctx, dc, crds)
		if err != nil {
			t.Logf("waiting for OpenAPI v3: %v", err)
		}
		return ok, nil
	})
	if err != nil {
		t.Fatalf("CRDs not established with published OpenAPI v3 after %v: %v", time.Since(start), err)
	}
	t.Logf("CRDs established and published in %v", time.Since(start).Round(time.Millisecond))
}

// openAPIPublished reports whether every served version of every CRD is in
// aggregated discovery and its kind is defined in the OpenAPI v3 document of
// its group version.
func openAPIPublished(ctx context.Context, dc *discovery.DiscoveryClient, crds []*apiextensionsv1.CustomResourceDefinition) (bool, error) {
	paths, err := openapi.ToClientWithContext(dc.OpenAPIV3()).PathsWithContext(ctx)
	if err != nil {
		return false, err
	}
	for _, crd := range crds {
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			gv, ok := paths["apis/"+crd.Spec.Group+"/"+v.Name]
			if !ok {
				return false, nil
			}
			data, err := gv.SchemaWithContext(ctx, "application/json")
			if err != nil {
				return false, err
			}
			var doc struct {
				Components struct {
					Schemas map[string]struct {
						GVK []struct{ Group, Version, Kind string } `json:"x-kubernetes-group-version-kind"`
					} `json:"schemas"`
				} `json:"components"`
			}
			if err := json.Unmarshal(data, &doc); err != nil {
				return false, err
			}
			found := false
			for _, s := range doc.Components.Schemas {
				found = found || slices.ContainsFunc(s.GVK, func(g struct{ Group, Version, Kind string }) bool {
					return g.Group == crd.Spec.Group && g.Version == v.Name && g.Kind == crd.Spec.Names.Kind
				})
			}
			if !found {
				return false, nil
			}
			res, err := dc.ServerResourcesForGroupVersion(crd.Spec.Group + "/" + v.Name)
			if err != nil {
				return false, nil
			}
			if !slices.ContainsFunc(res.APIResources, func(r metav1.APIResource) bool { return r.Name == crd.Spec.Names.Plural }) {
				return false, nil
			}
		}
	}
	return true, nil
}

// runKcedar runs the kcedar binary and returns its stderr; it fails the test
// on a non-zero exit.
func runKcedar(t *testing.T, bin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kcedar %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stderr.String()
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}

// walk follows a path of attribute names, "[]" (set elements) and "{}" (map
// values) through the model.
func walk(s *schemagen.Schema, t schemagen.Type, path []string) (schemagen.Type, error) {
	for _, p := range path {
		if r, ok := t.(*schemagen.RefType); ok {
			t = s.Definitions[r.Name]
		}
		switch p {
		case "[]":
			st, ok := t.(*schemagen.SetType)
			if !ok {
				return nil, fmt.Errorf("%s: %T is not a set", p, t)
			}
			t = st.Element
		case "{}":
			mt, ok := t.(*schemagen.MapType)
			if !ok {
				return nil, fmt.Errorf("%s: %T is not a map", p, t)
			}
			t = mt.Value
		default:
			rec, ok := t.(*schemagen.RecordType)
			if !ok {
				return nil, fmt.Errorf("%s: %T is not a record", p, t)
			}
			a, ok := rec.Attributes[p]
			if !ok {
				return nil, fmt.Errorf("no attribute %s", p)
			}
			t = a.Type
		}
	}
	return t, nil
}
