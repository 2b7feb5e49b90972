package helm

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	promql "github.com/prometheus/prometheus/promql/parser"
)

const monitoringValues = `
metrics: {serviceMonitor: {enabled: true}, prometheusRule: {enabled: true}, dashboard: {enabled: true}}
`

// TestMonitoringMatchesKustomize renders the chart's monitoring and
// deploy/components/monitoring on top of deploy/overlays/deployment, and
// compares the objects field by field (the normalizations of
// normalizeHelmConventions, plus the ServiceMonitor's selector: the
// release label, for the same reason as the workloads').
func TestMonitoringMatchesKustomize(t *testing.T) {
	kust := kustomizeBuild(t, monitoringOverlay(t))
	chart := mustRenderChart(t, "kcedar", "kcedar-system", values(t, sameAsDeployValues+monitoringValues)).objects
	for _, o := range chart {
		normalizeHelmConventions(t, o, "kcedar", "0.1.0", "latest")
		if o["kind"] == "ServiceMonitor" {
			dropLabels(t, key(o)+" selector", mapAt(o, "spec", "selector", "matchLabels"), map[string]string{"app.kubernetes.io/instance": "kcedar"})
		}
	}
	c, k := byKey(chart), byKey(kust)
	for _, name := range []string{"Service kcedar-system/kcedar-metrics", "ServiceMonitor kcedar-system/kcedar",
		"PrometheusRule kcedar-system/kcedar", "ConfigMap kcedar-system/kcedar-dashboard"} {
		if c[name] == nil || k[name] == nil {
			t.Errorf("%s: in the chart %v, in deploy/components/monitoring %v", name, c[name] != nil, k[name] != nil)
			continue
		}
		for _, d := range diff(name, c[name], k[name]) {
			t.Errorf("chart and deploy/components/monitoring differ: %s", d)
		}
	}
}

// monitoringOverlay writes an overlay of the Deployment with the monitoring
// component, in a copy of deploy/, and returns its directory.
func monitoringOverlay(t *testing.T) string {
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
	k := "resources:\n- ../deploy/overlays/deployment\ncomponents:\n- ../deploy/components/monitoring\n"
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	return overlay
}

// TestServiceMonitorSelectsMetricsService checks, in the chart (two
// releases side by side) and in the kustomize component, that the
// ServiceMonitor selects the metrics Service and only it, on a port the
// Service has, and that the Service selects kcedar's pods on a named port
// of the container.
func TestServiceMonitorSelectsMetricsService(t *testing.T) {
	chart := mustRenderChart(t, "kcedar", "kcedar-system", values(t, monitoringValues)).objects
	other := mustRenderChart(t, "other", "kcedar-system", values(t, monitoringValues)).objects
	checkScrape(t, "chart", chart, "kcedar-metrics", "kcedar")
	checkScrape(t, "chart", other, "other-kcedar-metrics", "other-kcedar")
	if selects(find(t, chart, "ServiceMonitor", "kcedar"), find(t, other, "Service", "other-kcedar-metrics")) {
		t.Error("release kcedar's ServiceMonitor selects release other's metrics Service")
	}
	if selects(find(t, chart, "ServiceMonitor", "kcedar"), find(t, chart, "Service", "kcedar")) {
		t.Error("the ServiceMonitor selects the webhook Service too (every target scraped twice)")
	}
	checkScrape(t, "kustomize", kustomizeBuild(t, monitoringOverlay(t)), "kcedar-metrics", "kcedar")
}

func checkScrape(t *testing.T, what string, objs []obj, service, workload string) {
	t.Helper()
	sm, svc, d := find(t, objs, "ServiceMonitor", strings.TrimSuffix(service, "-metrics")), find(t, objs, "Service", service), find(t, objs, "Deployment", workload)
	if !selects(sm, svc) {
		t.Errorf("%s: ServiceMonitor selector %v does not match the Service's labels %v", what, get(sm, "spec", "selector"), get(svc, "metadata", "labels"))
	}
	if ns := get(sm, "spec", "namespaceSelector", "matchNames").([]any); !slices.Contains(ns, any(str(svc, "metadata", "namespace"))) {
		t.Errorf("%s: ServiceMonitor namespaces %v lack the Service's", what, ns)
	}
	var ports []string
	for _, p := range get(svc, "spec", "ports").([]any) {
		ports = append(ports, str(p, "name"))
		var names []string
		for _, cp := range container(t, d)["ports"].([]any) {
			names = append(names, str(cp, "name"))
		}
		if !slices.Contains(names, str(p, "targetPort")) {
			t.Errorf("%s: Service port %v targets %q, not a container port %v", what, p, str(p, "targetPort"), names)
		}
	}
	for _, e := range get(sm, "spec", "endpoints").([]any) {
		if !slices.Contains(ports, str(e, "port")) || str(e, "scheme") != "https" || str(e, "path") != "/metrics" {
			t.Errorf("%s: endpoint %v: want https /metrics on one of %v", what, e, ports)
		}
	}
	podLabels := mapAt(d, "spec", "template", "metadata", "labels")
	for k, v := range mapAt(svc, "spec", "selector") {
		if podLabels[k] != v {
			t.Errorf("%s: Service selector %s=%v does not match the pods' labels %v", what, k, v, podLabels)
		}
	}
}

func selects(sm, svc obj) bool {
	sel := mapAt(sm, "spec", "selector", "matchLabels")
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if mapAt(svc, "metadata", "labels")[k] != v {
			return false
		}
	}
	return true
}

// expression is one PromQL expression and where it comes from.
type expression struct{ where, expr string }

// monitoringExpressions are the alerts' expressions and the dashboard's
// queries, with Grafana's variables replaced by what Grafana substitutes.
func monitoringExpressions(t *testing.T, objs []obj) []expression {
	t.Helper()
	var out []expression
	for _, g := range get(find(t, objs, "PrometheusRule", "kcedar"), "spec", "groups").([]any) {
		for _, r := range get(g, "rules").([]any) {
			out = append(out, expression{"alert " + str(r, "alert"), str(r, "expr")})
		}
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal([]byte(str(find(t, objs, "ConfigMap", "kcedar-dashboard"), "data", "kcedar-dashboard.json")), &dash); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	grafana := strings.NewReplacer("$__rate_interval", "1m", "$namespace", ".*")
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			out = append(out, expression{"panel " + p.Title, grafana.Replace(tg.Expr)})
		}
	}
	return out
}

// TestMonitoringQueries parses every alert expression and dashboard query
// with Prometheus's PromQL parser, and checks that every metric they read
// is one kcedar defines (up, which Prometheus writes for every target, is
// the one exception), and that every alert selects the metrics Service's
// job.
func TestMonitoringQueries(t *testing.T) {
	objs := mustRenderChart(t, "kcedar", "kcedar-system", values(t, monitoringValues)).objects
	known := kcedarMetricNames(t)
	p := promql.NewParser(promql.Options{})
	used := map[string]bool{}
	exprs := monitoringExpressions(t, objs)
	for _, e := range exprs {
		node, err := p.ParseExpr(e.expr)
		if err != nil {
			t.Errorf("%s: %q does not parse: %v", e.where, e.expr, err)
			continue
		}
		promql.Inspect(node, func(n promql.Node, _ []promql.Node) error {
			vs, ok := n.(*promql.VectorSelector)
			if !ok {
				return nil
			}
			used[vs.Name] = true
			if vs.Name != "up" && !known[vs.Name] {
				t.Errorf("%s reads %s, which kcedar does not define", e.where, vs.Name)
			}
			if strings.HasPrefix(e.where, "alert ") && !hasMatcher(vs.LabelMatchers, "job", "kcedar-metrics") {
				t.Errorf("%s: %s does not select job=\"kcedar-metrics\"", e.where, vs.Name)
			}
			return nil
		})
	}
	if len(exprs) < 20 || len(used) < 15 {
		t.Fatalf("%d expressions reading %d metrics: too few for the check to mean anything", len(exprs), len(used))
	}
	t.Logf("%d expressions read %d metrics of the %d kcedar defines", len(exprs), len(used), len(known))
}

func hasMatcher(ms []*labels.Matcher, name, value string) bool {
	return slices.ContainsFunc(ms, func(m *labels.Matcher) bool {
		return m.Name == name && m.Type == labels.MatchEqual && m.Value == value
	})
}

// kcedarMetricNames reads the names of the metrics kcedar's production code
// defines: every Name of a prometheus CounterOpts, GaugeOpts, HistogramOpts
// or SummaryOpts literal (histograms and summaries with their _bucket,
// _count and _sum series). The e2e test checks the same names against a
// running kcedar's /metrics.
func kcedarMetricNames(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(repoRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); p != repoRoot && (n == "test" || n == "testdata" || n == "hack" || strings.HasPrefix(n, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			addMetricName(n, names)
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !names["kcedar_decisions_total"] || !names["kcedar_decision_duration_seconds_bucket"] || len(names) < 25 {
		t.Fatalf("found %d metric names %v: the scan is broken", len(names), names)
	}
	return names
}

func addMetricName(n ast.Node, names map[string]bool) {
	lit, ok := n.(*ast.CompositeLit)
	if !ok {
		return
	}
	sel, ok := lit.Type.(*ast.SelectorExpr)
	if !ok || !slices.Contains([]string{"CounterOpts", "GaugeOpts", "HistogramOpts", "SummaryOpts"}, sel.Sel.Name) {
		return
	}
	for _, e := range lit.Elts {
		kv, ok := e.(*ast.KeyValueExpr)
		if !ok || kv.Key.(*ast.Ident).Name != "Name" {
			continue
		}
		s, ok := kv.Value.(*ast.BasicLit)
		if !ok {
			continue
		}
		name, _ := strconv.Unquote(s.Value)
		names[name] = true
		if sel.Sel.Name == "HistogramOpts" || sel.Sel.Name == "SummaryOpts" {
			names[name+"_bucket"], names[name+"_count"], names[name+"_sum"] = true, true, true
		}
	}
}

// TestMonitoringNeedsPrometheusOperatorCRDs checks that the ServiceMonitor
// and the PrometheusRule, rendered for a cluster without the Prometheus
// operator's CRDs, fail with a message that names the value, the API and
// what to do, instead of an install that fails on an unknown kind; that
// they render where the cluster serves monitoring.coreos.com/v1; and that
// the metrics Service and the dashboard (core objects) need nothing.
func TestMonitoringNeedsPrometheusOperatorCRDs(t *testing.T) {
	for value, kind := range map[string]string{"serviceMonitor": "ServiceMonitor", "prometheusRule": "PrometheusRule"} {
		vals := values(t, "metrics: {"+value+": {enabled: true}}")
		_, err := renderChartFor("kcedar", "kcedar-system", vals, nil)
		for _, want := range []string{"metrics." + value + ".enabled", kind, "monitoring.coreos.com/v1", "Prometheus Operator's CRDs", "--api-versions"} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s without the CRDs: error %v, want one naming %q", value, err, want)
			}
		}
		objs := mustRenderChart(t, "kcedar", "kcedar-system", vals).objects
		find(t, objs, kind, "kcedar")
	}
	objs, err := renderChartFor("kcedar", "kcedar-system", values(t, "metrics: {service: {enabled: true}, dashboard: {enabled: true}}"), nil)
	if err != nil {
		t.Fatalf("the metrics Service and the dashboard without the CRDs: %v", err)
	}
	find(t, objs.objects, "Service", "kcedar-metrics")
	find(t, objs.objects, "ConfigMap", "kcedar-dashboard")
}
