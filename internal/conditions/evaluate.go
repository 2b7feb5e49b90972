package conditions

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/lib/cedarx/ast"
	"github.com/kcedar/kcedar/internal/lib/cedarx/eval"
	"github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/wire"
)

// AdmissionData is what the API server knows in admission and the conditions
// are evaluated against. Objects are raw JSON; nil means absent.
type AdmissionData struct {
	Operation                                   string // CREATE, UPDATE, DELETE or CONNECT
	APIGroup, APIVersion, Resource, Subresource string // empty when the caller does not say
	Namespace, Name                             string
	User                                        *entities.UserInfo
	Object, OldObject                           []byte
}

// Evaluator evaluates conditions kcedar wrote. It uses only the conditions and
// the admission data, never the policy store: the authorization-time policy
// set is what decides, even if the policies changed since.
type Evaluator struct {
	Schema *schemagen.Schema
	Codec  *Codec
	// Namespaces fills namespaceObject (nil: absent, so a condition that
	// reads it fails: a deny condition denies, an allow condition does not
	// allow).
	Namespaces entities.NamespaceLookup

	once   sync.Once
	byType map[types.EntityType]*schemagen.Resource
}

func (e *Evaluator) resourceFor(t types.EntityType) (*schemagen.Resource, bool) {
	e.once.Do(func() {
		e.byType = make(map[types.EntityType]*schemagen.Resource, len(e.Schema.Resources))
		for _, r := range e.Schema.Resources {
			e.byType[r.EntityType] = r
		}
	})
	r, ok := e.byType[t]
	return r, ok
}

// EvaluateDecision evaluates a decision kcedar returned: a concrete one as it
// is, a ConditionsMap by the KEP's rules, a Union in order until one member is
// not NoOpinion. Malformed input is a Deny. Conditions verify only if they
// were signed for the request of data.
func (e *Evaluator) EvaluateDecision(d *wire.ConditionsAwareDecision, data *AdmissionData) engine.Decision {
	if d == nil {
		return malformed("request.decision is missing")
	}
	details := func(dd *wire.DecisionDetails) (string, []error) {
		if dd == nil {
			return "", nil
		}
		var errs []error
		if dd.EvaluationError != "" {
			errs = []error{errors.New(dd.EvaluationError)}
		}
		return dd.Reason, errs
	}
	switch d.Type {
	case wire.DecisionTypeAllow:
		r, errs := details(d.Allow)
		return engine.Allowed(nil, errs).WithReason(r)
	case wire.DecisionTypeDeny:
		r, errs := details(d.Deny)
		return engine.Denied(nil, errs).WithReason(r)
	case wire.DecisionTypeNoOpinion:
		r, errs := details(d.NoOpinion)
		return engine.NoOpinion(errs).WithReason(r)
	case wire.DecisionTypeConditionsMap:
		if d.ConditionsMap == nil {
			return malformed("type ConditionsMap without conditionsMap")
		}
		return e.EvaluateMap(d.ConditionsMap, data)
	case wire.DecisionTypeUnion:
		var errs []error
		for _, m := range d.Union {
			v := e.EvaluateDecision(&m.Decision, data)
			errs = append(errs, v.Errors()...)
			if v.Type() != engine.DecisionNoOpinion {
				return withErrors(v, errs)
			}
		}
		return engine.NoOpinion(errs).WithReason("kcedar: no member of the union decided")
	}
	return malformed(fmt.Sprintf("unknown decision type %q", d.Type))
}

// malformed is the Deny for input kcedar cannot evaluate.
func malformed(why string) engine.Decision {
	return engine.Denied(nil, []error{errors.New(why)}).WithReason("kcedar: malformed decision")
}

// withErrors is d (concrete) with errs as its errors, keeping its reason.
func withErrors(d engine.Decision, errs []error) engine.Decision {
	reason := d.Reason()
	switch d.Type() {
	case engine.DecisionAllow:
		return engine.Allowed(d.Policies(), errs).WithReason(reason)
	case engine.DecisionNoOpinion:
		return engine.NoOpinion(errs).WithReason(reason)
	}
	return engine.Denied(d.Policies(), errs).WithReason(reason)
}

type conditionResult struct {
	id, description string
	holds           bool
	err             error
}

// EvaluateMap applies the KEP's rules: a deny condition that holds or fails
// denies; else a noOpinion condition that holds or fails gives NoOpinion;
// else an allow condition that holds allows (failing ones are ignored); else
// NoOpinion. Conditions verify only if they were signed for the request of
// data.
func (e *Evaluator) EvaluateMap(m *wire.ConditionsMap, data *AdmissionData) engine.Decision {
	total := len(m.DenyConditions) + len(m.NoOpinionConditions) + len(m.AllowConditions)
	if total == 0 {
		return malformed("empty conditionsMap")
	}
	if total > wire.MaxConditions {
		return malformed(fmt.Sprintf("%d conditions, more than %d", total, wire.MaxConditions))
	}
	// Decode (and verify) every condition first, so each object is converted
	// once, with just the paths all conditions on it read.
	bindings := admissionBindings(data)
	deny, noOp, allow := e.decodeAll(m.DenyConditions, engine.DecisionDeny, bindings), e.decodeAll(m.NoOpinionConditions, engine.DecisionNoOpinion, bindings), e.decodeAll(m.AllowConditions, engine.DecisionAllow, bindings)
	r := &mapRun{e: e, envs: &envCache{e: e, data: data, need: map[types.EntityType][2]*entities.Paths{}}}
	for _, list := range [][]pendingCondition{deny, noOp, allow} {
		r.need(list)
	}
	if why, ok := r.decideBy(deny, true); ok {
		return engine.Denied(nil, r.errs).WithReason("kcedar: denied by " + why)
	}
	if why, ok := r.decideBy(noOp, true); ok {
		return engine.NoOpinion(r.errs).WithReason("kcedar: no opinion by " + why)
	}
	if why, ok := r.decideBy(allow, false); ok {
		return engine.Allowed(nil, r.errs).WithReason("kcedar: allowed by " + why)
	}
	reason := "kcedar: no condition allows the request"
	if len(m.AllowConditions) > 0 {
		names := make([]string, len(m.AllowConditions))
		for i, c := range m.AllowConditions {
			names[i] = describeCondition(conditionResult{id: c.ID, description: c.Description})
		}
		sort.Strings(names)
		reason = "kcedar: the request does not meet the conditions of " + strings.Join(names, ", ")
	}
	return engine.NoOpinion(r.errs).WithReason(reason)
}

// pendingCondition is a condition decoded (and verified) for evaluation.
type pendingCondition struct {
	cond wire.Condition
	d    *decoded
	err  error
}

// decodeAll decodes conditions of one effect, each verified for one of
// bindings.
func (e *Evaluator) decodeAll(conds []wire.Condition, effect engine.DecisionType, bindings []Binding) []pendingCondition {
	out := make([]pendingCondition, len(conds))
	for i, c := range conds {
		out[i].cond = c
		out[i].d, out[i].err = e.Codec.decode(c, effect, bindings)
	}
	return out
}

// mapRun is one evaluation of a ConditionsMap: the environments shared by
// its conditions and the errors met.
type mapRun struct {
	e    *Evaluator
	envs *envCache
	errs []error
}

// need records the object paths the conditions of list read, so each
// object is converted once with all of them.
func (r *mapRun) need(list []pendingCondition) {
	for _, p := range list {
		if p.d == nil {
			continue
		}
		need := r.envs.need[p.d.entityType]
		if need[0] == nil {
			need = [2]*entities.Paths{{}, {}}
		}
		need[0].Merge(p.d.object)
		need[1].Merge(p.d.oldObject)
		r.envs.need[p.d.entityType] = need
	}
}

// decideBy evaluates list and names the conditions that decide: those that
// hold, and with failClosed those that fail too.
func (r *mapRun) decideBy(list []pendingCondition, failClosed bool) (string, bool) {
	var names []string
	for _, p := range list {
		for _, res := range r.e.memberResults(p, r.envs) {
			if res.err != nil {
				r.errs = append(r.errs, fmt.Errorf("condition %s: %w", res.id, res.err))
			}
			if res.holds || (failClosed && res.err != nil) {
				names = append(names, describeCondition(res))
			}
		}
	}
	sort.Strings(names)
	return strings.Join(names, ", "), len(names) > 0
}

// describeCondition names a condition by its policy (the id without
// kcedar's prefix) and description.
func describeCondition(r conditionResult) string {
	id := strings.TrimPrefix(r.id, ConditionIDPrefix)
	if r.description != "" && r.description != id {
		return "policy " + id + " (" + r.description + ")"
	}
	return "policy " + id
}

func (e *Evaluator) evaluateDecoded(d *decoded, envs *envCache) (bool, error) {
	env, err := envs.get(d.entityType)
	if err != nil {
		return false, err
	}
	return evaluateExpr(d.expr, env)
}

// evaluateExpr evaluates a condition's expression in env: a boolean, or an
// error.
func evaluateExpr(expr ast.IsNode, env eval.Env) (bool, error) {
	v, err := eval.Eval(expr, env)
	if err != nil {
		return false, err
	}
	b, ok := v.(types.Boolean)
	if !ok {
		return false, fmt.Errorf("evaluated to %s, not a boolean", eval.TypeName(v))
	}
	return bool(b), nil
}

// envCache builds the evaluation environment once per resource entity type.
type envCache struct {
	e    *Evaluator
	data *AdmissionData
	envs map[types.EntityType]envOrErr
	need map[types.EntityType][2]*entities.Paths // object, oldObject paths read
}

type envOrErr struct {
	env eval.Env
	err error
}

func (c *envCache) get(t types.EntityType) (eval.Env, error) {
	if r, ok := c.envs[t]; ok {
		return r.env, r.err
	}
	need := c.need[t]
	env, err := c.e.env(t, c.data, need[0], need[1])
	if c.envs == nil {
		c.envs = map[types.EntityType]envOrErr{}
	}
	c.envs[t] = envOrErr{env, err}
	return env, err
}

// Env builds the environment a condition for resource entity type t is
// evaluated in: the resource entity with its name, namespace and objects
// from the admission data.
func (e *Evaluator) Env(t types.EntityType, data *AdmissionData) (eval.Env, error) {
	return e.env(t, data, nil, nil)
}

// env is Env converting only the object paths in objectNeed and
// oldObjectNeed (nil: everything).
func (e *Evaluator) env(t types.EntityType, data *AdmissionData, objectNeed, oldObjectNeed *entities.Paths) (eval.Env, error) {
	res, ok := e.resourceFor(t)
	if !ok {
		return eval.Env{}, fmt.Errorf("the schema has no resource entity %s", t)
	}
	if data.Resource != "" && (data.Resource != res.Key.Resource || data.APIGroup != res.Key.Group || data.Subresource != res.Key.Subresource) {
		return eval.Env{}, fmt.Errorf("the condition is for %s but the admission request is for %s", t, describeResource(data))
	}
	req := &entities.Request{ResourceRequest: true, APIGroup: res.Key.Group, Resource: res.Key.Resource, Subresource: res.Key.Subresource, Namespace: data.Namespace, Name: data.Name}
	conv := entities.NewObjectConverter(e.Schema)
	var object, oldObject map[string]any
	var err error
	if object, err = decodeObject(data.Object); err != nil {
		return eval.Env{}, fmt.Errorf("object: %v", err)
	}
	if oldObject, err = decodeObject(data.OldObject); err != nil {
		return eval.Env{}, fmt.Errorf("oldObject: %v", err)
	}
	if req.Name == "" {
		req.Name = metadataString(object, "name")
	}
	if req.Name == "" {
		req.Name = metadataString(oldObject, "name")
	}
	if req.Namespace == "" && res.Namespaced {
		if req.Namespace = metadataString(object, "namespace"); req.Namespace == "" {
			req.Namespace = metadataString(oldObject, "namespace")
		}
	}
	target := entities.Target{EntityType: t, Resource: res}
	attrs := target.Attributes(req, nil, nil)
	if object != nil {
		attrs[schemagen.AttrObject] = conv.ObjectPaths(res, object, objectNeed)
	}
	if oldObject != nil {
		attrs[schemagen.AttrOldObject] = conv.ObjectPaths(res, oldObject, oldObjectNeed)
	}
	if res.Namespaced && req.Namespace != "" && e.Namespaces != nil {
		if ns, ok := e.Namespaces.Namespace(req.Namespace); ok && ns != nil {
			attrs[schemagen.AttrNamespaceObject] = conv.NamespaceObject(ns)
		}
	}
	ents := &entities.Entities{Maps: conv.Maps}
	uid := target.EntityUID(req)
	ents.Resource = types.Entity{UID: uid, Attributes: types.NewRecord(attrs)}
	var principal types.EntityUID
	if data.User != nil {
		ents.Principal = entities.PrincipalEntity(*data.User)
		principal = ents.Principal.UID
	}
	return eval.Env{Entities: ents, Principal: principal, Action: schemagen.AllVerbsAction, Resource: uid, Context: types.NewRecord(nil)}, nil
}

func describeResource(d *AdmissionData) string {
	s := d.Resource
	if d.APIGroup != "" {
		s = d.APIGroup + "/" + s
	}
	if d.Subresource != "" {
		s += "/" + d.Subresource
	}
	return s
}

func decodeObject(raw []byte) (map[string]any, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil {
		return nil, err
	}
	return obj, nil
}

func metadataString(obj map[string]any, field string) string {
	md, _ := obj["metadata"].(map[string]any)
	s, _ := md[field].(string)
	return s
}

// Explain decodes a condition of the given effect, verified for the request
// of data, into its entity type and its Cedar expression: what the condition
// checks, for a person to read.
func (e *Evaluator) Explain(cond wire.Condition, effect engine.DecisionType, data *AdmissionData) (types.EntityType, string, error) {
	d, err := e.Codec.decode(cond, effect, admissionBindings(data))
	if err != nil {
		return "", "", err
	}
	if d.members != nil {
		text, err := groupText(d.members)
		return d.entityType, text, err
	}
	text, err := engine.ExprText(d.expr)
	return d.entityType, text, err
}
