package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	apiserverapi "k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/apis/apiserver/load"
	authorizationcel "k8s.io/apiserver/pkg/authorization/cel"
	"sigs.k8s.io/yaml"
)

// privilegedGroup is the group kube-apiserver allows before any configured
// authorizer (system:masters).
const privilegedGroup = "system:masters"

// Reach tells which requests reach kcedar: not those of system:masters
// members (kube-apiserver allows them before any authorizer), nor those
// the matchConditions of kcedar's webhook authorizer exclude. It evaluates
// the matchConditions with kube-apiserver's own CEL machinery on the
// SubjectAccessReview the webhook authorizer would send.
type Reach struct {
	// name is the webhook authorizer's name in the configuration.
	name string
	// conditions are the matchConditions, one matcher each, in order, so
	// an excluded request names the condition that excluded it.
	conditions []condition
	// all evaluates every condition at once (one conversion of the
	// request): the fast answer for a request that reaches kcedar.
	all *authorizationcel.CELMatcher
	// failurePolicy is the webhook's: Deny or NoOpinion (what an error in a
	// matchCondition does, without asking kcedar).
	failurePolicy string
	// rbac is where an RBAC authorizer sits: rbacAfter kcedar's webhook,
	// rbacBefore it, or rbacAbsent.
	rbac rbacPosition
	// conditionsReview: kcedar's webhook is configured for conditional
	// authorization (webhook.conditionsReview, Kubernetes 1.38).
	conditionsReview bool
}

// rbacPosition is where RBAC sits in the chain, relative to kcedar.
type rbacPosition int

const (
	rbacAbsent rbacPosition = iota
	rbacAfter
	rbacBefore
)

type condition struct {
	expression string
	matcher    *authorizationcel.CELMatcher
}

// NewReach reads an AuthorizationConfiguration (YAML or JSON, as
// kube-apiserver's --authorization-config takes it) and takes the
// matchConditions of its webhook authorizer named name, or of its only
// webhook authorizer when name is "".
func NewReach(config []byte, name string) (*Reach, error) {
	if len(config) == 0 {
		return nil, errors.New("the AuthorizationConfiguration is empty")
	}
	stripped, withReview, err := splitConditionsReview(config)
	if err != nil {
		return nil, fmt.Errorf("AuthorizationConfiguration: %w", err)
	}
	ac, err := load.LoadFromData(stripped)
	if err != nil {
		return nil, fmt.Errorf("AuthorizationConfiguration: %w", err)
	}
	var hooks []apiserverapi.AuthorizerConfiguration
	for _, a := range ac.Authorizers {
		if a.Type == apiserverapi.TypeWebhook && a.Webhook != nil && (name == "" || a.Name == name) {
			hooks = append(hooks, a)
		}
	}
	switch {
	case len(hooks) == 0 && name != "":
		return nil, fmt.Errorf("AuthorizationConfiguration: no webhook authorizer named %q", name)
	case len(hooks) != 1:
		return nil, fmt.Errorf("AuthorizationConfiguration: %d webhook authorizers; name the one that is kcedar", len(hooks))
	}
	hook := hooks[0]
	r := &Reach{name: hook.Name, failurePolicy: string(hook.Webhook.FailurePolicy)}
	r.rbac = rbacPositionOf(ac.Authorizers, hook.Name)
	r.conditionsReview = withReview[hook.Name]
	compiler := authorizationcel.NewDefaultCompiler()
	var results []authorizationcel.CompilationResult
	for i, mc := range hook.Webhook.MatchConditions {
		res, err := compileMatchCondition(compiler, mc.Expression)
		if err != nil {
			return nil, fmt.Errorf("AuthorizationConfiguration: authorizer %q: matchConditions[%d]: %w", hook.Name, i, err)
		}
		r.conditions = append(r.conditions, condition{expression: mc.Expression, matcher: matcherOf(res)})
		results = append(results, res)
	}
	if len(results) > 0 {
		r.all = matcherOf(results...)
	}
	return r, nil
}

// authorizerRBAC is the RBAC authorizer's type in an
// AuthorizationConfiguration (k8s.io/apiserver names only the webhook's).
const authorizerRBAC apiserverapi.AuthorizerType = "RBAC"

// rbacPositionOf is where the first RBAC authorizer sits relative to
// kcedar's webhook authorizer (named kcedar).
func rbacPositionOf(authorizers []apiserverapi.AuthorizerConfiguration, kcedar string) rbacPosition {
	seenKcedar := false
	for _, a := range authorizers {
		switch {
		case a.Type == apiserverapi.TypeWebhook && a.Name == kcedar:
			seenKcedar = true
		case a.Type == authorizerRBAC && seenKcedar:
			return rbacAfter
		case a.Type == authorizerRBAC:
			return rbacBefore
		}
	}
	return rbacAbsent
}

// splitConditionsReview takes webhook.conditionsReview (conditional
// authorization, Kubernetes 1.38) out of an AuthorizationConfiguration's
// text: k8s.io/apiserver v0.37 decodes the configuration strictly and does
// not know the field. It returns the configuration without it (as JSON) and
// the names of the webhook authorizers that set it.
func splitConditionsReview(config []byte) ([]byte, map[string]bool, error) {
	var doc map[string]any
	if err := yaml.Unmarshal(config, &doc); err != nil {
		return nil, nil, err
	}
	withReview := map[string]bool{}
	authorizers, _ := doc["authorizers"].([]any)
	for _, a := range authorizers {
		a, _ := a.(map[string]any)
		hook, _ := a["webhook"].(map[string]any)
		if review, ok := hook["conditionsReview"]; ok {
			name, _ := a["name"].(string)
			withReview[name] = review != nil
			delete(hook, "conditionsReview")
		}
	}
	out, err := json.Marshal(doc)
	return out, withReview, err
}

// RBACPosition says whether the configuration has an RBAC authorizer and
// whether it comes before kcedar's webhook authorizer.
func (r *Reach) RBACPosition() (present, first bool) {
	return r.rbac != rbacAbsent, r.rbac == rbacBefore
}

// ConditionsReview reports whether kcedar's webhook authorizer is
// configured for conditional authorization (webhook.conditionsReview).
func (r *Reach) ConditionsReview() bool { return r.conditionsReview }

// compileMatchCondition compiles one matchCondition expression as
// kube-apiserver's webhook authorizer does (k8s.io/apiserver's CEL
// compiler for SubjectAccessReview match conditions: a bool over request).
func compileMatchCondition(compiler authorizationcel.Compiler, expression string) (authorizationcel.CompilationResult, error) {
	if strings.TrimSpace(expression) == "" {
		return authorizationcel.CompilationResult{}, errors.New("the expression is empty")
	}
	return compiler.CompileCELExpression(&authorizationcel.SubjectAccessReviewMatchCondition{Expression: expression})
}

// matcherOf is the matcher of compiled expressions, evaluated together as
// the webhook authorizer evaluates its matchConditions (the request's field
// and label selectors converted only when an expression reads them).
func matcherOf(results ...authorizationcel.CompilationResult) *authorizationcel.CELMatcher {
	m := &authorizationcel.CELMatcher{CompilationResults: results}
	for _, res := range results {
		m.UsesFieldSelector = m.UsesFieldSelector || res.UsesFieldSelector
		m.UsesLabelSelector = m.UsesLabelSelector || res.UsesLabelSelector
	}
	return m
}

// Conditions are the matchConditions' expressions.
func (r *Reach) Conditions() []string {
	out := make([]string, len(r.conditions))
	for i, c := range r.conditions {
		out[i] = c.expression
	}
	return out
}

// NotSeen says why kcedar never sees the request of spec ("" if it does):
// what replay leaves out, for other tools reading records (kcedar
// generate).
func (r *Reach) NotSeen(spec *authorizationv1.SubjectAccessReviewSpec) string { return r.notSeen(spec) }

// notSeen says why kcedar never sees the request of spec ("" if it does),
// as kube-apiserver decides it: a system:masters member is allowed first;
// a matchCondition that evaluates to false skips the webhook; an error in
// one (and none false) applies the failurePolicy without asking kcedar.
func (r *Reach) notSeen(spec *authorizationv1.SubjectAccessReviewSpec) string {
	if slices.Contains(spec.Groups, privilegedGroup) {
		return "user in group system:masters (allowed before any authorizer)"
	}
	if r == nil || r.all == nil {
		return ""
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: *spec}
	if ok, err := r.all.Eval(context.Background(), sar); ok && err == nil {
		return ""
	}
	// Excluded, or an error: which condition says so.
	var evalErr error
	for _, c := range r.conditions {
		ok, err := c.matcher.Eval(context.Background(), sar)
		if err != nil {
			evalErr = err
			continue
		}
		if !ok {
			return "excluded by the matchCondition of authorizer " + r.name + ": " + c.expression
		}
	}
	if evalErr != nil {
		return "a matchCondition of authorizer " + r.name + " fails (failurePolicy " + r.failurePolicy + " applies without asking kcedar)"
	}
	return ""
}
