package kube138

import (
	"context"
	"errors"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// The freeze authorizer's conditions: labels on the object of a write.
const (
	frozenLabel   = "kube138.test/frozen"   // on the object or the stored one: Deny
	approvedLabel = "kube138.test/approved" // "true" on the object: Allow
)

var (
	freezeVerbs     = sets.New("create", "update", "patch", "delete")
	freezeResources = sets.New("configmaps", "secrets", "pods", "services", "deployments")
	frozen          = authorizer.GenericCondition{ID: frozenLabel, Type: "kube138.test/labels", Condition: "object or oldObject has label " + frozenLabel, Description: "frozen objects stay as they are"}
	approved        = authorizer.GenericCondition{ID: approvedLabel, Type: "kube138.test/labels", Condition: "object has label " + approvedLabel + "=true", Description: "approved writes"}
)

// freezeAuthorizer is another conditional authorizer in the union, in front
// of kcedar, as a second webhook or an in-process authorizer would be: on
// writes (create, update, patch, delete) of a few resources it answers a
// ConditionsMap with a deny condition (the object or the stored one carries
// frozenLabel) and an allow condition (the object carries approvedLabel
// "true"), and evaluates them itself when called back.
type freezeAuthorizer struct{}

var _ authorizer.Authorizer = freezeAuthorizer{}

// freezeApplies reports whether the freeze authorizer answers conditions to
// a: a write of one of its resources.
func freezeApplies(a authorizer.Attributes) bool {
	return a.IsResourceRequest() && a.GetSubresource() == "" && freezeVerbs.Has(a.GetVerb()) && freezeResources.Has(a.GetResource())
}

func (freezeAuthorizer) ConditionsAwareAuthorize(_ context.Context, a authorizer.Attributes) authorizer.ConditionsAwareDecision {
	if !freezeApplies(a) {
		return authorizer.ConditionsAwareDecisionNoOpinion("", nil)
	}
	return authorizer.ConditionsAwareDecisionConditionsMap([]authorizer.Condition{frozen}, nil, []authorizer.Condition{approved})
}

// Authorize folds the conditions as an authorizer must for a caller that
// cannot take them: Deny where a deny condition exists.
func (f freezeAuthorizer) Authorize(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	return f.ConditionsAwareAuthorize(ctx, a).UnconditionalPartsOrFailClosed()
}

func (freezeAuthorizer) EvaluateConditions(ctx context.Context, d authorizer.ConditionsAwareDecision, data authorizer.ConditionsData) (authorizer.Decision, string, error) {
	if !d.IsConditionsMap() {
		return d.FailureDecision(), "failed closed", errors.New("freeze evaluates its own ConditionsMap only")
	}
	return d.ConditionsMap().Evaluate(ctx, data, evaluateFreezeCondition)
}

func evaluateFreezeCondition(_ context.Context, c authorizer.Condition, data authorizer.ConditionsData) (bool, error) {
	switch c.GetID() {
	case frozenLabel:
		_, onObject := labelsOf(data.GetObject())[frozenLabel]
		_, onOld := labelsOf(data.GetOldObject())[frozenLabel]
		return onObject || onOld, nil
	case approvedLabel:
		return labelsOf(data.GetObject())[approvedLabel] == "true", nil
	}
	return false, errors.New("not a freeze condition: " + c.GetID())
}

// freezeOutcome is what the freeze authorizer's conditions evaluate to on
// the objects: Deny, Allow or NoOpinion.
func freezeOutcome(object, oldObject runtime.Object) authorizer.Decision {
	if _, ok := labelsOf(object)[frozenLabel]; ok {
		return authorizer.DecisionDeny
	}
	if _, ok := labelsOf(oldObject)[frozenLabel]; ok {
		return authorizer.DecisionDeny
	}
	if labelsOf(object)[approvedLabel] == "true" {
		return authorizer.DecisionAllow
	}
	return authorizer.DecisionNoOpinion
}

func labelsOf(obj runtime.Object) map[string]string {
	if obj == nil {
		return nil
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil // options (PodExecOptions) have no metadata
	}
	return m.GetLabels()
}

// rbacGrant is one grant of the RBAC stand-in: a group, verbs and
// resources ("*" for all).
type rbacGrant struct {
	group            string
	verbs, resources []string
}

// rbacGrants are the RBAC stand-in's fixed bindings.
var rbacGrants = []rbacGrant{
	{"rbac-editors", []string{"*"}, []string{"configmaps", "services", "pods", "deployments"}},
	{"rbac-viewers", []string{"get", "list", "watch"}, []string{"*"}},
	{"team-a", []string{"get", "list"}, []string{"configmaps"}},
}

// rbacStandIn stands for RBAC behind kcedar: it allows what rbacGrants grant
// and has no opinion otherwise.
var rbacStandIn = authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	return rbacDecision(a), "", nil
})

func rbacDecision(a authorizer.Attributes) authorizer.Decision {
	if a.GetUser() == nil || !a.IsResourceRequest() {
		return authorizer.DecisionNoOpinion
	}
	resource := a.GetResource()
	if a.GetSubresource() != "" {
		resource += "/" + a.GetSubresource()
	}
	for _, g := range rbacGrants {
		if slices.Contains(a.GetUser().GetGroups(), g.group) && matches(g.verbs, a.GetVerb()) && matches(g.resources, resource) {
			return authorizer.DecisionAllow
		}
	}
	return authorizer.DecisionNoOpinion
}

func matches(granted []string, s string) bool {
	return slices.Contains(granted, "*") || slices.Contains(granted, s)
}
