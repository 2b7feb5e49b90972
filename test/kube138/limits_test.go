package kube138

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// More conditions than a ConditionsMap may hold, and conditions larger than
// a condition may be (k8s.io/apiserver pkg/authorization/authorizer:
// MaxConditionsPerMap, MaxConditionBytes, MaxConditionDescriptionBytes).
const (
	manyConditions = authorizer.MaxConditionsPerMap + 12
	bigListEntries = 1500 // a 1,500-string literal set: about 13 KiB
	midListEntries = 200  // about 1.8 KiB: over kcedar's 1 KiB, under upstream's 10 KiB
)

// limitsPolicies is a policy set whose answers are too large for the API
// server: per resource type, more than 128 allow conditions
// (configmaps), deny conditions (secrets, with an unconditional permit),
// both (pods), one allow or deny condition over 10 KiB (persistentvolumeclaims,
// services) or over 1 KiB (serviceaccounts, limitranges), a description
// over 1 KiB (resourcequotas), and policy ids that are no label keys, or in
// a domain reserved for Kubernetes (events).
func limitsPolicies() string {
	var b strings.Builder
	permit := func(id, typ, when string) {
		fmt.Fprintf(&b, "@id(%q)\npermit (principal in k8s::Group::\"team-1\", action == k8s::Action::\"create\", resource is core::%s)\nwhen { %s };\n\n", id, typ, when)
	}
	forbid := func(id, typ, when string) {
		fmt.Fprintf(&b, "@id(%q)\nforbid (principal, action == k8s::Action::\"create\", resource is core::%s)\nwhen { %s };\n\n", id, typ, when)
	}
	for i := range manyConditions {
		permit(fmt.Sprintf("many-allow-%03d", i), "configmaps", hasLabel(fmt.Sprintf("allow-%03d", i)))
		forbid(fmt.Sprintf("many-deny-%03d", i), "secrets", hasLabel(fmt.Sprintf("deny-%03d", i)))
		if i%2 == 0 {
			permit(fmt.Sprintf("mixed-allow-%03d", i), "pods", hasLabel(fmt.Sprintf("allow-%03d", i)))
		} else {
			forbid(fmt.Sprintf("mixed-deny-%03d", i), "pods", hasLabel(fmt.Sprintf("deny-%03d", i)))
		}
	}
	for _, typ := range []string{"secrets", "services", "limitranges"} {
		fmt.Fprintf(&b, "@id(\"%s-for-team-1\")\npermit (principal in k8s::Group::\"team-1\", action == k8s::Action::\"create\", resource is core::%s);\n\n", typ, typ)
	}
	permit("big-allow", "persistentvolumeclaims", labelIn("x", bigListEntries))
	forbid("big-deny", "services", labelIn("x", bigListEntries))
	permit("mid-allow", "serviceaccounts", labelIn("x", midListEntries))
	forbid("mid-deny", "limitranges", labelIn("x", midListEntries))
	fmt.Fprintf(&b, "@reason(%q)\n", strings.Repeat("a long reason; ", 200))
	permit("long-reason", "resourcequotas", hasLabel("ok"))
	for _, id := range oddPolicyIDs {
		permit(id, "events", hasLabel("ok"))
	}
	return b.String()
}

// oddPolicyIDs are policy ids that are not label keys as they are.
var oddPolicyIDs = []string{strings.Repeat("a", 300), "Team A: no host network!", "kubernetes.io/reserved", "k8s.io/mine",
	"x.k8s.io/mine", "ünïcode", "UPPER_case", "with/two/slashes", "-leading-dash", "trailing.dot."}

func hasLabel(key string) string {
	return fmt.Sprintf("resource has object && resource.object.metadata has labels && resource.object.metadata.labels.hasTag(%q)", key)
}

func labelIn(key string, n int) string {
	values := make([]string, n)
	for i := range values {
		values[i] = fmt.Sprintf("%q", fmt.Sprintf("v%04d", i))
	}
	return fmt.Sprintf("resource has object && resource.object.metadata has labels && resource.object.metadata.labels.hasTag(%q) && [%s].contains(resource.object.metadata.labels.getTag(%q))",
		key, strings.Join(values, ", "), key)
}

// limitsCase is team-1's create of a kind with labels, and whether a
// forbid holds for it (then it must never be allowed, whatever the
// answer's size made kcedar do).
type limitsCase struct {
	resource, kind string
	labels         map[string]string
	forbidden      bool
}

var limitsCases = []limitsCase{
	{"configmaps", "ConfigMap", map[string]string{"allow-000": ""}, false},
	{"configmaps", "ConfigMap", map[string]string{fmt.Sprintf("allow-%03d", manyConditions-1): ""}, false},
	{"configmaps", "ConfigMap", nil, false},
	{"secrets", "Secret", map[string]string{"deny-000": ""}, true},
	{"secrets", "Secret", map[string]string{fmt.Sprintf("deny-%03d", manyConditions-1): ""}, true},
	{"secrets", "Secret", nil, false},
	{"pods", "Pod", map[string]string{"allow-000": "", "deny-001": ""}, true},
	{"pods", "Pod", map[string]string{fmt.Sprintf("deny-%03d", manyConditions-1): ""}, true},
	{"pods", "Pod", map[string]string{fmt.Sprintf("allow-%03d", manyConditions-2): ""}, false},
	{"persistentvolumeclaims", "PersistentVolumeClaim", map[string]string{"x": "v1499"}, false},
	{"persistentvolumeclaims", "PersistentVolumeClaim", map[string]string{"x": "other"}, false},
	{"services", "Service", map[string]string{"x": "v1499"}, true},
	{"services", "Service", map[string]string{"x": "other"}, false},
	{"serviceaccounts", "ServiceAccount", map[string]string{"x": "v0199"}, false},
	{"limitranges", "LimitRange", map[string]string{"x": "v0199"}, true},
	{"limitranges", "LimitRange", map[string]string{"x": "other"}, false},
	{"resourcequotas", "ResourceQuota", map[string]string{"ok": ""}, false},
	{"events", "Event", map[string]string{"ok": ""}, false},
}

// TestAnswersOverTheLimits: answers too large for the API server (over
// 128 conditions, a condition over 10 KiB or over kcedar's 1 KiB, a
// description over 1 KiB, ids that are no label keys) are folded by kcedar,
// never rejected by upstream's validation: each decides as `kcedar
// authorize` does (harness.check), and a create a forbid holds for is
// never allowed.
func TestAnswersOverTheLimits(t *testing.T) {
	enableConditionalAuthorization(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "limits.cedar"), []byte(limitsPolicies()), 0o644); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, []string{dir}, "--bypass-control-plane=false")
	ctx := context.Background()
	failures := 0
	for _, lc := range limitsCases {
		c, err := lc.requestCase()
		if err != nil {
			t.Fatal(err)
		}
		problems := h.check(ctx, c)
		if lc.forbidden {
			if cad := h.webhook.ConditionsAwareAuthorize(ctx, c.attributes()); cad.IsAllow() || h.evaluate(ctx, &c, cad).decision == authorizer.DecisionAllow {
				problems = append(problems, fmt.Sprintf("a forbid holds, but the answer %s allows", cad))
			}
		}
		reportProblems(t, &failures, c, problems)
	}
	summarize(t, failures, len(limitsCases), h)
}

func (lc limitsCase) requestCase() (requestCase, error) {
	raw, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": lc.kind,
		"metadata": map[string]any{"name": "o", "namespace": "ns-1", "labels": lc.labels}})
	if err != nil {
		return requestCase{}, err
	}
	obj, err := decodeObject(raw)
	if err != nil {
		return requestCase{}, err
	}
	spec := authorizationv1.SubjectAccessReviewSpec{User: "dev-1", Groups: []string{"team-1", "system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "ns-1", Verb: "create", Version: "v1", Resource: lc.resource}}
	return requestCase{name: fmt.Sprintf("create %s labelled %v", lc.resource, lc.labels), spec: spec,
		admission: &admissionData{operation: admission.Create, object: obj}}, nil
}
