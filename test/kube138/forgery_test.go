package kube138

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// configMapWrite is dev-1 (team-1, team-9) creating a ConfigMap in ns-1 in
// conditional.cedar's world, where gen-team-configmaps allows it on the
// condition that the object's team label names one of the writer's groups.
func configMapWrite(verb string, op admission.Operation, labels map[string]string) requestCase {
	spec := authorizationv1.SubjectAccessReviewSpec{User: "dev-1", UID: "uid-1", Groups: []string{"team-1", "team-9", "system:authenticated"},
		Extra:              map[string]authorizationv1.ExtraValue{"scopes": {"write"}},
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "ns-1", Verb: verb, Version: "v1", Resource: "configmaps"}}
	obj := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: "ns-1", Labels: labels}}
	adm := &admissionData{operation: op, object: obj}
	if op == admission.Update {
		adm.oldObject = obj.DeepCopy()
	}
	return requestCase{name: fmt.Sprintf("dev-1 %s configmaps (%s, labels %v)", verb, op, labels), spec: spec, admission: adm}
}

// TestForgedReplayedTransplantedConditions: conditions kcedar issued, then
// altered, replayed for another request, or moved between requests or
// lists, never allow when the API server calls kcedar back with them: the
// webhook authorizer's EvaluateConditions (what the conditions enforcer
// calls) gives Deny or NoOpinion, and every callback answer passes
// upstream's validation. The genuine decision, with the same data, allows
// (so each refusal is the forgery's doing).
func TestForgedReplayedTransplantedConditions(t *testing.T) {
	enableConditionalAuthorization(t)
	h := newHarness(t, []string{"testdata/generated/conditional.cedar"}, "--bypass-control-plane=false")
	ctx := context.Background()
	team1 := map[string]string{"team": "team-1"}
	genuine := configMapWrite("create", admission.Create, team1)
	issued := h.conditionsFor(t, genuine)
	if ev := h.evaluate(ctx, &genuine, issued); ev.decision != authorizer.DecisionAllow {
		t.Fatalf("the genuine conditions with the genuine data: %s %q %v; want Allow", ev.decision, ev.reason, ev.err)
	}
	allow := slices.Collect(issued.ConditionsMap().AllowConditions())
	var cases []forgery
	for _, f := range conditionForgeries {
		cases = append(cases, forgery{"altered: " + f.name, genuine, conditionsMap(nil, mapEach(allow, f.alter))})
	}
	cases = append(cases, forgery{"allow conditions moved to the deny list", genuine, conditionsMap(allow, nil)})
	for _, r := range replays(genuine) {
		cases = append(cases, forgery{"replayed for " + r.name, r, issued})
	}
	cases = append(cases, transplants(t, h, issued)...)
	for _, f := range cases {
		if f.decision.IsUnconditional() {
			t.Fatalf("%s: the forged decision is not conditional: %s", f.name, f.decision)
		}
		ev := h.evaluate(ctx, &f.data, f.decision)
		if !ev.ok || ev.decision == authorizer.DecisionAllow {
			t.Errorf("%s: EvaluateConditions gave %s %q %v; a forged, replayed or transplanted condition must not allow\n  decision: %s\n  data: %s",
				f.name, ev.decision, ev.reason, ev.err, describeConditions(f.decision), f.data.name)
		}
		for _, p := range h.counts.check(ctx, h.wire.take()) {
			t.Errorf("%s: %s", f.name, p)
		}
	}
	t.Logf("%d forgeries refused", len(cases))
}

// forgery is a decision the API server is made to hold, and the request
// whose admission data it is evaluated with.
type forgery struct {
	name     string
	data     requestCase
	decision authorizer.ConditionsAwareDecision
}

// conditionsFor is the ConditionsMap the webhook authorizer gets from
// kcedar for c.
func (h *harness) conditionsFor(t *testing.T, c requestCase) authorizer.ConditionsAwareDecision {
	t.Helper()
	d := h.webhook.ConditionsAwareAuthorize(context.Background(), c.attributes())
	if !d.IsConditionsMap() {
		t.Fatalf("%s: kcedar answered %s, want a ConditionsMap", c.name, d)
	}
	return d
}

// conditionForgeries alter a condition kcedar wrote
// (kc4;<key>;<MAC>;<entity type>;<expression>) so that it would allow any
// object if it were believed.
var conditionForgeries = []struct {
	name  string
	alter func(authorizer.GenericCondition) authorizer.GenericCondition
}{
	{"the expression replaced by true", func(c authorizer.GenericCondition) authorizer.GenericCondition {
		return withField(c, 4, "true")
	}},
	{"the expression widened with || true", func(c authorizer.GenericCondition) authorizer.GenericCondition {
		return withField(c, 4, conditionField(c, 4)+" || true")
	}},
	{"one character of the MAC changed", func(c authorizer.GenericCondition) authorizer.GenericCondition {
		mac := []byte(conditionField(c, 2))
		mac[0] ^= 1
		return withField(c, 2, string(mac))
	}},
	{"the key id changed", func(c authorizer.GenericCondition) authorizer.GenericCondition { return withField(c, 1, "k9") }},
	{"the entity type changed", func(c authorizer.GenericCondition) authorizer.GenericCondition {
		return withField(c, 3, "core::secrets")
	}},
	{"the format tag changed", func(c authorizer.GenericCondition) authorizer.GenericCondition { return withField(c, 0, "kc2") }},
	{"the id changed", func(c authorizer.GenericCondition) authorizer.GenericCondition { c.ID = "kcedar.dev/other"; return c }},
	{"the type changed", func(c authorizer.GenericCondition) authorizer.GenericCondition {
		c.Type = "kcedar.dev/cedar-residual-v2"
		return c
	}},
	{"truncated", func(c authorizer.GenericCondition) authorizer.GenericCondition {
		c.Condition = c.Condition[:len(c.Condition)/2]
		return c
	}},
}

// conditionField is the i-th ;-separated field of kcedar's condition text
// (the expression, the last, may itself hold ;).
func conditionField(c authorizer.GenericCondition, i int) string {
	fields := strings.SplitN(c.Condition, ";", 5)
	if i >= len(fields) {
		return ""
	}
	return fields[i]
}

func withField(c authorizer.GenericCondition, i int, value string) authorizer.GenericCondition {
	fields := strings.SplitN(c.Condition, ";", 5)
	if i < len(fields) {
		fields[i] = value
	}
	c.Condition = strings.Join(fields, ";")
	return c
}

func mapEach(conds []authorizer.Condition, f func(authorizer.GenericCondition) authorizer.GenericCondition) []authorizer.Condition {
	out := make([]authorizer.Condition, len(conds))
	for i, c := range conds {
		out[i] = f(authorizer.GenericCondition{ID: c.GetID(), Type: c.GetType(), Condition: c.GetCondition(), Description: c.GetDescription()})
	}
	return out
}

// conditionsMap is the ConditionsMap the API server would hold.
func conditionsMap(deny, allow []authorizer.Condition) authorizer.ConditionsAwareDecision {
	return authorizer.ConditionsAwareDecisionConditionsMap(deny, nil, allow)
}

// replays are requests the genuine conditions were not issued for, whose
// object the conditions' expression accepts: another user, UID, group set
// or extra, another namespace, resource, subresource, or operation.
func replays(genuine requestCase) []requestCase {
	variant := func(name string, change func(*requestCase)) requestCase {
		c := genuine
		c.spec = *genuine.spec.DeepCopy()
		adm := *genuine.admission
		c.admission = &adm
		change(&c)
		c.name = name
		return c
	}
	ra := func(c *requestCase) *authorizationv1.ResourceAttributes { return c.spec.ResourceAttributes }
	return []requestCase{
		variant("another user", func(c *requestCase) { c.spec.User = "dev-2" }),
		variant("another UID", func(c *requestCase) { c.spec.UID = "uid-2" }),
		variant("other groups", func(c *requestCase) { c.spec.Groups = []string{"team-1", "system:authenticated"} }),
		variant("other extra", func(c *requestCase) { c.spec.Extra = map[string]authorizationv1.ExtraValue{"scopes": {"admin"}} }),
		variant("another namespace", func(c *requestCase) { ra(c).Namespace = "ns-2" }),
		variant("another resource", func(c *requestCase) { ra(c).Resource = "secrets" }),
		variant("another subresource", func(c *requestCase) { ra(c).Subresource = "status" }),
		variant("an update", func(c *requestCase) {
			ra(c).Verb, c.admission.operation = "update", admission.Update
			c.admission.oldObject = c.admission.object.DeepCopyObject()
		}),
		variant("a delete", func(c *requestCase) {
			ra(c).Verb, c.admission.operation = "delete", admission.Delete
			c.admission.object, c.admission.oldObject = nil, c.admission.object
		}),
	}
}

// transplants move issued's conditions (dev-1's create) into the decisions
// of other requests, and conditions between lists: into dev-2's create
// (replacing or joining its own allow conditions) evaluated with an object
// only dev-1's conditions accept; into dev-1's update (whose own conditions
// would allow its data); and dev-1's update's deny condition into its allow
// list, with data the deny condition holds for.
func transplants(t *testing.T, h *harness, issued authorizer.ConditionsAwareDecision) []forgery {
	t.Helper()
	created := slices.Collect(issued.ConditionsMap().AllowConditions())
	other := configMapWrite("create", admission.Create, map[string]string{"team": "team-1"})
	other.spec.User, other.spec.UID, other.spec.Groups = "dev-2", "uid-2", []string{"team-2", "system:authenticated"}
	other.name = "dev-2 create configmaps (CREATE, labels map[team:team-1])"
	otherIssued := h.conditionsFor(t, other)
	own := slices.Collect(otherIssued.ConditionsMap().AllowConditions())

	update := configMapWrite("update", admission.Update, map[string]string{"team": "team-1"})
	updateIssued := h.conditionsFor(t, update)
	updateDeny := slices.Collect(updateIssued.ConditionsMap().DenyConditions())
	relabel := update
	relabelled := *update.admission
	relabelled.object = update.admission.object.DeepCopyObject()
	relabelled.object.(*corev1.ConfigMap).Labels = map[string]string{"team": "team-2"}
	relabel.admission, relabel.name = &relabelled, "dev-1's update changing the team label"
	if len(updateDeny) == 0 {
		t.Fatalf("%s: no deny condition in %s", update.name, describeConditions(updateIssued))
	}
	return []forgery{
		{"dev-1's create conditions in dev-2's create, replacing its own", other, conditionsMap(nil, created)},
		{"dev-1's create conditions in dev-2's create, next to its own (under another id)", other, conditionsMap(nil, append(slices.Clone(own), mapEach(created, func(c authorizer.GenericCondition) authorizer.GenericCondition {
			c.ID += "-2"
			return c
		})...))},
		{"dev-1's create conditions in dev-1's update, replacing its allow conditions", update, conditionsMap(updateDeny, created)},
		{"dev-1's update's deny conditions moved to its allow list", relabel, conditionsMap(nil, updateDeny)},
	}
}

// describeConditions prints a decision's conditions (id and text).
func describeConditions(d authorizer.ConditionsAwareDecision) string {
	if !d.IsConditionsMap() {
		return d.String()
	}
	var b strings.Builder
	for _, list := range []struct {
		effect string
		conds  func(func(authorizer.Condition) bool)
	}{{"deny", d.ConditionsMap().DenyConditions()}, {"allow", d.ConditionsMap().AllowConditions()}} {
		for c := range list.conds {
			fmt.Fprintf(&b, "\n    %s %s: %s", list.effect, c.GetID(), c.GetCondition())
		}
	}
	return b.String()
}
