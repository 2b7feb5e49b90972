package engine

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/lib/cedarx/ast"
	"github.com/kcedar/kcedar/internal/lib/cedarx/eval"
	"github.com/kcedar/kcedar/internal/schemagen"
)

// Who can: a request without a user is partially evaluated with the
// principal unknown. Each candidate policy (a policy whose scope may match
// the verb and resource for some principal) becomes an entry: the subjects
// its principal scope selects, and what is left of its conditions once the
// request's known values are folded in (a Cedar expression over the
// principal, the objects, and the request's open values). The answer is a
// rule, exact for every principal P:
//
//	P is allowed iff some allowed or conditional entry selects P and its
//	condition holds for P, and no denied entry selects P with a condition
//	that may hold for P,
//
// where "holds" follows Authorize: a condition on an open value (an empty
// name or namespace) must hold for every value, one on the objects is a
// condition of a conditional decision. AccessReview.Decide applies the rule.

// SubjectKind is the kind of a subject selector.
type SubjectKind string

const (
	// A single principal, by username.
	SubjectUser           SubjectKind = "User"
	SubjectServiceAccount SubjectKind = "ServiceAccount"
	SubjectNode           SubjectKind = "Node"
	// Members of a group (of PrincipalType only, when set).
	SubjectGroup SubjectKind = "Group"
	// Every ServiceAccount of Namespace.
	SubjectServiceAccounts SubjectKind = "ServiceAccounts"
	// Every principal of a type (Name is the Cedar type, k8s::User, ...).
	SubjectPrincipalType SubjectKind = "PrincipalType"
	// Every principal whose username matches a Cedar `like` pattern (Name, as
	// Cedar text), of PrincipalType only when set.
	SubjectUsernamePattern SubjectKind = "UsernamePattern"
	// Every principal.
	SubjectAll SubjectKind = "All"
)

// Subject selects principals.
type Subject struct {
	Kind SubjectKind `json:"kind"`
	// Name is the username (User, ServiceAccount, Node), the group, the
	// principal type or the pattern.
	Name string `json:"name,omitempty"`
	// Namespace of a ServiceAccount or of ServiceAccounts.
	Namespace string `json:"namespace,omitempty"`
	// PrincipalType restricts a Group or UsernamePattern to one type.
	PrincipalType string `json:"principalType,omitempty"`
}

// String is the subject as people read it.
func (s Subject) String() string {
	switch s.Kind {
	case SubjectAll:
		return "*"
	case SubjectServiceAccounts:
		return schemagen.ServiceAccountUserPrefix + s.Namespace + ":*"
	case SubjectPrincipalType:
		return "every " + strings.TrimPrefix(s.Name, "k8s::")
	}
	return s.Name
}

// Matches reports whether the subject selects the principal u, exactly as
// the principal scope it came from does.
func (s Subject) Matches(u entities.UserInfo) bool {
	id := entities.IdentityOf(u.Name, u.Groups)
	uid := id.UID
	if s.PrincipalType != "" && string(uid.Type) != s.PrincipalType {
		return false
	}
	switch s.Kind {
	case SubjectAll:
		return true
	case SubjectUser, SubjectServiceAccount, SubjectNode:
		return string(uid.ID) == s.Name && subjectKindOf(uid.Type) == s.Kind
	case SubjectGroup:
		return slices.Contains(u.Groups, s.Name)
	case SubjectServiceAccounts:
		return uid.Type == schemagen.ServiceAccountType && id.Namespace == s.Namespace
	case SubjectPrincipalType:
		return string(uid.Type) == s.Name
	case SubjectUsernamePattern:
		p, err := parsePattern(s.Name)
		return err == nil && p.Match(types.String(u.Name))
	}
	return false
}

func subjectKindOf(t types.EntityType) SubjectKind {
	switch t {
	case schemagen.ServiceAccountType:
		return SubjectServiceAccount
	case schemagen.NodeType:
		return SubjectNode
	case schemagen.UserType:
		return SubjectUser
	}
	return ""
}

func isPrincipalType(t types.EntityType) bool { return subjectKindOf(t) != "" }

// principalTypeOf is the entity type of a single principal's subject kind.
func principalTypeOf(k SubjectKind) types.EntityType {
	switch k {
	case SubjectServiceAccount:
		return schemagen.ServiceAccountType
	case SubjectNode:
		return schemagen.NodeType
	}
	return schemagen.UserType
}

// SubjectAccess is one entry of an access review: subjects, the condition
// under which the policies apply to them, and the policies.
type SubjectAccess struct {
	Subject
	// Condition is what the policies still need, as a Cedar expression over
	// principal, resource and context; empty when nothing.
	Condition string `json:"condition,omitempty"`
	// Policies are the ids of the policies this entry comes from.
	Policies []string `json:"policies"`
	// Case names the verb (and, for k8s::Resource, the attributes taken as
	// absent) when the request stands for several cases.
	Case string `json:"case,omitempty"`

	effect      types.Effect
	usesObjects bool
}

// AccessReview is who can make a request: the answer to a
// ResourceAccessReview (users and groups) plus what Cedar needs.
type AccessReview struct {
	// Users and Groups are allowed without conditions (ServiceAccounts and
	// nodes by username), unless an unconditional forbid on the same subject
	// (or on every principal) denies them; other forbids are in Denied.
	// When the request stands for several cases (verb "*"), a subject is
	// listed only if it is allowed in every case.
	Users  []string `json:"users"`
	Groups []string `json:"groups"`
	// Allowed are the entries without conditions, with their policies
	// (including selectors that are not a single name).
	Allowed []SubjectAccess `json:"allowed"`
	// Conditional are the subjects allowed only under a condition.
	Conditional []SubjectAccess `json:"conditional"`
	// Denied are the subjects forbids exclude (when their condition holds),
	// even if another entry allows them.
	Denied []SubjectAccess `json:"denied"`
	// Cases lists the cases of a request that stands for several.
	Cases []string `json:"cases,omitempty"`
	// Errors are policies that cannot be analysed with the principal unknown.
	Errors []string `json:"evaluationErrors,omitempty"`

	cases []accessCase
}

// accessCase is one verb (and world) of the request.
type accessCase struct {
	label      string
	verb       string
	target     entities.Target
	attrs      types.RecordMap
	shapes     []shape
	admission  bool
	resourceID types.EntityUID
	entries    []*SubjectAccess
}

// WhoCan answers who may make req (whose user is ignored): see the rule
// above. Open values are handled as Authorize handles them. A cancelled ctx
// stops it with ctx's error.
func (e *Engine) WhoCan(ctx context.Context, req *entities.Request) (AccessReview, error) {
	e = e.uncached()
	var rv AccessReview
	target := entities.ResolveTarget(e.schema, req)
	open := target.Open(req)
	var optional []string
	for _, attr := range []string{schemagen.AttrNamespace, schemagen.AttrName} {
		if open[attr] && target.OptionalWhenOpen(attr) {
			optional = append(optional, attr)
		}
	}
	for _, verb := range entities.Verbs(e.schema, req) {
		for mask := 0; mask < 1<<len(optional); mask++ {
			absent := map[string]bool{}
			label := verb
			for i, attr := range optional {
				if mask&(1<<i) != 0 {
					absent[attr] = true
					label += ", no " + attr
				}
			}
			if err := ctx.Err(); err != nil {
				return AccessReview{}, err
			}
			rv.cases = append(rv.cases, e.whoCanCase(req, verb, label, target, open, absent, &rv))
		}
	}
	rv.summarize()
	return rv, nil
}

func (e *Engine) whoCanCase(req *entities.Request, verb, label string, target entities.Target, open, absent map[string]bool, rv *AccessReview) accessCase {
	c := accessCase{label: label, verb: verb, target: target, resourceID: target.EntityUID(req)}
	c.attrs = target.Attributes(req, open, func(attr string) types.Value {
		if absent[attr] {
			return nil
		}
		return eval.Variable(types.String(attr))
	})
	c.shapes = AdmissionShapes(target, req, verb)
	c.admission = len(c.shapes) > 0
	if !c.admission {
		c.shapes = []shape{{}}
	}
	principal := eval.Variable("principal")
	merged := map[string]*SubjectAccess{}
	for _, p := range e.enforcedOnly(e.policies.CandidatesAnyPrincipal(verb, target.EntityType)) {
		sub, ok := scopeSubject(p.AST.Principal)
		if !ok {
			continue // the scope selects no principal
		}
		q := *e.inputsOf(p).partialAST
		q.Principal = ast.ScopeTypeAll{}
		expr := c.residual(&q, p.UsesObjects, principal, types.Entity{})
		r := classify(p, expr)
		if r.kind == notSatisfied || r.kind == errored && p.Effect == types.Permit {
			continue
		}
		sub, expr = refineSubject(sub, expr)
		text := ""
		if !isBool(expr, true) {
			t, err := ExprText(expr)
			if err != nil {
				rv.Errors = append(rv.Errors, fmt.Sprintf("policy %s: %v", p.ID, err))
				continue
			}
			text = t
		}
		key := fmt.Sprintf("%v\x00%t\x00%s\x00%s\x00%s\x00%s\x00%s", p.Effect, p.UsesObjects, sub.Kind, sub.Name, sub.Namespace, sub.PrincipalType, text)
		if m, ok := merged[key]; ok {
			m.Policies = append(m.Policies, p.ID)
			continue
		}
		sa := &SubjectAccess{Subject: sub, Condition: text, Policies: []string{p.ID}, effect: p.Effect, usesObjects: p.UsesObjects}
		merged[key] = sa
		c.entries = append(c.entries, sa)
	}
	return c
}

// residual partially evaluates q (whose principal scope was handled) in this
// case, for the principal given (a variable, or a known entity), splitting
// on the stored object's presence as Authorize does.
func (c *accessCase) residual(q *ast.Policy, usesObjects bool, principal types.Value, principalEntity types.Entity) ast.IsNode {
	env := func(sh shape) eval.Env {
		m := make(types.RecordMap, len(c.attrs)+2)
		for k, v := range c.attrs {
			m[k] = v
		}
		if sh.object {
			m[schemagen.AttrObject] = eval.Variable(schemagen.AttrObject)
		}
		if sh.oldObject {
			m[schemagen.AttrOldObject] = eval.Variable(schemagen.AttrOldObject)
		}
		action := schemagen.ActionUID(c.verb)
		ents := &entities.Entities{Principal: principalEntity, Resource: types.Entity{UID: c.resourceID, Attributes: types.NewRecord(m)}}
		return eval.Env{Entities: ents, Principal: principal, Action: action, Resource: c.resourceID, Context: entities.ContextFor(action)}
	}
	expr := partialEval(env(c.shapes[0]), q)
	if usesObjects && len(c.shapes) == 2 {
		other := partialEval(env(c.shapes[1]), q)
		if !ast.Equal(ast.NewNode(expr), ast.NewNode(other)) {
			expr = simplify(ast.NodeTypeIfThenElse{
				If:   ast.NodeTypeHas{StrOpNode: ast.StrOpNode{Arg: ast.NodeTypeVariable{Name: "resource"}, Value: schemagen.AttrOldObject}},
				Then: expr, Else: other,
			})
		}
	}
	return expr
}

// scopeSubject is the subjects a principal scope selects; ok is false when
// it selects none (a scope on an entity that is never a principal).
func scopeSubject(s ast.IsPrincipalScopeNode) (Subject, bool) {
	single := func(uid types.EntityUID) (Subject, bool) {
		kind := subjectKindOf(uid.Type)
		if kind == "" || !entities.IsPrincipal(uid) {
			// Not a principal type, or a username Kubernetes never gives
			// this type (k8s::User::"system:serviceaccount:ns:sa" is never
			// a principal).
			return Subject{}, false
		}
		sub := Subject{Kind: kind, Name: string(uid.ID)}
		if kind == SubjectServiceAccount {
			sub.Namespace, _, _ = entities.ServiceAccountName(sub.Name)
		}
		return sub, true
	}
	in := func(uid types.EntityUID) (Subject, bool) {
		if uid.Type == schemagen.GroupType {
			return Subject{Kind: SubjectGroup, Name: string(uid.ID)}, true
		}
		// A principal's only ancestors are its groups.
		return single(uid)
	}
	switch v := s.(type) {
	case ast.ScopeTypeAll:
		return Subject{Kind: SubjectAll}, true
	case ast.ScopeTypeEq:
		return single(v.Entity)
	case ast.ScopeTypeIn:
		return in(v.Entity)
	case ast.ScopeTypeIs:
		if !isPrincipalType(v.Type) {
			return Subject{}, false
		}
		return Subject{Kind: SubjectPrincipalType, Name: string(v.Type)}, true
	case ast.ScopeTypeIsIn:
		if !isPrincipalType(v.Type) {
			return Subject{}, false
		}
		sub, ok := in(v.Entity)
		if !ok {
			return sub, false
		}
		if sub.Kind == SubjectGroup {
			sub.PrincipalType = string(v.Type)
			return sub, true
		}
		if v.Type != v.Entity.Type {
			return Subject{}, false
		}
		return sub, true
	}
	return Subject{}, false
}

// refineSubject moves the leading conjuncts of a residual that only select
// principals into the subject: `principal is T`, `principal.namespace ==
// "ns"` (of ServiceAccounts), `principal.username like "p"` and
// `principal.username == "u"`. Only leading conjuncts move: they are
// evaluated first and never fail, so the subject and the rest mean exactly
// the conjunction.
//
// `if resource has oldObject then A && R else false` (an update's split on
// the stored object) is refined as A && (if ... then R else false): the test
// never fails, and neither does A.
func refineSubject(sub Subject, expr ast.IsNode) (Subject, ast.IsNode) {
	if ite, ok := expr.(ast.NodeTypeIfThenElse); ok {
		if has, isHas := ite.If.(ast.NodeTypeHas); isHas && isResourceVar(has.Arg) && isBool(ite.Else, false) {
			next, then := refineSubject(sub, ite.Then)
			if next != sub {
				return next, simplify(ast.NodeTypeIfThenElse{If: ite.If, Then: then, Else: ite.Else})
			}
		}
		return sub, expr
	}
	for {
		first, rest := splitFirst(expr)
		next, ok := refineWith(sub, first)
		if !ok {
			return sub, expr
		}
		sub, expr = next, rest
	}
}

// splitFirst splits `A && B` (left-associated chains included) into its
// first conjunct and the rest (true when there is none).
func splitFirst(n ast.IsNode) (first, rest ast.IsNode) {
	and, ok := n.(ast.NodeTypeAnd)
	if !ok {
		return n, ast.NodeValue{Value: types.True}
	}
	f, r := splitFirst(and.Left)
	if isBool(r, true) {
		return f, and.Right
	}
	return f, ast.NodeTypeAnd{BinaryNode: ast.BinaryNode{Left: r, Right: and.Right}}
}

func isResourceVar(n ast.IsNode) bool {
	v, ok := n.(ast.NodeTypeVariable)
	return ok && v.Name == "resource"
}

func isPrincipalVar(n ast.IsNode) bool {
	v, ok := n.(ast.NodeTypeVariable)
	return ok && v.Name == "principal"
}

// principalAttrEquals matches `principal.<attr> == "lit"` (either side).
func principalAttrEquals(n ast.IsNode, attr string) (string, bool) {
	eq, ok := n.(ast.NodeTypeEquals)
	if !ok {
		return "", false
	}
	for _, lr := range [2][2]ast.IsNode{{eq.Left, eq.Right}, {eq.Right, eq.Left}} {
		acc, ok := lr[0].(ast.NodeTypeAccess)
		if !ok || !isPrincipalVar(acc.Arg) || string(acc.Value) != attr {
			continue
		}
		if v, ok := lr[1].(ast.NodeValue); ok {
			if s, ok := v.Value.(types.String); ok {
				return string(s), true
			}
		}
	}
	return "", false
}

func refineWith(sub Subject, n ast.IsNode) (Subject, bool) {
	typ := sub.PrincipalType
	if sub.Kind == SubjectPrincipalType {
		typ = sub.Name
	}
	switch v := n.(type) {
	case ast.NodeTypeIs:
		if !isPrincipalVar(v.Left) || !isPrincipalType(v.EntityType) {
			return sub, false
		}
		switch {
		case sub.Kind == SubjectAll:
			return Subject{Kind: SubjectPrincipalType, Name: string(v.EntityType)}, true
		case typ == string(v.EntityType):
			return sub, true
		case (sub.Kind == SubjectGroup || sub.Kind == SubjectUsernamePattern) && typ == "":
			sub.PrincipalType = string(v.EntityType)
			return sub, true
		}
		return sub, false
	case ast.NodeTypeLike:
		acc, ok := v.Arg.(ast.NodeTypeAccess)
		if !ok || !isPrincipalVar(acc.Arg) || acc.Value != schemagen.AttrUsername {
			return sub, false
		}
		if sub.Kind != SubjectAll && sub.Kind != SubjectPrincipalType {
			return sub, false
		}
		return Subject{Kind: SubjectUsernamePattern, Name: string(v.Value.MarshalCedar()), PrincipalType: typ}, true
	case ast.NodeTypeEquals:
		if name, ok := principalAttrEquals(v, schemagen.AttrUsername); ok && (sub.Kind == SubjectAll || sub.Kind == SubjectPrincipalType) {
			return usernameSubject(name, typ)
		}
		if ns, ok := principalAttrEquals(v, schemagen.AttrNamespace); ok && sub.Kind == SubjectPrincipalType && typ == string(schemagen.ServiceAccountType) {
			// principal.namespace of a ServiceAccount never fails.
			return Subject{Kind: SubjectServiceAccounts, Namespace: ns}, true
		}
		if name, ok := principalAttrEquals(v, schemagen.AttrName); ok && name != "" {
			// principal.name of a ServiceAccount or a Node never fails.
			switch {
			case sub.Kind == SubjectServiceAccounts && !strings.Contains(name, ":"):
				return scopeSubject(ast.ScopeTypeEq{Entity: types.NewEntityUID(schemagen.ServiceAccountType, types.String(schemagen.ServiceAccountUserPrefix+sub.Namespace+":"+name))})
			case sub.Kind == SubjectPrincipalType && typ == string(schemagen.NodeType):
				return scopeSubject(ast.ScopeTypeEq{Entity: types.NewEntityUID(schemagen.NodeType, types.String(schemagen.NodeUserPrefix+name))})
			}
		}
	}
	return sub, false
}

// usernameSubject is the subject of `principal.username == name`, of type
// typ when not "": the one principal of that username and type, or, for a
// username that is a User or a Node by its groups (entities.UsernameTypes),
// a pattern matching the username alone.
func usernameSubject(name, typ string) (Subject, bool) {
	ts := entities.UsernameTypes(name)
	switch {
	case typ != "":
		return scopeSubject(ast.ScopeTypeEq{Entity: types.NewEntityUID(types.EntityType(typ), types.String(name))})
	case len(ts) == 1:
		return scopeSubject(ast.ScopeTypeEq{Entity: types.NewEntityUID(ts[0], types.String(name))})
	}
	return Subject{Kind: SubjectUsernamePattern, Name: string(types.NewPattern(types.String(name)).MarshalCedar())}, true
}

func parsePattern(text string) (types.Pattern, error) {
	n, err := ParseExpr("principal.username like " + text)
	if err != nil {
		return types.Pattern{}, err
	}
	l, ok := n.(ast.NodeTypeLike)
	if !ok {
		return types.Pattern{}, fmt.Errorf("not a pattern: %s", text)
	}
	return l.Value, nil
}

// summarize fills the public lists from the cases' entries.
func (rv *AccessReview) summarize() {
	allowedIn := map[Subject]int{}
	// Subjects an unconditional forbid denies in some case are never
	// listed as allowed (see deniedBy).
	var forbids []Subject
	for _, c := range rv.cases {
		seen := map[Subject]bool{}
		for _, e := range c.entries {
			out := *e
			slices.Sort(out.Policies)
			if len(rv.cases) > 1 {
				out.Case = c.label
			}
			switch {
			case e.effect == types.Forbid:
				rv.Denied = append(rv.Denied, out)
				if e.Condition == "" {
					forbids = append(forbids, e.Subject)
				}
			case e.Condition == "":
				rv.Allowed = append(rv.Allowed, out)
				if !seen[e.Subject] {
					seen[e.Subject] = true
					allowedIn[e.Subject]++
				}
			default:
				rv.Conditional = append(rv.Conditional, out)
			}
		}
		if len(rv.cases) > 1 {
			rv.Cases = append(rv.Cases, c.label)
		}
	}
	for sub, n := range allowedIn {
		if n != len(rv.cases) || sub.PrincipalType != "" || deniedBy(sub, forbids) {
			continue
		}
		switch sub.Kind {
		case SubjectUser, SubjectServiceAccount, SubjectNode:
			rv.Users = append(rv.Users, sub.Name)
		case SubjectGroup:
			rv.Groups = append(rv.Groups, sub.Name)
		}
	}
	sort.Strings(rv.Users)
	sort.Strings(rv.Groups)
	if rv.Users == nil {
		rv.Users = []string{}
	}
	if rv.Groups == nil {
		rv.Groups = []string{}
	}
	for _, l := range []*[]SubjectAccess{&rv.Allowed, &rv.Conditional, &rv.Denied} {
		sort.SliceStable(*l, func(i, j int) bool { return lessAccess((*l)[i], (*l)[j]) })
		if *l == nil {
			*l = []SubjectAccess{}
		}
	}
}

// deniedBy reports whether an unconditional forbid on one of the subjects
// in forbids applies to every principal sub names (see Covers).
func deniedBy(sub Subject, forbids []Subject) bool {
	for _, f := range forbids {
		if f.Covers(sub) {
			return true
		}
	}
	return false
}

// Covers reports whether s selects every principal that o names, when o
// is a single principal (User, ServiceAccount, Node: s selects it, being
// the same principal, every principal, every principal of its type, a
// username pattern it matches or every ServiceAccount of its namespace) or
// a group (s is the same group or every principal). Other selectors are
// never covered: a group's members are not known.
func (s Subject) Covers(o Subject) bool {
	switch o.Kind {
	case SubjectUser, SubjectServiceAccount, SubjectNode:
		groups, ok := entities.GroupsFor(types.NewEntityUID(principalTypeOf(o.Kind), types.String(o.Name)))
		return ok && o.PrincipalType == "" && s.Matches(entities.UserInfo{Name: o.Name, Groups: groups})
	case SubjectGroup:
		return o.PrincipalType == "" && (s.Kind == SubjectAll && s.PrincipalType == "" || s == o)
	}
	return false
}

func lessAccess(a, b SubjectAccess) bool {
	if a.Case != b.Case {
		return a.Case < b.Case
	}
	if a.Kind != b.Kind {
		return a.Kind < b.Kind
	}
	if a.Name != b.Name {
		return a.Name < b.Name
	}
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	if a.Condition != b.Condition {
		return a.Condition < b.Condition
	}
	return strings.Join(a.Policies, ",") < strings.Join(b.Policies, ",")
}

// Decide applies the review's rule to the principal u: the decision
// Authorize would return for the request made by u, computed only from the
// entries (their subjects and their printed conditions). It is how the
// review is tested against Authorize.
func (rv *AccessReview) Decide(u entities.UserInfo, policies *cedarlang.PolicySet) Decision {
	principal := entities.PrincipalEntity(u)
	var all everyCase
	var single Decision
	for _, c := range rv.cases {
		var results []policyResult
		for _, e := range c.entries {
			if !e.Subject.Matches(u) {
				continue
			}
			q := &ast.Policy{Effect: ast.Effect(e.effect), Principal: ast.ScopeTypeAll{}, Action: ast.ScopeTypeAll{}, Resource: ast.ScopeTypeAll{}}
			if e.Condition != "" {
				body, err := ParseExpr(e.Condition)
				if err != nil {
					return Denied(nil, []error{fmt.Errorf("condition %q: %v", e.Condition, err)})
				}
				q.Conditions = []ast.ConditionType{{Condition: ast.ConditionWhen, Body: body}}
			}
			expr := c.residual(q, e.usesObjects, principal.UID, principal)
			for _, id := range e.Policies {
				p, ok := policies.Get(id)
				if !ok {
					return Denied(nil, []error{fmt.Errorf("policy %s is not in the set", id)})
				}
				results = append(results, classify(p, expr))
			}
		}
		d := NoOpinion(nil)
		if len(results) > 0 {
			d = decide(results, c.target.EntityType)
			if d.IsConditional() && !c.admission {
				d = d.FailureDecision()
			}
		}
		single = d
		all.add(d)
	}
	if len(rv.cases) == 1 {
		return single
	}
	return all.decision()
}
