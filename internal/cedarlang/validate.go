package cedarlang

import (
	"crypto/sha256"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/lib/cedarx/ast"
	cedarschema "github.com/kcedar/kcedar/internal/lib/cedarx/schema"
	"github.com/kcedar/kcedar/internal/lib/cedarx/schema/resolved"
	"github.com/kcedar/kcedar/internal/lib/cedarx/schema/validate"
	"github.com/kcedar/kcedar/internal/lib/parallel"
	"github.com/kcedar/kcedar/internal/schemagen"
)

// SchemaValidator type-checks policies against the generated schema with
// cedar-go's strict validator. cedar-go checks a policy against every
// principal x action x resource combination in the schema, which at
// Kubernetes scale costs tens of milliseconds even for a tightly scoped
// policy; so each policy is checked against a slice of the schema holding
// only the actions its scope names (restricted to the resource types its
// scope allows). Policies that differ only in string literals type-check
// alike, so a policy is checked once per shape (see shapeKey): a set of
// 100,000 policies written from a few dozen templates costs a few dozen
// checks, and a reload only checks new shapes.
type SchemaValidator struct {
	full *resolved.Schema

	mu sync.Mutex
	// valid holds the shapes known to be valid; invalid the verdicts on
	// invalid policies by text (their errors name the policy).
	valid   map[[32]byte]bool
	invalid map[[32]byte]error
	// keepIDs: entity types whose ids the validator checks (actions, enums).
	keepIDs map[types.EntityType]bool
	// noCollapse turns off collapse (tests compare both).
	noCollapse bool
}

// NewSchemaValidator resolves s once.
func NewSchemaValidator(s *schemagen.Schema) (*SchemaValidator, error) {
	rs, err := cedarschema.NewSchemaFromAST(s.CedarAST()).Resolve()
	if err != nil {
		return nil, fmt.Errorf("resolving the schema: %w", err)
	}
	keep := map[types.EntityType]bool{}
	for uid := range rs.Actions {
		keep[uid.Type] = true
	}
	for t := range rs.Enums {
		keep[t] = true
	}
	return &SchemaValidator{full: rs, valid: map[[32]byte]bool{}, invalid: map[[32]byte]error{}, keepIDs: keep}, nil
}

// Resolved is the resolved schema the validator checks against (read only),
// so other checkers of the same schema need not resolve it again.
func (v *SchemaValidator) Resolved() *resolved.Schema { return v.full }

// Validate checks policies in parallel.
func (v *SchemaValidator) Validate(policies []*Policy) []error {
	errs := make([]error, len(policies))
	parallel.For(len(policies), func(i int) { errs[i] = v.validateOne(policies[i]) })
	var out []error
	for _, e := range errs {
		if e != nil {
			out = append(out, e)
		}
	}
	return out
}

func (v *SchemaValidator) validateOne(p *Policy) error {
	return annotate(p, v.validateRaw(p))
}

// maxCached bounds each verdict cache (reloads must not grow memory).
const maxCached = 1 << 16

// validateRaw is cedar-go's verdict on p, cached by shape (valid) or text
// (invalid).
func (v *SchemaValidator) validateRaw(p *Policy) error {
	shape, shaped := shapeKey(p.AST, v.keepIDs)
	if shaped {
		v.mu.Lock()
		ok := v.valid[shape]
		v.mu.Unlock()
		if ok {
			return nil
		}
	}
	text := sha256.Sum256(p.Text())
	v.mu.Lock()
	err, ok := v.invalid[text]
	v.mu.Unlock()
	if ok {
		return err
	}
	err = validate.New(v.slice(p.AST)).Policy(p.ID, p.AST)
	v.mu.Lock()
	defer v.mu.Unlock()
	switch {
	case err == nil && shaped:
		if len(v.valid) >= maxCached {
			clear(v.valid)
		}
		v.valid[shape] = true
	case err != nil:
		if len(v.invalid) >= maxCached {
			clear(v.invalid)
		}
		v.invalid[text] = err
	}
	return err
}

// shapeKey hashes what the validator's verdict on p depends on: p without
// annotations, with the string literals of its conditions blanked (a
// string literal's value never changes a type) and the ids of entity
// literals blanked unless keepIDs holds their type (actions and enumerated
// types, whose ids the validator checks); entity types, the arguments of
// extension calls (ip("..."), which the validator parses), attribute names,
// patterns and everything else are kept. ok is false for a policy holding a
// literal record or set value (hashed maps), which is then not cached by
// shape.
func shapeKey(p *ast.Policy, keepIDs map[types.EntityType]bool) (key [32]byte, ok bool) {
	h := sha256.New()
	w := &shapeWriter{buf: make([]byte, 0, 512), ok: true, keepIDs: keepIDs}
	w.buf = fmt.Appendf(w.buf, "%v|%#v|%#v|%#v|", p.Effect, w.scope(p.Principal), w.scope(p.Action), w.scope(p.Resource))
	for _, c := range p.Conditions {
		w.buf = fmt.Appendf(w.buf, "c%v:", c.Condition)
		w.node(reflect.ValueOf(&c.Body).Elem(), false)
	}
	if !w.ok {
		return key, false
	}
	h.Write(w.buf)
	copy(key[:], h.Sum(nil))
	return key, true
}

type shapeWriter struct {
	buf     []byte
	ok      bool
	keepIDs map[types.EntityType]bool
}

func (w *shapeWriter) uid(e types.EntityUID) types.EntityUID {
	if w.keepIDs[e.Type] {
		return e
	}
	return types.EntityUID{Type: e.Type}
}

// scope is s with entity ids blanked as uid does.
func (w *shapeWriter) scope(s any) any {
	switch v := s.(type) {
	case ast.ScopeTypeEq:
		v.Entity = w.uid(v.Entity)
		return v
	case ast.ScopeTypeIn:
		v.Entity = w.uid(v.Entity)
		return v
	case ast.ScopeTypeIsIn:
		v.Entity = w.uid(v.Entity)
		return v
	case ast.ScopeTypeInSet:
		es := make([]types.EntityUID, len(v.Entities))
		for i, e := range v.Entities {
			es[i] = w.uid(e)
		}
		v.Entities = es
		return v
	}
	return s
}

var (
	nodeValueType = reflect.TypeOf(ast.NodeValue{})
	extCallType   = reflect.TypeOf(ast.NodeTypeExtensionCall{})
	likeType      = reflect.TypeOf(ast.NodeTypeLike{})
)

// node writes v (part of a condition) unambiguously; keep is set below an
// extension call, where string literals are kept.
func (w *shapeWriter) node(v reflect.Value, keep bool) {
	if !w.ok {
		return
	}
	switch v.Kind() {
	case reflect.Interface:
		if v.IsNil() {
			w.buf = append(w.buf, "nil;"...)
			return
		}
		e := v.Elem()
		w.buf = append(w.buf, e.Type().String()...)
		w.buf = append(w.buf, '{')
		if e.Type() == nodeValueType && !keep && e.CanInterface() {
			switch lit := e.Interface().(ast.NodeValue).Value.(type) {
			case types.String:
				w.buf = append(w.buf, "str}"...)
				return
			case types.EntityUID:
				w.buf = fmt.Appendf(w.buf, "%q}", w.uid(lit).String())
				return
			}
		}
		if e.Type() == likeType && !keep {
			// A pattern types like a string literal: any pattern will do.
			w.node(e.FieldByName("Arg"), keep)
			w.buf = append(w.buf, ",pattern}"...)
			return
		}
		w.node(e, keep || e.Type() == extCallType)
		w.buf = append(w.buf, '}')
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			w.node(v.Field(i), keep)
			w.buf = append(w.buf, ',')
		}
	case reflect.Slice, reflect.Array:
		w.buf = fmt.Appendf(w.buf, "[%d:", v.Len())
		for i := 0; i < v.Len(); i++ {
			w.node(v.Index(i), keep)
			w.buf = append(w.buf, ',')
		}
		w.buf = append(w.buf, ']')
	case reflect.String:
		w.buf = fmt.Appendf(w.buf, "%q", v.String())
	case reflect.Bool:
		w.buf = fmt.Appendf(w.buf, "%v", v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		w.buf = fmt.Appendf(w.buf, "%d", v.Int())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		w.buf = fmt.Appendf(w.buf, "%d", v.Uint())
	case reflect.Pointer:
		if v.IsNil() {
			w.buf = append(w.buf, "nil;"...)
			return
		}
		w.node(v.Elem(), keep)
	default:
		// Maps (record and set values) and anything unexpected.
		w.ok = false
	}
}

// ValidateEach checks policies in parallel like Validate, but returns one
// entry per policy, in order: nil when the policy is valid, else cedar-go's
// individual complaints about it (each one problem, without the file and
// policy prefix Validate adds), for tools that explain them.
func (v *SchemaValidator) ValidateEach(policies []*Policy) [][]error {
	out := make([][]error, len(policies))
	parallel.For(len(policies), func(i int) {
		if err := v.validateRaw(policies[i]); err != nil {
			out[i] = flatten(err)
		}
	})
	return out
}

// flatten unwraps joined errors into a list.
func flatten(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}

func annotate(p *Policy, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: policy %s: %w", p.Source, p.ID, err)
}

// slice returns a schema with the actions p's action scope can match, each
// applying only to the resource types p's resource scope allows. Entity types
// are shared with the full schema.
func (v *SchemaValidator) slice(p *ast.Policy) *resolved.Schema {
	var rtypes []types.EntityType
	if t, ok := ScopeResourceType(p.Resource); ok {
		rtypes = []types.EntityType{t}
	}
	keep := func(uid types.EntityUID) bool { return true }
	switch a := p.Action.(type) {
	case ast.ScopeTypeEq:
		keep = func(uid types.EntityUID) bool { return uid == a.Entity }
	case ast.ScopeTypeIn:
		keep = func(uid types.EntityUID) bool { return uid == a.Entity || v.actionIn(uid, a.Entity) }
	case ast.ScopeTypeInSet:
		keep = func(uid types.EntityUID) bool {
			for _, e := range a.Entities {
				if uid == e || v.actionIn(uid, e) {
					return true
				}
			}
			return false
		}
	}
	out := &resolved.Schema{Namespaces: v.full.Namespaces, Entities: v.full.Entities, Enums: v.full.Enums, Actions: map[types.EntityUID]resolved.Action{}}
	for uid, act := range v.full.Actions {
		if !keep(uid) {
			continue
		}
		if rtypes != nil && act.AppliesTo != nil {
			at := *act.AppliesTo
			at.Resources = slices.DeleteFunc(slices.Clone(at.Resources), func(t types.EntityType) bool { return !slices.Contains(rtypes, t) })
			act.AppliesTo = &at
		}
		out.Actions[uid] = act
	}
	if !v.noCollapse && !mentionsActions(p) {
		collapse(out)
	}
	return out
}

// collapse merges the actions of a schema slice that cedar-go would type
// check identically. cedar-go checks a policy's conditions once per
// principal type x action x resource type its scope allows; when the
// conditions never mention the action (nor the context, the same empty
// record for every kcedar action), the action changes nothing, so one
// representative action per set of principal types, applying to the union
// of their resource types, gives the same complaints in a fraction of the
// time (an unscoped policy otherwise type-checks every resource type once
// per verb). The other actions stay in the slice, without appliesTo, so the
// scope still resolves and "no applicable action" is still detected.
func collapse(s *resolved.Schema) {
	type group struct {
		rep       types.EntityUID
		resources []types.EntityType
	}
	groups := map[string]*group{}
	var uids []types.EntityUID
	for uid, act := range s.Actions {
		if act.AppliesTo != nil {
			uids = append(uids, uid)
		}
	}
	slices.SortFunc(uids, func(a, b types.EntityUID) int { return strings.Compare(a.String(), b.String()) })
	for _, uid := range uids {
		act := s.Actions[uid]
		ps := slices.Clone(act.AppliesTo.Principals)
		slices.Sort(ps)
		key := fmt.Sprint(ps)
		g, ok := groups[key]
		if !ok {
			g = &group{rep: uid}
			groups[key] = g
		}
		g.resources = append(g.resources, act.AppliesTo.Resources...)
		if uid != g.rep {
			act.AppliesTo = nil
			s.Actions[uid] = act
		}
	}
	for _, g := range groups {
		act := s.Actions[g.rep]
		at := *act.AppliesTo
		slices.Sort(g.resources)
		at.Resources = slices.Compact(g.resources)
		act.AppliesTo = &at
		s.Actions[g.rep] = act
	}
}

// mentionsActions reports whether p's conditions read the action or the
// context, or name an action entity.
func mentionsActions(p *ast.Policy) bool {
	found := false
	for _, c := range p.Conditions {
		ast.Inspect(ast.NewNode(c.Body), func(n ast.IsNode) bool {
			switch v := n.(type) {
			case ast.NodeTypeVariable:
				if v.Name == "action" || v.Name == "context" {
					found = true
				}
			case ast.NodeValue:
				if uid, ok := v.Value.(types.EntityUID); ok && uid.Type == schemagen.ActionType {
					found = true
				}
			}
			return !found
		})
	}
	return found
}

func (v *SchemaValidator) actionIn(uid, group types.EntityUID) bool {
	act, ok := v.full.Actions[uid]
	if !ok {
		return false
	}
	return act.Entity.Parents.Contains(group)
}
