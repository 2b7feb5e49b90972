package main

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"k8s.io/klog/v2"

	"github.com/kcedar/kcedar/internal/testing/hostile"
)

// logRecords decodes every line of logs by its msg; each line must be one
// JSON object. Other tests' clients may log through klog meanwhile, hence
// the syncBuffer.
func logRecords(t *testing.T, logs *syncBuffer) map[string]map[string]any {
	t.Helper()
	logs.mu.Lock()
	defer logs.mu.Unlock()
	out := map[string]map[string]any{}
	for line := range strings.Lines(logs.b.String()) {
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("a log line that is not kcedar's JSON: %q: %v", line, err)
		}
		msg, _ := r["msg"].(string)
		out[msg] = r
	}
	return out
}

// restoreKlogTarget points klog back at the serve logger it had before the
// test (klog itself is routed once for the whole process).
func restoreKlogTarget(t *testing.T) {
	prev := klogTarget.Load()
	t.Cleanup(func() {
		if prev != nil {
			klogTarget.Store(prev)
		}
	})
}

// TestKlogLogsThroughServeLogger: what client-go and leader election log
// through klog comes out as kcedar serve's own lines (JSON, the same keys),
// and under the same --log-level.
func TestKlogLogsThroughServeLogger(t *testing.T) {
	restoreKlogTarget(t)
	var logs syncBuffer
	logger, err := newServeLogger(&logs, "info")
	if err != nil {
		t.Fatal(err)
	}
	logger.Info("kcedar's own line", "lease", "kcedar-system/kcedar-policy-status")
	klog.InfoS("successfully acquired lease", "lease", "kcedar-system/kcedar-policy-status")
	klog.ErrorS(errors.New("connection refused"), "error retrieving resource lock")
	klog.Infof("a printf-style line %d", 7)
	klog.Background().WithValues("reflector", "namespaces").WithName("informer").Info("a contextual line", "resourceVersion", "42")
	klog.V(2).InfoS("klog's -v is 0: not logged")
	klog.Background().V(1).Info("a contextual V(1) line is below info: not logged")

	got := logRecords(t, &logs)
	own := got["kcedar's own line"]
	if own == nil {
		t.Fatalf("kcedar's own line is missing from %v", slices.Collect(maps.Keys(got)))
	}
	keys := slices.Sorted(maps.Keys(own))
	for msg, level := range map[string]string{
		"successfully acquired lease":    "INFO",
		"error retrieving resource lock": "ERROR",
		"a printf-style line 7":          "INFO",
	} {
		r := got[msg]
		if r == nil {
			t.Errorf("klog's %q did not come out through kcedar's logger: %v", msg, slices.Collect(maps.Keys(got)))
			continue
		}
		if r["level"] != level {
			t.Errorf("klog's %q: level %v, want %s", msg, r["level"], level)
		}
		for _, k := range []string{"time", "level", "msg"} {
			if _, ok := r[k]; !ok {
				t.Errorf("klog's %q lacks kcedar's key %q: %v", msg, k, r)
			}
		}
	}
	if r := got["successfully acquired lease"]; r != nil {
		if rk := slices.Sorted(maps.Keys(r)); !slices.Equal(rk, keys) {
			t.Errorf("klog's structured line has the keys %v, kcedar's own line with the same attribute %v", rk, keys)
		}
	}
	if r := got["a contextual line"]; r == nil || r["reflector"] != "namespaces" || r["resourceVersion"] != "42" {
		t.Errorf("klog's contextual line with values: %v", r)
	}
	if r := got["error retrieving resource lock"]; r != nil && r["err"] != "connection refused" {
		t.Errorf("klog's error line: err %v, want the error", r["err"])
	}
	for msg := range got {
		if strings.Contains(msg, "not logged") {
			t.Errorf("%q was logged at --log-level=info", msg)
		}
	}
}

// TestKlogFollowsLogLevel: --log-level=error keeps klog's info lines out
// and its errors in.
func TestKlogFollowsLogLevel(t *testing.T) {
	restoreKlogTarget(t)
	var logs syncBuffer
	if _, err := newServeLogger(&logs, "error"); err != nil {
		t.Fatal(err)
	}
	klog.InfoS("an info line")
	klog.ErrorS(errors.New("boom"), "an error line")
	got := logRecords(t, &logs)
	if got["an info line"] != nil {
		t.Error("klog's info line was logged at --log-level=error")
	}
	if got["an error line"] == nil {
		t.Error("klog's error line was not logged at --log-level=error")
	}
}

// TestKlogFollowsTheLatestServeLogger: a second serve logger in the same
// process (as in tests) takes klog's lines over, and so do loggers klog
// handed out before.
func TestKlogFollowsTheLatestServeLogger(t *testing.T) {
	restoreKlogTarget(t)
	var first, second syncBuffer
	if _, err := newServeLogger(&first, "info"); err != nil {
		t.Fatal(err)
	}
	before := klog.Background().WithValues("k", "v")
	if _, err := newServeLogger(&second, "info"); err != nil {
		t.Fatal(err)
	}
	klog.InfoS("after the second logger")
	before.Info("from a logger made before")
	if got := logRecords(t, &first); got["after the second logger"] != nil || got["from a logger made before"] != nil {
		t.Errorf("the first logger still gets klog's lines: %v", got)
	}
	got := logRecords(t, &second)
	if got["after the second logger"] == nil || got["from a logger made before"]["k"] != "v" {
		t.Errorf("the second logger lacks klog's lines: %v", got)
	}
}

// serve's log lines quote requests (users, names): on a terminal, none of
// their characters acts or hides, and each line still reads back as the
// value that was logged.
func TestServeLogEscapesHostileNames(t *testing.T) {
	restoreKlogTarget(t)
	var logs syncBuffer
	logger, err := newServeLogger(&logs, "info")
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range hostile.Names {
		logger.Info("hostile "+strconv.Itoa(i), "user", name)
	}
	logs.mu.Lock()
	text := logs.b.String()
	logs.mu.Unlock()
	if r := hostile.RawControl(text, true); r != "" {
		t.Fatalf("the log holds %s raw:\n%q", r, text)
	}
	got := logRecords(t, &logs)
	for i, name := range hostile.Names {
		if u, _ := got["hostile "+strconv.Itoa(i)]["user"].(string); u != strings.ToValidUTF8(name, "\uFFFD") {
			t.Errorf("user %q reads back as %q", name, u)
		}
	}
}
