package cedar

import (
	"context"
	"errors"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/conditions"
	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/entities"
	gen "github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/upstream"
	"github.com/kcedar/kcedar/residual"
	"github.com/kcedar/kcedar/schemagen"
)

// Authorizer decides Kubernetes requests with Cedar policies. It is safe for
// concurrent use.
type Authorizer struct {
	// serving is the engine of the policy set serving now, replaced (with
	// every cache it built) when the set is.
	serving *conditions.Serving
}

var (
	_ authorizer.Authorizer   = (*Authorizer)(nil)
	_ authorizer.RuleResolver = (*Authorizer)(nil)
)

// Options configure an Authorizer.
type Options struct {
	// Keys sign the conditions ConditionsAwareAuthorize returns and verify
	// them in EvaluateConditions; nil means one random key, so the
	// conditions verify only in this process.
	Keys *residual.Keyring
	// Namespaces fill resource.namespaceObject; nil leaves it unknown.
	Namespaces residual.Namespaces
	// Shadow evaluates every policy as if annotated @enforcement("audit"):
	// every decision is NoOpinion, and Details.Audit says what the policies
	// would have decided. For putting the policies in front of another
	// authorizer for the first time.
	Shadow bool
	// Registerer, if set, gets the metrics of the decision caches
	// (kcedar_decision_cache_entries, kcedar_decision_cache_evictions).
	Registerer prometheus.Registerer
}

// New returns the authorizer of the policies source serves, decided with
// schema (or with the schema a FileSource moved to, SetSchema). An invalid
// policy of StaticPolicies is an error naming its file and position; no
// authorizer is made. Over a FileSource, the authorizer moves to each set
// the source loads as it loads.
func New(source PolicySource, schema *schemagen.Schema, opts Options) (*Authorizer, error) {
	s := gen.FromPublic(schema)
	switch {
	case source == nil:
		return nil, errors.New("cedar.New: no policy source")
	case s == nil:
		return nil, errors.New("cedar.New: no schema")
	}
	policies, err := source.policies(s)
	if err != nil {
		return nil, err
	}
	keys := conditions.RandomKeyring()
	if opts.Keys != nil {
		if keys = conditions.KeyringFromPublic(opts.Keys); keys == nil {
			return nil, errors.New("cedar.New: Options.Keys was not made by package residual")
		}
	}
	codec := conditions.NewCodec(keys)
	a := &Authorizer{serving: conditions.NewServing(policies, s, codec,
		engine.EngineOptions{CacheSize: engine.DefaultCacheSize, Namespaces: upstream.Namespaces(opts.Namespaces), Shadow: opts.Shadow, EncodedOnly: codec})}
	if err := a.registerCacheMetrics(opts.Registerer); err != nil {
		return nil, err
	}
	// The engine of a new set is built as it loads, not by the first
	// request after: the old engine and its caches go at once.
	source.follow(func() { a.serving.Engine() })
	return a, nil
}

// ErrNotLoaded is the error of a decision asked for before a valid policy
// set is loaded: the answer is a Deny, and a webhook answers 503 so that the
// API server retries rather than caches it.
var ErrNotLoaded = errors.New("no valid policy set is loaded")

// errNotMade is the error of an Authorizer New did not make.
var errNotMade = errors.New("cedar: an Authorizer is made by New")

// engineNow is the engine of the policy set serving now.
func (a *Authorizer) engineNow() (*conditions.Engine, error) {
	if a == nil || a.serving == nil {
		return nil, errNotMade
	}
	e := a.serving.Engine()
	if e == nil {
		return nil, ErrNotLoaded
	}
	return e, nil
}

// decide is a's request decided by the engine serving now, recorded in the
// Details ctx carries.
func (a *Authorizer) decide(ctx context.Context, attrs authorizer.Attributes, unconditional bool) (*conditions.Engine, *entities.Request, engine.Decision, error) {
	req, err := upstream.Request(attrs)
	if err != nil {
		return nil, nil, engine.Decision{}, err
	}
	// A caller that takes no conditions gets the decision without them
	// (Deny if a deny condition remains, else NoOpinion), which the engine
	// then makes as it decides.
	req.UnconditionalOnly = req.UnconditionalOnly || unconditional
	e, err := a.engineNow()
	if err != nil {
		return nil, nil, engine.Decision{}, err
	}
	details := detailsOf(ctx)
	if details == nil {
		return e, req, e.Authorize(ctx, req), nil
	}
	var st engine.Stats
	d := e.AuthorizeWithStats(ctx, req, &st)
	details.fill(d, &st, e.Generation())
	return e, req, d, nil
}

// cannotDecide is the answer to attributes kcedar cannot decide.
const cannotDecide = "kcedar: cannot decide"

// Authorize implements authorizer.Authorizer: the decision without its
// conditions (Deny if a deny condition remains, else NoOpinion).
// Attributes kcedar cannot decide (no verb; no user and no groups) are
// denied with the error, and so is every request before a policy set is
// loaded (ErrNotLoaded).
func (a *Authorizer) Authorize(ctx context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	_, _, d, err := a.decide(ctx, attrs, true)
	if err != nil {
		return authorizer.DecisionDeny, cannotDecide, err
	}
	return upstream.Unconditional(d)
}

// ConditionsAwareAuthorize implements authorizer.Authorizer: Allow, Deny or
// NoOpinion, or a ConditionsMap of signed conditions bound to this request,
// which EvaluateConditions evaluates in admission.
func (a *Authorizer) ConditionsAwareAuthorize(ctx context.Context, attrs authorizer.Attributes) authorizer.ConditionsAwareDecision {
	e, req, d, err := a.decide(ctx, attrs, false)
	if err != nil {
		return authorizer.ConditionsAwareDecisionDeny(cannotDecide, err)
	}
	if req.UnconditionalOnly {
		return authorizer.ConditionsAwareDecisionFromParts(upstream.Evaluated(d))
	}
	enc := e.Encode(d, conditions.RequestBinding(req))
	if _, details := conditions.WireDetails(enc); details != nil && d.IsConditional() {
		detailsOf(ctx).answeredWith(details.EvaluationError)
	}
	return upstream.ConditionsAware(enc)
}

// AuthorizeEnforced decides attrs for a cluster without conditional
// authorization whose admission webhook (Admit) enforces this authorizer's
// conditions: a decision that allow conditions leave open is Allow, with
// enforced true, when the API server sends the request to admission
// webhooks (a write or connect of a resource the schema types); every
// other decision is Authorize's.
func (a *Authorizer) AuthorizeEnforced(ctx context.Context, attrs authorizer.Attributes) (decision authorizer.Decision, reason string, enforced bool, err error) {
	e, req, d, err := a.decide(ctx, attrs, false)
	if err != nil {
		return authorizer.DecisionDeny, cannotDecide, false, err
	}
	if req.UnconditionalOnly || !d.IsConditional() || len(d.AllowConditions()) == 0 || !e.AdmissionWebhookSees(req) {
		decision, reason, err = upstream.Unconditional(d)
		return decision, reason, false, err
	}
	// The conditions are encoded only to learn which fit; the admission
	// webhook computes and signs them again.
	enc := e.Encode(d, conditions.RequestBinding(req))
	if _, details := conditions.WireDetails(enc); details != nil {
		detailsOf(ctx).answeredWith(details.EvaluationError)
		decision, reason = upstream.Concrete(enc)
		return decision, reason, false, nil
	}
	if len(enc.ConditionsMap.AllowConditions) == 0 {
		// Only deny conditions were encoded (the allow conditions were
		// dropped): nothing to enforce in admission, so the decision
		// without its conditions.
		decision, reason, err = upstream.Unconditional(d)
		return decision, reason, false, err
	}
	ps := make([]*cedarlang.Policy, len(d.AllowConditions()))
	for i, r := range d.AllowConditions() {
		ps[i] = r.Policy
	}
	return authorizer.DecisionAllow, "kcedar: allowed if the conditions of " + engine.DescribePolicies(ps) + " hold in admission", true, nil
}

// EvaluateConditions implements authorizer.Authorizer: it evaluates the
// conditions ConditionsAwareAuthorize returned against the admission data.
// It needs the keys and the schema, not the policies: a condition is judged
// by the policy set that issued it.
func (a *Authorizer) EvaluateConditions(ctx context.Context, decision authorizer.ConditionsAwareDecision, data authorizer.ConditionsData) (authorizer.Decision, string, error) {
	var ev *conditions.Evaluator
	if a != nil && a.serving != nil {
		ev = a.serving.Evaluator()
	}
	v, err := upstream.EvaluateConditions(ev, decision, data)
	if err != nil {
		return authorizer.DecisionDeny, "kcedar: cannot evaluate the conditions", err
	}
	detailsOf(ctx).fill(v, &engine.Stats{}, 0)
	return upstream.Evaluated(v)
}

// RulesFor implements authorizer.RuleResolver: the rules u holds in
// namespace without conditions. It is incomplete when some rules were left
// out or may not hold (conditional rules, forbids, evaluation errors).
func (a *Authorizer) RulesFor(ctx context.Context, u user.Info, namespace string) ([]authorizer.ResourceRuleInfo, []authorizer.NonResourceRuleInfo, bool, error) {
	e, err := a.engineNow()
	if err != nil {
		return nil, nil, true, err
	}
	review, err := e.WhatCan(ctx, upstream.User(u), namespace)
	if err != nil {
		return nil, nil, true, err
	}
	res, non, incomplete := upstream.Rules(review)
	return res, non, incomplete, nil
}
