package cedarlex

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	cedarast "github.com/cedar-policy/cedar-go/ast"
	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/lib/cedarx/ast"
)

// scopeOp is the operator of a scope constraint.
type scopeOp uint8

const (
	scopeAll scopeOp = iota
	scopeEq
	scopeIn
	scopeInSet
	scopeIs
)

// Scope is the constraint on one variable of a policy's scope. The zero
// Scope is unconstrained (`principal`, `action`, `resource`).
type Scope struct {
	op   scopeOp
	uids []types.EntityUID
	typ  types.EntityType
}

// ScopeEq is `<var> == uid`.
func ScopeEq(uid types.EntityUID) Scope { return Scope{op: scopeEq, uids: []types.EntityUID{uid}} }

// ScopeIn is `<var> in uid`.
func ScopeIn(uid types.EntityUID) Scope { return Scope{op: scopeIn, uids: []types.EntityUID{uid}} }

// ScopeInSet is `action in [uids...]` (the action's scope only).
func ScopeInSet(uids []types.EntityUID) Scope { return Scope{op: scopeInSet, uids: uids} }

// ScopeIs is `<var> is t`.
func ScopeIs(t types.EntityType) Scope { return Scope{op: scopeIs, typ: t} }

// text is the scope constraint on the variable v in Cedar syntax.
func (s Scope) text(v string) (string, error) {
	uids := make([]string, len(s.uids))
	for i, uid := range s.uids {
		t, err := entityText(uid)
		if err != nil {
			return "", err
		}
		uids[i] = t
	}
	switch s.op {
	case scopeAll:
		return v, nil
	case scopeEq:
		return v + " == " + uids[0], nil
	case scopeIn:
		return v + " in " + uids[0], nil
	case scopeInSet:
		if v != "action" || len(uids) == 0 {
			return "", fmt.Errorf("%s in [...] with %d entities (a bug in kcedar)", v, len(uids))
		}
		return v + " in [" + strings.Join(uids, ", ") + "]", nil
	}
	return v + " is " + string(s.typ), checkPath(s.typ)
}

// Effect is a policy's effect.
type Effect uint8

// The effects.
const (
	Permit Effect = iota
	Forbid
)

// Annotation is one annotation, @Key("Value").
type Annotation struct{ Key, Value string }

// Policy is one policy to write: outside text in it is always quoted.
// Every policy written needs an @id annotation.
type Policy struct {
	// Blank writes an empty line before the policy and its comments.
	Blank bool
	// Comments are written before the policy, each a `//` line of escaped
	// text (CommentText).
	Comments    []string
	Annotations []Annotation
	Effect      Effect
	Principal   Scope
	Action      Scope
	Resource    Scope
	// When are the policy's conditions, all of which must hold: one
	// `when` clause, one condition per line.
	When []Expr
}

// ID is the policy's @id, "" if it has none.
func (p *Policy) ID() string {
	for _, a := range p.Annotations {
		if a.Key == "id" {
			return a.Value
		}
	}
	return ""
}

// render is the policy's text (without comments) and AST, or why it
// cannot be written exactly.
func (p *Policy) render() (string, *ast.Policy, error) {
	var b strings.Builder
	node := ast.Permit()
	if p.Effect == Forbid {
		node = ast.Forbid()
	}
	seen := map[string]bool{}
	for _, a := range p.Annotations {
		if !pathPattern.MatchString(a.Key) || strings.Contains(a.Key, ":") || seen[a.Key] {
			return "", nil, fmt.Errorf("annotation key %s is no identifier or is repeated (a bug in kcedar)", Shorten(a.Key))
		}
		seen[a.Key] = true
		q, err := Quote(a.Value)
		if err != nil {
			return "", nil, fmt.Errorf("@%s: %w", a.Key, err)
		}
		fmt.Fprintf(&b, "@%s(%s)\n", a.Key, q)
		node.Annotate(types.AnnotationKey(a.Key), types.String(a.Value))
	}
	scopes, err := p.scopes(node)
	if err != nil {
		return "", nil, err
	}
	effect := "permit"
	if p.Effect == Forbid {
		effect = "forbid"
	}
	fmt.Fprintf(&b, "%s (\n  %s\n)", effect, strings.Join(scopes, ",\n  "))
	if len(p.When) > 0 {
		cond := And(p.When...)
		if err := cond.Err(); err != nil {
			return "", nil, err
		}
		// One condition a line, a chain on its line as it is: Cedar reads
		// the lines as one chain from the left, which is cond.
		texts := make([]string, len(p.When))
		for i, x := range p.When {
			texts[i] = x.operand(precAnd)
		}
		fmt.Fprintf(&b, "\nwhen {\n  %s\n}", strings.Join(texts, " &&\n  "))
		node.When(cond.node)
	}
	b.WriteString(";\n")
	return b.String(), node, nil
}

// scopes are the texts of the policy's scope, set on node.
func (p *Policy) scopes(node *ast.Policy) ([]string, error) {
	texts := make([]string, 3)
	for i, v := range []string{"principal", "action", "resource"} {
		t, err := []Scope{p.Principal, p.Action, p.Resource}[i].text(v)
		if err != nil {
			return nil, err
		}
		texts[i] = t
	}
	var ok [3]bool
	node.Principal, ok[0] = p.Principal.node().(ast.IsPrincipalScopeNode)
	node.Action, ok[1] = p.Action.node().(ast.IsActionScopeNode)
	node.Resource, ok[2] = p.Resource.node().(ast.IsResourceScopeNode)
	if !ok[0] || !ok[1] || !ok[2] {
		return nil, fmt.Errorf("scope (%s) is not a Cedar scope (a bug in kcedar)", strings.Join(texts, ", "))
	}
	return texts, nil
}

// node is the scope's AST.
func (s Scope) node() ast.IsScopeNode {
	switch s.op {
	case scopeEq:
		return ast.Scope{}.Eq(s.uids[0])
	case scopeIn:
		return ast.Scope{}.In(s.uids[0])
	case scopeInSet:
		return ast.Scope{}.InSet(s.uids)
	case scopeIs:
		return ast.Scope{}.Is(s.typ)
	}
	return ast.Scope{}.All()
}

// File is a Cedar policy file being written: comments, blank lines and
// policies. Outside text reaches it only as a comment's escaped text or
// inside the quoted strings of a Policy, so it can never become Cedar
// syntax; every policy written is kept as built (Built) for the check of
// the file once parsed (package format's Verify).
type File struct {
	buf   bytes.Buffer
	built []Built
	ids   map[string]bool
}

// Built is a policy as a File wrote it: its @id and AST, and the offset
// in the file just after its text (its `;` and newline).
type Built struct {
	ID  string
	AST *ast.Policy
	End int
}

// Text is the policy in Cedar syntax as cedar-go writes it, the form to
// compare a parsed policy's with.
func (b Built) Text() []byte { return (*cedarast.Policy)(b.AST).MarshalCedar() }

// Comment writes a line comment of text (CommentText).
func (f *File) Comment(text string) {
	f.buf.WriteString("//")
	if text != "" {
		f.buf.WriteString(" " + CommentText(text))
	}
	f.buf.WriteByte('\n')
}

// Commentf writes a line comment of fmt.Sprintf(format, args...).
func (f *File) Commentf(format string, args ...any) { f.Comment(fmt.Sprintf(format, args...)) }

// Blank writes an empty line.
func (f *File) Blank() { f.buf.WriteByte('\n') }

// Add writes the policy p, preceded by its comments; it writes nothing
// and returns why when p cannot be written exactly: a string that is not
// valid UTF-8, no @id, an @id already written, ...
func (f *File) Add(p *Policy) error {
	id := p.ID()
	switch {
	case id == "":
		return errors.New("a policy without @id (a bug in kcedar)")
	case f.ids[id]:
		return fmt.Errorf("policy id %s is already used", Shorten(id))
	}
	text, node, err := p.render()
	if err != nil {
		return err
	}
	if p.Blank {
		f.Blank()
	}
	for _, c := range p.Comments {
		f.Comment(c)
	}
	f.buf.WriteString(text)
	if f.ids == nil {
		f.ids = map[string]bool{}
	}
	f.ids[id] = true
	f.built = append(f.built, Built{ID: id, AST: node, End: f.buf.Len()})
	return nil
}

// Bytes is the file so far.
func (f *File) Bytes() []byte { return f.buf.Bytes() }

// Built are the policies written, in order.
func (f *File) Built() []Built { return f.built }

// Len is the number of policies written.
func (f *File) Len() int { return len(f.built) }
