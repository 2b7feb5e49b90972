package replay

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// manifestsReach is the AuthorizationConfiguration kcedar manifests
// writes with its defaults (cmd/kcedar tests that the two agree).
const manifestsReach = `apiVersion: apiserver.config.k8s.io/v1
kind: AuthorizationConfiguration
authorizers:
- type: Node
  name: node
- type: Webhook
  name: kcedar
  webhook:
    timeout: 3s
    subjectAccessReviewVersion: v1
    matchConditionSubjectAccessReviewVersion: v1
    failurePolicy: Deny
    authorizedTTL: 30s
    unauthorizedTTL: 30s
    connectionInfo: {type: KubeConfigFile, kubeConfigFile: /etc/kubernetes/kcedar-webhook.kubeconfig}
    matchConditions:
    - expression: request.user != 'system:serviceaccount:kcedar-system:kcedar'
    - expression: "!has(request.groups) || !('system:masters' in request.groups)"
    - expression: "!has(request.groups) || !('system:nodes' in request.groups)"
    - expression: "!request.user.startsWith('system:serviceaccount:kube-system:')"
    - expression: "!(request.user in ['system:kube-controller-manager', 'system:kube-scheduler', 'system:kube-proxy', 'system:apiserver'])"
- type: RBAC
  name: rbac
`

// usableSkips are the skip reasons that are not a usable event skipped:
// another stage of a request decided once, a request never authorized, an
// apiVersion replay does not read.
var usableSkips = []string{
	"stage RequestReceived",
	"stage ResponseStarted, paired with the ResponseComplete",
	"no decision annotation, response code 401",
	"apiVersion audit.k8s.io/v1alpha1 not supported",
}

// TestCorpus replays logs in the shapes of published ones (written here,
// see testdata/corpus): every event with a decision to compare is decided,
// every skip and every foreign record names what it saw, and no usable
// event is skipped.
func TestCorpus(t *testing.T) {
	reach, err := NewReach([]byte(manifestsReach), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		file string
		want Summary
	}{
		{"v1beta1-1.10-no-decision.jsonl", Summary{Lines: 9, Events: 9, Requests: 7, NotSeen: 2, Decided: 5, Unchanged: 5,
			ByResponseCode: Comparisons{Decided: 5, Unchanged: 5}}},
		{"kind-only-and-v1beta1.jsonl", Summary{Lines: 7, Events: 6, Foreign: 1, Requests: 5, Decided: 5, Unchanged: 4, NewlyAllowed: 1}},
		{"gke-cloud-audit.jsonl", Summary{Lines: 3, Foreign: 3}},
		{"azure-diagnostic.jsonl", Summary{Lines: 5, Events: 3, Foreign: 2, Requests: 3, NotSeen: 1, Decided: 2, Unchanged: 2}},
		{"eventlist-webhook.jsonl", Summary{Lines: 4, Events: 4, Requests: 3, Decided: 3, Unchanged: 3,
			ByResponseCode: Comparisons{Decided: 1, Unchanged: 1}}},
		{"response-started.jsonl", Summary{Lines: 10, Events: 10, Requests: 6, NotSeen: 1, Decided: 5, Unchanged: 4, NewlyAllowed: 1, DecidedAtResponseStarted: 4}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", "corpus", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			s, _ := replay(t, testPolicies, Options{Reach: reach}, data)
			got := [...]int{s.Lines, s.Events, s.Foreign, s.Requests, s.NotSeen, s.Decided, s.Unchanged, s.NewlyDenied, s.NewlyAllowed,
				s.DecidedAtResponseStarted, s.ByResponseCode.Decided, s.ByResponseCode.Unchanged, s.Conditional, s.Undecidable, s.Malformed}
			w := tc.want
			want := [...]int{w.Lines, w.Events, w.Foreign, w.Requests, w.NotSeen, w.Decided, w.Unchanged, w.NewlyDenied, w.NewlyAllowed,
				w.DecidedAtResponseStarted, w.ByResponseCode.Decided, w.ByResponseCode.Unchanged, w.Conditional, w.Undecidable, w.Malformed}
			if got != want {
				t.Errorf("counts (lines events foreign requests notSeen decided unchanged denied allowed atStarted byCode byCodeUnchanged conditional undecidable malformed)\n got %v\nwant %v\nskipped %v\nforeign %v\nnot seen %v", got, want, s.Skipped, s.ForeignWhy, s.NotSeenWhy)
			}
			checkSkipsNamed(t, s)
			t.Logf("%s: %d lines, %d audit events, %d foreign, %d requests, %d not seen by kcedar, %d decided (%d by response code, %d at ResponseStarted), %d skipped",
				tc.file, s.Lines, s.Events, s.Foreign, s.Requests, s.NotSeen, s.Decided, s.ByResponseCode.Decided, s.DecidedAtResponseStarted, skippedCount(s))
		})
	}
}

// checkSkipsNamed fails on a skip that drops a usable event, or a foreign
// record that does not say what it is.
func checkSkipsNamed(t *testing.T, s *Summary) {
	t.Helper()
	for why := range s.Skipped {
		ok := false
		for _, prefix := range usableSkips {
			ok = ok || strings.HasPrefix(why, prefix)
		}
		if !ok {
			t.Errorf("skipped a usable event: %q", why)
		}
	}
	for why := range s.ForeignWhy {
		if !strings.HasPrefix(why, "GKE Cloud Audit Log record") && !strings.HasPrefix(why, "Azure diagnostic record") && !strings.HasPrefix(why, "not an audit event: JSON") {
			t.Errorf("a foreign record not named: %q", why)
		}
	}
}

func skippedCount(s *Summary) int {
	n := 0
	for _, c := range s.Skipped {
		n += c
	}
	return n
}
