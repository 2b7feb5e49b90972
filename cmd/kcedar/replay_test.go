package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kcedar/kcedar/internal/lib/safetext"
	"github.com/kcedar/kcedar/internal/testing/hostile"
)

const replayTestPolicies = `@id("dev-reads-pods")
permit (principal in k8s::Group::"dev", action in [k8s::Action::"get", k8s::Action::"list", k8s::Action::"watch"], resource is core::pods)
when { resource.namespace == "dev" };
`

// replayTestEvent is one ResponseComplete audit.k8s.io/v1 line.
func replayTestEvent(id, verb, uri, user, group, was string) string {
	ev := map[string]any{"kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "Metadata", "auditID": id, "stage": "ResponseComplete",
		"requestURI": uri, "verb": verb, "user": map[string]any{"username": user, "groups": []string{group, "system:authenticated"}},
		"responseStatus": map[string]any{"code": 200}, "annotations": map[string]string{"authorization.k8s.io/decision": was}}
	data, _ := json.Marshal(ev)
	return string(data) + "\n"
}

// The exit codes --help promises: 0 done, 1 invalid policies, 2 usage or
// I/O error (after the summary), 3 with --exit-code on a change; 2 wins
// over 3. Requests kcedar never sees are left out by default (the
// matchConditions kcedar manifests writes).
func TestReplayExitCodes(t *testing.T) {
	dir := t.TempDir()
	pol := writeFile(t, dir, "p.cedar", replayTestPolicies)
	bad := writeFile(t, dir, "bad.cedar", `permit (principal, action, resource is core::nosuchthing);`)
	crd := writeFile(t, dir, "crd.cedar", `permit (principal, action == k8s::Action::"get", resource is dev::kcedar::cedarpolicies);`)
	same := writeFile(t, dir, "same.log", replayTestEvent("u1", "get", "/api/v1/namespaces/dev/pods/web", "carol", "dev", "allow")+
		replayTestEvent("k1", "list", "/api/v1/endpoints", "system:serviceaccount:kube-system:coredns", "system:serviceaccounts", "allow")+
		replayTestEvent("m1", "delete", "/api/v1/namespaces/dev/pods/web", "root", "system:masters", "allow"))
	changed := writeFile(t, dir, "changed.log", replayTestEvent("d1", "get", "/api/v1/namespaces/prod/pods/web", "carol", "dev", "allow"))
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	_, _ = zw.Write([]byte(strings.Repeat(replayTestEvent("d2", "get", "/api/v1/namespaces/prod/pods/web", "carol", "dev", "allow"), 50)))
	_ = zw.Close()
	cut := filepath.Join(dir, "cut.log.gz")
	if err := os.WriteFile(cut, zipped.Bytes()[:zipped.Len()/2], 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"unchanged", []string{"--audit-log", same, "-p", pol}, 0, []string{"not seen by kcedar (left out): 2",
			"user in group system:masters", "request.user.matches('^system:serviceaccount:kube-system:", "compared with the decision annotation: 1 (1 unchanged"}},
		{"changed, no --exit-code", []string{"--audit-log", changed, "-p", pol}, 0, []string{"newly denied: 1"}},
		{"changed", []string{"--audit-log", changed, "-p", pol, "--exit-code"}, 3, []string{"1 newly denied, 0 newly allowed"}},
		{"invalid policies", []string{"--audit-log", same, "-p", bad}, 1, nil},
		{"policies of a live schema", []string{"--audit-log", same, "-p", crd}, 1, []string{"unknown entity type", "give the --kubeconfig the policies were converted with"}},
		{"no --audit-log", []string{"-p", pol}, 2, []string{"give at least one --audit-log"}},
		{"a directory", []string{"--audit-log", dir, "--audit-log", same, "-p", pol}, 2, []string{"is a directory, not an audit log file", "unchanged:    1"}},
		{"a missing file", []string{"--audit-log", filepath.Join(dir, "nope.log"), "-p", pol}, 2, []string{"no such file or directory"}},
		{"a truncated gzip", []string{"--audit-log", cut, "-p", pol, "--exit-code"}, 2, []string{"truncated gzip stream: read", "1 --audit-log input(s) not read to the end"}},
		{"a bad --authorization-config", []string{"--audit-log", same, "-p", pol, "--authorization-config", same}, 2, []string{"--authorization-config"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, code := run(t, newReplayCmd(), tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d:\n%s", code, tc.code, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

// --authorization-config takes the API server's file: without
// matchConditions, only system:masters is left out.
func TestReplayAuthorizationConfig(t *testing.T) {
	dir := t.TempDir()
	pol := writeFile(t, dir, "p.cedar", replayTestPolicies)
	log := writeFile(t, dir, "a.log", replayTestEvent("k1", "list", "/api/v1/endpoints", "system:serviceaccount:kube-system:coredns", "system:serviceaccounts", "allow"))
	cfg := writeFile(t, dir, "authz.yaml", `apiVersion: apiserver.config.k8s.io/v1
kind: AuthorizationConfiguration
authorizers:
- type: Webhook
  name: cedar
  webhook:
    timeout: 3s
    subjectAccessReviewVersion: v1
    matchConditionSubjectAccessReviewVersion: v1
    failurePolicy: NoOpinion
    authorizedTTL: 30s
    unauthorizedTTL: 30s
    connectionInfo: {type: InClusterConfig}
- type: RBAC
  name: rbac
`)
	out, code := run(t, newReplayCmd(), "--audit-log", log, "-p", pol, "--authorization-config", cfg)
	if code != 0 || !strings.Contains(out, "not seen by kcedar (left out): 0") || !strings.Contains(out, "newly denied: 1") {
		t.Errorf("exit %d:\n%s", code, out)
	}
	out, code = run(t, newReplayCmd(), "--audit-log", log, "-p", pol, "--authorization-config", cfg, "--authorizer-name", "kcedar")
	if code != 2 || !strings.Contains(out, `no webhook authorizer named "kcedar"`) {
		t.Errorf("exit %d:\n%s", code, out)
	}
}

// replay --changes (text) and the summary quote names from the audit log:
// users, auditIDs, object names. A name carrying terminal escapes (erase a
// line, move up, OSC 8 links), carriage returns, backspaces, the
// right-to-left override or newlines must not reach the terminal raw, nor
// add a line to the review: each changed request stays on its own line,
// every name shown escaped.
func TestReplayChangesEscapeNames(t *testing.T) {
	dir := t.TempDir()
	pol := writeFile(t, dir, "p.cedar", replayTestPolicies)
	var log strings.Builder
	for i, name := range hostile.Names {
		id := fmt.Sprintf("id%d-%s", i, name)
		log.WriteString(replayTestEvent(id, "get", "/api/v1/namespaces/prod/pods/"+url.PathEscape(name), name, "dev", "allow"))
	}
	logFile := writeFile(t, dir, "hostile.log", log.String())
	out, code := run(t, newReplayCmd(), "--audit-log", logFile, "-p", pol, "--changes")
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if r := hostile.RawControl(out, true); r != "" {
		t.Fatalf("the review holds %s raw:\n%q", r, out)
	}
	_, changes, ok := strings.Cut(out, "\nchanged requests:\n")
	if !ok {
		t.Fatalf("no changed requests listed:\n%s", out)
	}
	lines := strings.Split(strings.TrimSuffix(changes, "\n"), "\n")
	if len(lines) != len(hostile.Names) {
		t.Fatalf("%d lines of changed requests for %d requests:\n%s", len(lines), len(hostile.Names), changes)
	}
	for _, name := range hostile.Names {
		// JSON holds UTF-8: the log carries a name's invalid bytes as U+FFFD.
		shown := safetext.Terminal(strings.ToValidUTF8(name, "\uFFFD"))
		if !strings.Contains(changes, "user="+shown+" ") {
			t.Errorf("user %q is not shown as %q:\n%s", name, shown, changes)
		}
	}
	if !strings.Contains(out, "user="+safetext.Terminal(hostile.Names[0])+" verb=get") {
		t.Errorf("the summary's groups do not show the user escaped:\n%s", out)
	}
}
