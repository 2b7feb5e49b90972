package residual

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/kcedar/kcedar/internal/conditions"
	"github.com/kcedar/kcedar/internal/engine"
	gen "github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/upstream"
	"github.com/kcedar/kcedar/internal/wire"
	"github.com/kcedar/kcedar/schemagen"
)

// Namespaces gets Namespace objects by name, to fill a condition's
// resource.namespaceObject: a client-go NamespaceLister over an informer is
// one. A namespace it does not find is unknown to the condition, which then
// fails closed. A Namespaces that also has a method
// Namespace(name string) (map[string]any, bool), giving the object as
// decoded JSON (numbers as json.Number) and false for an unknown one, is
// asked that instead, with no conversion per lookup.
type Namespaces interface {
	Get(name string) (*corev1.Namespace, error)
}

// Evaluator evaluates the conditions kcedar wrote, against admission data,
// with the KEP's rules: a deny condition that holds (or fails) denies, then
// an allow condition that holds allows, else no opinion. Malformed, foreign
// or altered conditions deny. Safe for concurrent use.
type Evaluator struct{ ev *conditions.Evaluator }

// NewEvaluator returns an evaluator of the conditions signed with keys for
// requests of schema's cluster; namespaces may be nil.
func NewEvaluator(schema *schemagen.Schema, keys *Keyring, namespaces Namespaces) (*Evaluator, error) {
	s := gen.FromPublic(schema)
	switch {
	case s == nil:
		return nil, errors.New("residual.NewEvaluator: no schema")
	case keys == nil || keys.keys == nil:
		return nil, errors.New("residual.NewEvaluator: no keys")
	}
	return &Evaluator{ev: &conditions.Evaluator{Schema: s, Codec: conditions.NewCodec(keys.keys), Namespaces: upstream.Namespaces(namespaces)}}, nil
}

// EvaluateConditions evaluates decision, as kcedar's authorizer returned it
// (or a union holding it), against data: the answer of upstream's
// authorizer.Authorizer.EvaluateConditions. It is never conditional.
func (e *Evaluator) EvaluateConditions(_ context.Context, decision authorizer.ConditionsAwareDecision, data authorizer.ConditionsData) (authorizer.Decision, string, error) {
	v, err := upstream.EvaluateConditions(e.evaluator(), decision, data)
	if err != nil {
		return authorizer.DecisionDeny, "kcedar: cannot evaluate the conditions", err
	}
	return upstream.Evaluated(v)
}

// Explain reads one condition of decision, verified as EvaluateConditions
// verifies it for the request of data, and returns what it checks: the Cedar
// expression over `resource`, for a person to read. effect is the list the
// condition came in (DecisionAllow, DecisionDeny or DecisionNoOpinion): a
// condition moved to another list does not verify.
func (e *Evaluator) Explain(c authorizer.Condition, effect authorizer.Decision, data authorizer.ConditionsData) (string, error) {
	ev := e.evaluator()
	if ev == nil {
		return "", errors.New("no schema to read conditions with")
	}
	adm, err := upstream.AdmissionData(data)
	if err != nil {
		return "", err
	}
	t := engine.DecisionDeny
	switch effect {
	case authorizer.DecisionAllow:
		t = engine.DecisionAllow
	case authorizer.DecisionNoOpinion:
		t = engine.DecisionNoOpinion
	}
	cond := wire.Condition{ID: c.GetID(), Type: c.GetType(), Condition: c.GetCondition(), Description: c.GetDescription()}
	_, text, err := ev.Explain(cond, t, adm)
	return text, err
}

// evaluator is the engine's evaluator, nil for an Evaluator NewEvaluator
// did not make.
func (e *Evaluator) evaluator() *conditions.Evaluator {
	if e == nil {
		return nil
	}
	return e.ev
}
