package helm

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/kcedar/kcedar/internal/testing/promtest"
)

// alertTests are promtool's unit tests of kcedar's alerts (`promtool test
// rules`), over the rules file rules.yaml.
var alertTests = filepath.Join("testdata", "alerts_test.yaml")

// TestAlertRules runs promtool's unit tests (testdata/alerts_test.yaml) on
// the chart's PrometheusRule and on deploy/components/monitoring's: each
// alert fires on what it is for (the counters' alerts on their first event,
// from a series at 0, which kcedar creates at start), and not on a healthy
// replica. It also checks that every alert has a test where it fires. It
// needs promtool (promtest.NewPromtool: skipped where it cannot be built,
// a failure in .ci/run).
func TestAlertRules(t *testing.T) {
	tests := readFile(t, alertTests)
	checkEveryAlertFires(t, tests)
	promtool := promtest.NewPromtool(t)
	sources := map[string]obj{
		"chart":     find(t, mustRenderChart(t, "kcedar", "kcedar-system", values(t, monitoringValues)).objects, "PrometheusRule", "kcedar"),
		"kustomize": find(t, kustomizeBuild(t, monitoringOverlay(t)), "PrometheusRule", "kcedar"),
	}
	for name, rule := range sources {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			rules, err := yaml.Marshal(map[string]any{"groups": get(rule, "spec", "groups")})
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(dir, "rules.yaml"), rules)
			writeFile(t, filepath.Join(dir, "alerts_test.yaml"), tests)
			if out, err := promtool.Run(dir, "check", "rules", "rules.yaml"); err != nil {
				t.Fatalf("promtool check rules: %v\n%s", err, out)
			}
			out, err := promtool.Run(dir, "test", "rules", "alerts_test.yaml")
			if err != nil {
				t.Fatalf("promtool test rules (%s): %v\n%s", alertTests, err, out)
			}
			t.Logf("promtool test rules:\n%s", out)
		})
	}
}

// checkEveryAlertFires checks that every alert of the chart's
// PrometheusRule has a test case where it fires (expected alerts listed).
func checkEveryAlertFires(t *testing.T, tests []byte) {
	t.Helper()
	var doc struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `json:"alertname"`
				ExpAlerts []any  `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(tests, &doc); err != nil {
		t.Fatal(err)
	}
	fires := map[string]bool{}
	for _, tc := range doc.Tests {
		for _, a := range tc.AlertRuleTest {
			fires[a.Alertname] = fires[a.Alertname] || len(a.ExpAlerts) > 0
		}
	}
	objs := mustRenderChart(t, "kcedar", "kcedar-system", values(t, monitoringValues)).objects
	var alerts []string
	for _, g := range get(find(t, objs, "PrometheusRule", "kcedar"), "spec", "groups").([]any) {
		for _, r := range get(g, "rules").([]any) {
			if a := str(r, "alert"); !slices.Contains(alerts, a) {
				alerts = append(alerts, a)
			}
		}
	}
	for _, a := range alerts {
		if !fires[a] {
			t.Errorf("%s: no test where %s fires", alertTests, a)
		}
	}
	if len(alerts) < 15 {
		t.Fatalf("%d alerts in the chart: the scan is broken", len(alerts))
	}
}

// TestCIBuildsThePinnedPromtool checks that .ci/run builds the promtool the
// tests run, so that its step fails CI when promtool cannot be built and
// the tests after it need not skip.
func TestCIBuildsThePinnedPromtool(t *testing.T) {
	ci := string(readFile(t, filepath.Join(repoRoot, ".ci", "run")))
	if !strings.Contains(ci, "go run "+promtest.PromtoolPackage+" --version") || !strings.Contains(ci, promtest.RequirePromtoolEnv+"=1") {
		t.Errorf(".ci/run does not build %s and set %s=1", promtest.PromtoolPackage, promtest.RequirePromtoolEnv)
	}
	_, version, _ := strings.Cut(promtest.PromtoolPackage, "@")
	gomod := string(readFile(t, "go.mod"))
	if !strings.Contains(gomod, "github.com/prometheus/prometheus "+version+"\n") {
		t.Errorf("promtool %s is not the Prometheus of test/helm's go.mod (its PromQL parser)", version)
	}
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
