package helm

import (
	"bytes"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"sigs.k8s.io/yaml"
)

// TestLint runs helm lint (strict: warnings fail too) with the default
// values and with every optional part turned on.
func TestLint(t *testing.T) {
	for name, vals := range map[string]map[string]any{
		"defaults": nil,
		"everything on": values(t, `
kind: DaemonSet
policies: {files: {a.cedar: "permit(principal, action, resource);"}}
conditions: {enforcement: both}
metrics: {serviceMonitor: {enabled: true}, prometheusRule: {enabled: true}, dashboard: {enabled: true}}
`),
	} {
		lint := action.NewLint()
		lint.Strict, lint.Namespace = true, "kcedar-system"
		res := lint.Run([]string{chartDir}, vals)
		for _, m := range res.Messages {
			t.Logf("%s: %s", name, m)
		}
		if res.TotalChartsLinted != 1 || len(res.Errors) > 0 {
			t.Errorf("helm lint --strict (%s): %d charts linted, errors %v", name, res.TotalChartsLinted, res.Errors)
		}
	}
}

// TestSchemaRefusesWrongValues checks that values.schema.json refuses
// values of the wrong type or shape, and the templates combinations that
// cannot serve, before anything renders.
func TestSchemaRefusesWrongValues(t *testing.T) {
	for doc, want := range map[string]string{
		`replicaCount: "three"`:                           "replicaCount",
		`port: 70000`:                                     "port",
		`kind: StatefulSet`:                               "kind",
		`image: {tag: 1}`:                                 "tag",
		`policyObjects: {enabled: "yes"}`:                 "enabled",
		`extraArgs: --decision-log=-`:                     "extraArgs",
		`metrics: {serviceMonitor: {interval: soon}}`:     "interval",
		`replicas: 3`:                                     "replicas",
		`policyObjects: {enabled: false}`:                 "kcedar needs policies",
		`tls: {generate: false}`:                          "tls.existingSecret",
		`clientCA: {generate: false}`:                     "clientCA",
		`serviceAccount: {create: false}`:                 "serviceAccount.name",
		`podDisruptionBudget: {maxUnavailable: [1]}`:      "maxUnavailable",
		`policies: {files: {a.cedar: {permit: "all"}}}`:   "a.cedar",
		`metrics: {dashboard: {labels: {grafana: true}}}`: "grafana",
	} {
		_, err := renderChart("kcedar", "kcedar-system", values(t, doc))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("values %s: error %v, want one naming %q", doc, err, want)
		}
	}
	// The values the chart ships pass the schema (the control).
	c := mustRenderChart(t, "kcedar", "kcedar-system", nil)
	if len(c.objects) == 0 {
		t.Fatal("the default values render nothing")
	}
}

// TestReadmeDocumentsEveryValue checks that the README's table has a row
// for every leaf of values.yaml and that values.schema.json types each.
func TestReadmeDocumentsEveryValue(t *testing.T) {
	readme := string(readFile(t, filepath.Join(chartDir, "README.md")))
	var vals map[string]any
	if err := yaml.Unmarshal(readFile(t, filepath.Join(chartDir, "values.yaml")), &vals); err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if err := yaml.Unmarshal(readFile(t, filepath.Join(chartDir, "values.schema.json")), &schema); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, path := range documentedPaths(vals, "") {
		n++
		if !strings.Contains(readme, "| `"+path+"` |") {
			t.Errorf("charts/kcedar/README.md has no row for the value %s", path)
		}
		s := any(schema)
		for _, part := range strings.Split(path, ".") {
			s = get(s, "properties", part)
		}
		if s == nil {
			t.Errorf("values.schema.json does not describe %s", path)
		}
	}
	if n < 50 {
		t.Fatalf("%d values found: the walk is broken", n)
	}
}

// documentedPaths are the dotted paths of values: the leaves, and the maps
// a user sets as a whole (resources, security contexts, strategies, label
// maps), which the README documents as one row.
func documentedPaths(v map[string]any, prefix string) []string {
	whole := []string{"resources", "podSecurityContext", "securityContext", "deployment.strategy", "daemonSet.nodeSelector",
		"daemonSet.updateStrategy", "metrics.dashboard.labels"}
	var out []string
	for k, x := range v {
		p := prefix + k
		if m, ok := x.(map[string]any); ok && len(m) > 0 && !slices.Contains(whole, p) {
			out = append(out, documentedPaths(m, p+".")...)
			continue
		}
		out = append(out, p)
	}
	return out
}

// TestChartCRDsAreKcedars checks that the chart's copy of the CRDs is
// byte for byte deploy/'s (which test/deploy keeps identical to the ones
// kcedar embeds).
func TestChartCRDsAreKcedars(t *testing.T) {
	chart := readFile(t, filepath.Join(chartDir, "files", "crds.yaml"))
	deploy := readFile(t, filepath.Join(repoRoot, "deploy", "components", "crds-rbac", "crds.yaml"))
	if !bytes.Equal(chart, deploy) {
		t.Fatal("charts/kcedar/files/crds.yaml differs from deploy/components/crds-rbac/crds.yaml: copy it over")
	}
}

// TestGeneratedCertificates checks what the chart generates by default: a
// serving certificate for the Service's names that verifies against the CA
// in the Secret, a client certificate the client CA verifies, and a
// condition key of 32 random bytes, different on each render.
func TestGeneratedCertificates(t *testing.T) {
	r := mustRenderChart(t, "kcedar", "kcedar-system", nil)
	serving := find(t, r.objects, "Secret", "kcedar-serving-cert")
	cert, ca := parseCert(t, serving, "tls.crt"), parseCert(t, serving, "ca.crt")
	verify(t, cert, ca, "kcedar.kcedar-system.svc", x509.ExtKeyUsageServerAuth)
	client := find(t, r.objects, "Secret", "kcedar-apiserver-client")
	clientCA := parseCert(t, find(t, r.objects, "Secret", "kcedar-client-ca"), "ca.crt")
	verify(t, parseCert(t, client, "tls.crt"), clientCA, "", x509.ExtKeyUsageClientAuth)
	if _, err := x509.ParseCertificate(clientCA.Raw); err != nil || bytes.Equal(clientCA.Raw, ca.Raw) {
		t.Errorf("the client CA must be a CA of its own, not the serving CA")
	}
	if err := cert.VerifyHostname("evil.example.com"); err == nil {
		t.Error("the serving certificate verifies for any name")
	}
	key1 := conditionKey(t, r.objects)
	key2 := conditionKey(t, mustRenderChart(t, "kcedar", "kcedar-system", nil).objects)
	if key1 == key2 {
		t.Error("two renders generated the same condition key")
	}
	ds := mustRenderChart(t, "kcedar", "kcedar-system", values(t, "kind: DaemonSet")).objects
	dsServing := find(t, ds, "Secret", "kcedar-serving-cert")
	verify(t, parseCert(t, dsServing, "tls.crt"), parseCert(t, dsServing, "ca.crt"), "127.0.0.1", x509.ExtKeyUsageServerAuth)
}

func conditionKey(t *testing.T, objs []obj) string {
	t.Helper()
	line := strings.TrimSuffix(str(find(t, objs, "Secret", "kcedar-condition-keys"), "stringData", "keys"), "\n")
	id, secret, ok := strings.Cut(line, " ")
	raw, err := base64.StdEncoding.DecodeString(secret)
	if !ok || id != "k1" || err != nil || len(raw) != 32 {
		t.Fatalf("generated condition keys %q: want one line \"k1 <base64 of 32 bytes>\"", line)
	}
	return secret
}

func parseCert(t *testing.T, secret obj, field string) *x509.Certificate {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(str(secret, "data", field))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatalf("%s %s: no PEM", key(secret), field)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func verify(t *testing.T, cert, ca *x509.Certificate, name string, usage x509.ExtKeyUsage) {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: name, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
		t.Errorf("certificate %s for %q: %v", cert.Subject, name, err)
	}
}
