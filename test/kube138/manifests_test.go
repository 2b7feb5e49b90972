package kube138

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericfeatures "k8s.io/apiserver/pkg/features"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
)

// TestManifestsValidate: the AuthorizationConfiguration `kcedar manifests
// --conditions-review` writes passes kube-apiserver 1.38's loading and
// validation with the ConditionalAuthorization gate on, for each
// combination of the flags that change it; with the gate off, 1.38 refuses
// the conditionsReview field (so the gate must be on wherever the
// configuration is used).
func TestManifestsValidate(t *testing.T) {
	enableConditionalAuthorization(t)
	k := startKcedar(t, []string{"testdata/generated/conditional.cedar"})
	for _, flags := range [][]string{nil, {"--bypass-control-plane=false"}, {"--failure-policy", "NoOpinion"},
		{"--service-account", ""}, {"--bypass-control-plane=false", "--service-account", ""}} {
		path, _ := k.manifests(t, flags...)
		if _, problems := loadAuthorizationConfiguration(t, path); len(problems) > 0 {
			t.Errorf("kcedar manifests --conditions-review %s: kube-apiserver 1.38 refuses it:\n  %s", strings.Join(flags, " "), strings.Join(problems, "\n  "))
		}
	}
	t.Run("gate off", func(t *testing.T) {
		featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, genericfeatures.ConditionalAuthorization, false)
		path, _ := k.manifests(t)
		_, problems := loadAuthorizationConfiguration(t, path)
		if len(problems) != 1 || !strings.Contains(problems[0], "conditionsReview: Forbidden: the ConditionalAuthorization feature gate must be on") {
			t.Errorf("with the gate off, kube-apiserver 1.38's objections: %q; want the one to conditionsReview", problems)
		}
	})
}

// TestManifestsMatchConditions: with kcedar manifests' default match
// conditions, the control plane's identities and kcedar's own never reach
// kcedar (NoOpinion, nothing sent: Node and RBAC decide); everyone else's
// requests do.
func TestManifestsMatchConditions(t *testing.T) {
	enableConditionalAuthorization(t)
	h := newHarness(t, []string{"testdata/generated/conditional.cedar"})
	ctx := context.Background()
	for _, c := range []struct {
		user   string
		groups []string
		sent   bool
	}{
		{"admin", []string{"system:masters", "system:authenticated"}, false},
		{"system:node:n1", []string{"system:nodes", "system:authenticated"}, false},
		{"system:serviceaccount:kube-system:replicaset-controller", []string{"system:serviceaccounts", "system:authenticated"}, false},
		{"system:kube-scheduler", []string{"system:authenticated"}, false},
		{"system:serviceaccount:kcedar-system:kcedar", []string{"system:serviceaccounts", "system:authenticated"}, false},
		{"dev-1", []string{"team-1", "system:authenticated"}, true},
		{"system:serviceaccount:ns-1:deployer", []string{"system:serviceaccounts", "system:authenticated"}, true},
	} {
		spec := writeSpec(c.user, "", "create", "configmaps")
		spec.Groups = c.groups
		rc := requestCase{name: c.user, spec: spec}
		h.wire.take()
		d := h.webhook.ConditionsAwareAuthorize(ctx, rc.attributes())
		exs := h.wire.take()
		if sent := len(exs) > 0; sent != c.sent || (!sent && !d.IsNoOpinion()) {
			t.Errorf("%s %v: sent to kcedar %v (want %v), decision %s", c.user, c.groups, sent, c.sent, d)
		}
		for _, p := range h.counts.check(ctx, exs) {
			t.Errorf("%s: %s", c.user, p)
		}
	}
}

// TestKcedarUnreachable: with kcedar gone, the webhook authorizer fails
// closed as the configuration says (failurePolicy Deny), and conditions
// kcedar issued before it went cannot allow: the callback fails, and the
// decision falls back to what it could at worst be.
func TestKcedarUnreachable(t *testing.T) {
	enableConditionalAuthorization(t)
	h := newHarness(t, []string{"testdata/generated/conditional.cedar"}, "--bypass-control-plane=false")
	ctx := context.Background()
	withDeny := writeSpec("dev-1", "team-1", "create", "pods")
	c := requestCase{name: "dev-1 creates a pod", spec: withDeny, admission: &admissionData{operation: admission.Create,
		object: objectOfKind(t, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ns-1"},"spec":{"nodeName":"node-1","containers":[{"name":"c","image":"nginx"}]}}`)}}
	issued := h.webhook.ConditionsAwareAuthorize(ctx, c.attributes())
	if ev := h.evaluate(ctx, &c, issued); !issued.IsConditionsMap() || ev.decision != authorizer.DecisionAllow {
		t.Fatalf("with kcedar up: %s, evaluated %s %q %v; want conditions that allow", issued, ev.decision, ev.reason, ev.err)
	}
	h.kcedar.stop()
	if ev := h.evaluate(ctx, &c, issued); ev.decision == authorizer.DecisionAllow || ev.err == nil {
		t.Errorf("the callback with kcedar gone: %s %q %v; want a failure that does not allow", ev.decision, ev.reason, ev.err)
	}
	other := writeSpec("dev-2", "team-2", "update", "configmaps")
	if d := h.webhook.ConditionsAwareAuthorize(ctx, (&requestCase{spec: other}).attributes()); !d.IsDeny() || d.Error() == nil {
		t.Errorf("a review with kcedar gone: %s; want Deny (failurePolicy Deny) with the error", d)
	}
}

// objectOfKind decodes a JSON object as admission hands it over.
func objectOfKind(t *testing.T, raw string) runtime.Object {
	t.Helper()
	obj, err := decodeObject([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	return obj
}
