package cedarlang

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	cedarlib "github.com/cedar-policy/cedar-go"
	cedarast "github.com/cedar-policy/cedar-go/ast"
	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/lib/cedarlex"
	"github.com/kcedar/kcedar/internal/lib/cedarx/ast"
	"github.com/kcedar/kcedar/internal/schemagen"
)

// Limits on policy input; anything larger is refused before it is parsed.
const (
	MaxPolicyFileBytes = 8 << 20
	// MaxNesting bounds brackets and parentheses: cedar-go's recursive parser
	// would otherwise overflow the stack on hostile input (a fatal error, not a panic).
	MaxNesting = 64
	// MaxExpressionDepth bounds the depth of a policy's expression tree, counted
	// conservatively from its tokens (every operator, `.`, `if`, `in`, `has`,
	// `like`, `is` and bracket counts as a level). Long chains such as
	// `a || b || ...` or `!!!!x` need no brackets, yet cedar-go compiles and
	// evaluates them recursively (about 2.5 KB of stack per level): a million
	// levels is a fatal stack overflow.
	MaxExpressionDepth = 1000
)

// Policy is one parsed policy with the facts kcedar needs about it.
type Policy struct {
	ID     string
	Reason string // the @reason annotation, shown to users
	Effect types.Effect
	Source string // file:line:column
	AST    *ast.Policy
	lazy   *lazyForms
	// UsesObjects is set when the policy mentions resource.object or
	// resource.oldObject: only then does partial evaluation need the objects.
	UsesObjects bool
	// Enforcement is the @enforcement annotation: Enforce (the default) or
	// Audit, a policy that is evaluated but never changes a decision.
	Enforcement Enforcement
	// textEnd is the offset in its file just after the policy's closing
	// `;` (0: not known), so Reparse finds the policies of a file's old
	// text without reading it again.
	textEnd int
}

// lazyForms holds what is derived from a policy's AST on first use: its
// cedar-go evaluator and its sure test (sure.go). Compiled trees take as
// much memory as the ASTs, and most policies of a large set are never
// evaluated between two reloads (the index rules them out), so compiling
// them all at load would only give the garbage collector more to mark.
type lazyForms struct {
	compileOnce sync.Once
	compiled    *cedarlib.Policy
	sureOnce    sync.Once
	sure        *sureTest
	// keys: the policy's index constraints, hashed with one index's seeds
	// (index.extraction); kept by a copy of the policy moved in its file.
	keys atomic.Pointer[indexKeys]
}

// Compiled is the policy's cedar-go evaluator, compiled from AST the first
// time it is asked for. The AST must not change after that.
func (p *Policy) Compiled() *cedarlib.Policy {
	l := p.lazy
	l.compileOnce.Do(func() { l.compiled = cedarlib.NewPolicyFromAST((*cedarast.Policy)(p.AST)) })
	return l.compiled
}

// Text is the policy in Cedar syntax, as cedar-go writes it.
func (p *Policy) Text() []byte { return (*cedarast.Policy)(p.AST).MarshalCedar() }

// Enforcement is how a policy takes part in decisions (@enforcement).
type Enforcement int

const (
	// Enforce: the policy decides, as every policy did before audit mode.
	Enforce Enforcement = iota
	// Audit: the policy is evaluated beside the others and what it would
	// have changed is recorded, but it never changes a decision.
	Audit
)

// AnnotationEnforcement is the annotation that sets a policy's Enforcement.
const AnnotationEnforcement = "enforcement"

// String is the annotation value: "enforce" or "audit".
func (m Enforcement) String() string {
	if m == Audit {
		return "audit"
	}
	return "enforce"
}

// IsAudit reports whether the policy is annotated @enforcement("audit").
func (p *Policy) IsAudit() bool { return p.Enforcement == Audit }

// parseEnforcement reads an @enforcement value.
func parseEnforcement(v string) (Enforcement, error) {
	switch v {
	case "enforce":
		return Enforce, nil
	case "audit":
		return Audit, nil
	}
	return Enforce, fmt.Errorf("@%s(%q) is not one of \"enforce\" (the default) or \"audit\"", AnnotationEnforcement, v)
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
	ends, err := checkNesting(src)
	if err != nil {
		return nil, fmt.Errorf("%s:%v", fileName, err)
	}
	list, lines, err := parseEach(fileName, src, ends)
	if err != nil {
		return nil, parseError(fileName, err)
	}
	out := make([]*Policy, 0, len(list))
	for i, a := range list {
		p, err := newPolicy(fileName, src, a, lines[i])
		if err != nil {
			return nil, err
		}
		p.textEnd = ends[i]
		out = append(out, p)
	}
	return out, nil
}

// newPolicy is the policy a of file fileName (text src), whose text starts
// after line lines of the file: its id, @reason and @enforcement, its scope
// checked.
func newPolicy(fileName string, src []byte, a *ast.Policy, lines int) (*Policy, error) {
	p := &Policy{Effect: types.Effect(a.Effect), AST: a, lazy: &lazyForms{}}
	pos := a.Position
	p.Source = fmt.Sprintf("%s:%d:%d", fileName, pos.Line+lines, pos.Column)
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
		case AnnotationEnforcement:
			var err error
			if p.Enforcement, err = parseEnforcement(string(an.Value)); err != nil {
				line, col := annotationAt(src, pos.Line+lines, pos.Column, AnnotationEnforcement)
				return nil, fmt.Errorf("%s:%d:%d: %v", fileName, line, col, err)
			}
		}
	}
	if err := checkScope(a); err != nil {
		return nil, fmt.Errorf("%s: policy %s: %v", p.Source, p.ID, err)
	}
	p.UsesObjects = mentionsObjects(a)
	return p, nil
}

// annotationAt is the line and column of annotation @key of the policy
// that starts at line:col in src; the policy's own position if it is not
// found. It is only used to report an error.
func annotationAt(src []byte, line, col int, key string) (int, int) {
	lx := cedarlex.New(src)
	var at *cedarlex.Pos // the '@' just before, if any
	for {
		tok, err := lx.Next()
		if err != nil || tok.Kind == cedarlex.EOF {
			return line, col
		}
		if tok.Kind.IsComment() || tok.Pos.Line < line || tok.Pos.Line == line && tok.Pos.Column < col {
			continue
		}
		switch {
		case tok.Is(src, "@"):
			at = &tok.Pos
		case at != nil && tok.Kind == cedarlex.Ident && tok.Is(src, key):
			return at.Line, at.Column
		case tok.Is(src, "permit") || tok.Is(src, "forbid"):
			return line, col // past the annotations
		default:
			at = nil
		}
	}
}

// parseEach parses src as cedar-go would, one policy at a time, split at the
// top-level semicolons checkNesting found (ends), without compiling any
// (Policy.Compiled does that on first use). One at a time, because cedar-go
// tokenizes its whole input into one slice before parsing: on a file of
// thousands of policies that slice is megabytes, regrown and rescanned by
// the GC. Each policy's position is made the whole file's: lines[i] is the
// number of lines before policy i's text, to add to its line, and a policy
// that starts on the line another ended on gets that line's columns before
// it (counted once, as the text advances: a file of one long line stays
// linear). On any error, or text after the last policy, the whole file is
// parsed again by cedar-go, so errors (and their positions) are cedar-go's
// own.
func parseEach(fileName string, src []byte, ends []int) (list []*ast.Policy, lines []int, err error) {
	whole := func() ([]*ast.Policy, []int, error) {
		_, err := cedarlib.NewPolicyListFromBytes(fileName, src)
		if err == nil {
			err = fmt.Errorf("<input>: policies were split at the wrong places") // cannot happen: a split only fails where the whole does
		}
		return nil, nil, err
	}
	start, line, column := 0, 0, 0 // the text's start, the lines and runes of its line before it
	for _, end := range ends {
		var a cedarast.Policy
		if err := a.UnmarshalCedar(src[start:end]); err != nil {
			return whole()
		}
		if a.Position.Line == 1 {
			a.Position.Column += column
		}
		a.Position.Filename, a.Position.Offset = fileName, a.Position.Offset+start
		list, lines = append(list, (*ast.Policy)(&a)), append(lines, line)
		text := src[start:end]
		line += bytes.Count(text, []byte{'\n'})
		if nl := bytes.LastIndexByte(text, '\n'); nl >= 0 {
			column = utf8.RuneCount(text[nl+1:])
		} else {
			column += utf8.RuneCount(text)
		}
		start = end
	}
	if tail, err := cedarlib.NewPolicyListFromBytes(fileName, src[start:]); err != nil || len(tail) > 0 {
		return whole()
	}
	return list, lines, nil
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

// parseError rewrites cedar-go's parse errors ("parser error: parse error at
// f.cedar:1:61 "!": unexpected effect: garbage") to start with the position:
// "f.cedar:1:61: unexpected effect: garbage (at "!")".
func parseError(fileName string, err error) error {
	msg := strings.Replace(err.Error(), "<input>", fileName, 1)
	msg = strings.TrimPrefix(msg, "parser error: ")
	msg = strings.TrimPrefix(msg, "parse error at ")
	if rest, ok := strings.CutPrefix(msg, fileName+":"); ok {
		// rest is `line:col: msg` or `line:col "tok": msg`.
		if pos, tail, ok := strings.Cut(rest, " "); ok && strings.HasPrefix(tail, "\"") && !strings.HasSuffix(pos, ":") {
			if tok, text, ok := strings.Cut(tail, ": "); ok {
				if tok == `""` {
					tok = "the end of the input"
				}
				return fmt.Errorf("%s:%s: %s (at %s)", fileName, pos, text, tok)
			}
		}
		return errors.New(msg)
	}
	return fmt.Errorf("%s: %s", fileName, msg)
}

// checkNesting bounds the bracket nesting (MaxNesting) and the expression
// depth (MaxExpressionDepth) of src before cedar-go sees it. It reads the
// source with cedarlex, which tokenizes as cedar-go's scanner does: brackets in
// strings and comments (both `// line` and `/* block */`) do not count.
// Whatever it cannot make sense of, cedar-go's scanner rejects before parsing.
//
// The depth is an upper bound on the expression tree's depth: within a bracket
// group, each comma- or semicolon-separated segment is at most as deep as its
// operator tokens plus its deepest nested group, and a group is one deeper than
// its deepest segment.
func checkNesting(src []byte) (ends []int, err error) {
	return nestingEndsFrom(src, 0, nil)
}

// nestingEndsFrom is checkNesting over src[from:], where from is the end
// of a policy (or 0), returning the ends it finds (as offsets in src), up
// to and including the first end stop (nil: none) accepts. Reading stops
// there: what follows is known. Otherwise it reads to the end of src and
// checks the text after the last policy.
func nestingEndsFrom(src []byte, from int, stop func(end int) bool) ([]int, error) {
	rest := src[from:]
	n := &nestingCounter{src: rest, stack: make([]nestingFrame, 1, 16)}
	lx := cedarlex.New(rest)
	for {
		tok, err := lx.Next()
		if err != nil {
			return nil, err
		}
		if tok.Kind == cedarlex.EOF {
			break
		}
		if tok.Kind.IsComment() {
			continue
		}
		before := len(n.ends)
		if err := n.token(tok); err != nil {
			return nil, err
		}
		if stop != nil && len(n.ends) > before && stop(from+n.ends[len(n.ends)-1]) {
			return offsetAll(n.ends, from), nil
		}
	}
	for len(n.stack) > 1 {
		if err := n.closeGroup(); err != nil {
			return nil, err
		}
	}
	return offsetAll(n.ends, from), n.endSegment()
}

func offsetAll(ends []int, by int) []int {
	for i := range ends {
		ends[i] += by
	}
	return ends
}

// nestingFrame is one open bracket group: the operator tokens of its current
// segment, the depth of the deepest group nested in that segment, and the
// depth of its deepest segment so far.
type nestingFrame struct {
	ops, maxChild, maxSeg int
}

// nestingCounter is checkNesting's state: the open groups (the first is the
// top level), where the current policy starts (Line 0: not yet), and the
// offsets after each policy's closing ';'.
type nestingCounter struct {
	src    []byte
	stack  []nestingFrame
	policy cedarlex.Pos
	ends   []int
}

// token counts one token that is not a comment.
func (n *nestingCounter) token(tok cedarlex.Token) error {
	c := n.src[tok.Pos.Offset]
	if len(n.stack) == 1 && n.policy.Line == 0 && c != ';' {
		n.policy = tok.Pos
	}
	switch tok.Kind {
	case cedarlex.Ident:
		switch string(n.src[tok.Pos.Offset:tok.End]) {
		case "if", "in", "has", "like", "is":
			n.stack[len(n.stack)-1].ops++
		}
	case cedarlex.Punct, cedarlex.Invalid:
		return n.punct(c, tok)
	}
	return nil
}

// punct counts a punctuation token starting with byte c.
func (n *nestingCounter) punct(c byte, tok cedarlex.Token) error {
	switch c {
	case '(', '[', '{':
		if len(n.stack) > MaxNesting {
			return fmt.Errorf("%s: nesting deeper than %d", tok.Pos, MaxNesting)
		}
		n.stack = append(n.stack, nestingFrame{})
	case ')', ']', '}':
		// An unbalanced closer is a syntax error cedar-go reports; never
		// let it lower the count.
		if len(n.stack) > 1 {
			return n.closeGroup()
		}
	case ',', ';':
		if err := n.endSegment(); err != nil {
			return err
		}
		if c == ';' && len(n.stack) == 1 {
			n.stack[0] = nestingFrame{}
			n.policy = cedarlex.Pos{}
			n.ends = append(n.ends, tok.End)
		}
	case '|', '&', '=', '!', '<', '>', '+', '-', '*', '.':
		n.stack[len(n.stack)-1].ops++
	}
	return nil
}

// endSegment closes the innermost group's current segment, failing when the
// policy gets too deep.
func (n *nestingCounter) endSegment() error {
	top := &n.stack[len(n.stack)-1]
	top.maxSeg = max(top.maxSeg, top.ops+top.maxChild)
	top.ops, top.maxChild = 0, 0
	if top.maxSeg+1 > MaxExpressionDepth {
		return fmt.Errorf("%s: the policy starting here is nested too deeply (over %d levels, counting every operator); split it into several policies or use sets such as [\"a\", \"b\"].contains(x)", n.policy, MaxExpressionDepth)
	}
	return nil
}

// closeGroup closes the innermost group, which counts in its parent's
// current segment.
func (n *nestingCounter) closeGroup() error {
	if err := n.endSegment(); err != nil {
		return err
	}
	d := n.stack[len(n.stack)-1].maxSeg + 1
	n.stack = n.stack[:len(n.stack)-1]
	parent := &n.stack[len(n.stack)-1]
	parent.maxChild = max(parent.maxChild, d)
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
	Policies   []*Policy
	ids        idIndex
	index      *index
	seq        uint64     // this set's number (setSeq)
	derivation derivation // how it was derived from another set, if it was
	// Generation counts successful loads of the store that produced this set.
	Generation uint64
	// Schema is the schema the set was validated against (Store.Schema when
	// it loaded), nil if the store has none. Decisions on this set use it,
	// so a schema refresh swaps the schema and the set in one step.
	Schema *schemagen.Schema
}

// NewPolicySet indexes policies; ids must be unique.
func NewPolicySet(policies []*Policy) (*PolicySet, error) {
	return newPolicySet(policies, func() *index { return buildIndex(policies) })
}

// newPolicySet is NewPolicySet with the index build.
func newPolicySet(policies []*Policy, build func() *index) (*PolicySet, error) {
	ids, err := newIDIndex(policies)
	if err != nil {
		return nil, err
	}
	return &PolicySet{Policies: policies, ids: ids, index: build(), seq: setSeq.Add(1)}, nil
}

// Get returns the policy with the given id.
func (ps *PolicySet) Get(id string) (*Policy, bool) {
	return ps.ids.get(id)
}

// Unindexed returns the same set without its index: every policy is a
// candidate for every request. Decisions must not change; it exists to check
// that (differential tests) and to rule the index out when debugging.
func (ps *PolicySet) Unindexed() *PolicySet {
	c := *ps
	c.index = nil
	return &c
}

// Len is the number of policies.
func (ps *PolicySet) Len() int { return len(ps.Policies) }

// SourceFile is one policy file as read: its name (for messages) and text.
type SourceFile struct {
	Name string
	Data []byte
}
