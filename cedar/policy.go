package cedar

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	cedarlib "github.com/cedar-policy/cedar-go"
	"github.com/cedar-policy/cedar-go/types"
	"github.com/cedar-policy/cedar-go/x/exp/ast"

	"github.com/kcedar/kcedar/schemagen"
)

// Limits on policy input; anything larger is refused before it is parsed.
const (
	MaxPolicyFileBytes = 8 << 20
	// MaxNesting bounds brackets and parentheses: cedar-go's recursive parser
	// would otherwise overflow the stack on hostile input (a fatal error, not a panic).
	MaxNesting = 64
)

// Policy is one parsed policy with the facts kcedar needs about it.
type Policy struct {
	ID       string
	Reason   string // the @reason annotation, shown to users
	Effect   types.Effect
	Source   string // file:line:column
	AST      *ast.Policy
	Compiled *cedarlib.Policy
	// UsesObjects is set when the policy mentions resource.object or
	// resource.oldObject: only then does partial evaluation need the objects.
	UsesObjects bool
}

// Describe is the policy's @reason, or its id.
func (p *Policy) Describe() string {
	if p.Reason != "" {
		return p.Reason
	}
	return p.ID
}

// ParsePolicies parses one Cedar policy document strictly: input size and
// nesting are bounded, trailing garbage is an error, and each policy's id comes
// from its @id annotation (else file:line).
func ParsePolicies(fileName string, src []byte) ([]*Policy, error) {
	if len(src) > MaxPolicyFileBytes {
		return nil, fmt.Errorf("%s: %d bytes is over the limit of %d", fileName, len(src), MaxPolicyFileBytes)
	}
	if err := checkNesting(src); err != nil {
		return nil, fmt.Errorf("%s:%v", fileName, err)
	}
	list, err := cedarlib.NewPolicyListFromBytes(fileName, src)
	if err != nil {
		return nil, fmt.Errorf("%s", strings.Replace(err.Error(), "<input>", fileName, 1))
	}
	out := make([]*Policy, 0, len(list))
	for _, cp := range list {
		a := (*ast.Policy)(cp.AST())
		p := &Policy{Effect: cp.Effect(), AST: a, Compiled: cp}
		pos := cp.Position()
		p.Source = fmt.Sprintf("%s:%d:%d", fileName, pos.Line, pos.Column)
		p.ID = p.Source
		for _, an := range a.Annotations {
			switch an.Key {
			case "id":
				if an.Value == "" {
					return nil, fmt.Errorf("%s: @id is empty", p.Source)
				}
				p.ID = string(an.Value)
			case "reason":
				p.Reason = string(an.Value)
			}
		}
		if err := checkScope(a); err != nil {
			return nil, fmt.Errorf("%s: policy %s: %v", p.Source, p.ID, err)
		}
		p.UsesObjects = mentionsObjects(a)
		out = append(out, p)
	}
	return out, nil
}

// checkScope refuses scopes that name a specific resource entity: resource
// entities have no meaningful ids (their names are attributes).
func checkScope(a *ast.Policy) error {
	switch s := a.Resource.(type) {
	case ast.ScopeTypeEq:
		return fmt.Errorf("the resource scope names entity %s; resource entities have no ids, constrain resource.name/resource.namespace in a when clause and the type with `resource is %s`", s.Entity, s.Entity.Type)
	case ast.ScopeTypeIn:
		return fmt.Errorf("the resource scope `in %s` never matches: resource entities have no parents; use `resource is <type>` and attributes", s.Entity)
	case ast.ScopeTypeIsIn:
		return fmt.Errorf("the resource scope `is %s in %s` never matches: resource entities have no parents", s.Type, s.Entity)
	}
	return nil
}

// checkNesting bounds the bracket depth of src, skipping strings and comments.
func checkNesting(src []byte) error {
	depth, line, col := 0, 1, 0
	for i := 0; i < len(src); i++ {
		c := src[i]
		col++
		switch {
		case c == '\n':
			line, col = line+1, 0
		case c == '"':
			for i++; i < len(src) && src[i] != '"'; i++ {
				if src[i] == '\\' {
					i++
				} else if src[i] == '\n' {
					line, col = line+1, 0
				}
			}
		case c == '/' && i+1 < len(src) && src[i+1] == '/':
			for i < len(src) && src[i] != '\n' {
				i++
			}
			line, col = line+1, 0
		case c == '(' || c == '[' || c == '{':
			depth++
			if depth > MaxNesting {
				return fmt.Errorf("%d:%d: nesting deeper than %d", line, col, MaxNesting)
			}
		case c == ')' || c == ']' || c == '}':
			depth--
		}
	}
	return nil
}

// mentionsObjects reports whether the policy reads resource.object or
// resource.oldObject (or tests for them with has).
func mentionsObjects(p *ast.Policy) bool {
	found := false
	for _, c := range p.Conditions {
		ast.Inspect(ast.NewNode(c.Body), func(n ast.IsNode) bool {
			switch v := n.(type) {
			case ast.NodeTypeAccess:
				if v.Value == schemagen.AttrObject || v.Value == schemagen.AttrOldObject {
					found = true
				}
			case ast.NodeTypeHas:
				if v.Value == schemagen.AttrObject || v.Value == schemagen.AttrOldObject {
					found = true
				}
			}
			return !found
		})
	}
	return found
}

// PolicySet is an immutable, indexed set of policies: one snapshot of the store.
type PolicySet struct {
	Policies []*Policy
	byID     map[string]*Policy
	index    *index
	// Generation counts successful loads of the store that produced this set.
	Generation uint64
}

// NewPolicySet indexes policies; ids must be unique.
func NewPolicySet(policies []*Policy) (*PolicySet, error) {
	ps := &PolicySet{Policies: policies, byID: make(map[string]*Policy, len(policies))}
	var dups []string
	for _, p := range policies {
		if prev, ok := ps.byID[p.ID]; ok {
			dups = append(dups, fmt.Sprintf("policy id %q is used at %s and %s", p.ID, prev.Source, p.Source))
			continue
		}
		ps.byID[p.ID] = p
	}
	if len(dups) > 0 {
		sort.Strings(dups)
		return nil, errors.New(strings.Join(dups, "; "))
	}
	ps.index = buildIndex(policies)
	return ps, nil
}

// Get returns the policy with the given id.
func (ps *PolicySet) Get(id string) (*Policy, bool) {
	p, ok := ps.byID[id]
	return p, ok
}

// Len is the number of policies.
func (ps *PolicySet) Len() int { return len(ps.Policies) }
