package upstream

import (
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/kcedar/kcedar/internal/engine"
)

// Rules is a rules review as upstream's RuleResolver answers: only the
// rules granted without conditions (a conditional right is not a right the
// caller holds), and incomplete when some rules were left out or may not
// hold: conditional rules, forbids that deny part of what the rules allow,
// or an evaluation error.
func Rules(r engine.RulesReview) ([]authorizer.ResourceRuleInfo, []authorizer.NonResourceRuleInfo, bool) {
	incomplete := r.Incomplete || len(r.Denied) > 0 || r.EvaluationError != ""
	var res []authorizer.ResourceRuleInfo
	for _, rule := range r.ResourceRules {
		if rule.Conditions != nil {
			incomplete = true
			continue
		}
		res = append(res, &authorizer.DefaultResourceRuleInfo{Verbs: rule.Verbs, APIGroups: rule.APIGroups, Resources: rule.Resources, ResourceNames: rule.ResourceNames})
	}
	var non []authorizer.NonResourceRuleInfo
	for _, rule := range r.NonResourceRules {
		if rule.Conditions != nil {
			incomplete = true
			continue
		}
		non = append(non, &authorizer.DefaultNonResourceRuleInfo{Verbs: rule.Verbs, NonResourceURLs: rule.NonResourceURLs})
	}
	return res, non, incomplete
}
