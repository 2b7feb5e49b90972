package cedarlex

import (
	"cmp"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/lib/cedarx/ast"
)

// prec is how strongly an expression's outermost operator binds, in the
// order of Cedar's grammar: an operand that binds less strongly than its
// place needs parentheses.
type prec uint8

const (
	precAnd      prec = iota + 1 // &&
	precRelation                 // == != < <= > >= in has like is
	precUnary                    // ! -
	precMember                   // .attr ["attr"] .method(...)
	precPrimary                  // literals, variables, (...), [...]
)

// Expr is a Cedar expression built from typed parts. Outside text enters
// it only as a string literal (Str, Attr, Has, Like, LikePrefix) or the
// quoted id of an entity (Entity): it can never become Cedar syntax. Its
// text and its AST are built together, so that a written file can be
// checked against what was built. Text that cannot be written exactly (a
// string that is not valid UTF-8, an entity type that is not a Cedar
// path) makes the expression, and every expression built from it, carry
// an error (Err) instead: the policy holding it is refused when written.
//
// The zero Expr is not an expression: Err reports it.
type Expr struct {
	text string
	node ast.Node
	prec prec
	and  []Expr // the operands of a && chain, flattened
	err  error
}

// errEmpty is the error of the zero Expr.
var errEmpty = errors.New("an empty expression (a bug in kcedar)")

// Err is why x cannot be written exactly, nil if it can.
func (x Expr) Err() error {
	if x.err != nil {
		return x.err
	}
	if x.text == "" {
		return errEmpty
	}
	return nil
}

// Text is x in Cedar syntax.
func (x Expr) Text() string { return x.text }

// firstErr is the first error of xs.
func firstErr(xs ...Expr) error {
	for _, x := range xs {
		if err := x.Err(); err != nil {
			return err
		}
	}
	return nil
}

// operand is x's text where an operand binding at least min is needed.
func (x Expr) operand(min prec) string {
	if x.prec < min {
		return "(" + x.text + ")"
	}
	return x.text
}

// variable is one of Cedar's four variables.
func variable(name string, node ast.Node) Expr {
	return Expr{text: name, node: node, prec: precPrimary}
}

// Principal is the variable principal.
func Principal() Expr { return variable("principal", ast.Principal()) }

// ActionVar is the variable action.
func ActionVar() Expr { return variable("action", ast.Action()) }

// Resource is the variable resource.
func Resource() Expr { return variable("resource", ast.Resource()) }

// Context is the variable context.
func Context() Expr { return variable("context", ast.Context()) }

// Str is the string literal s; an error if s is not valid UTF-8.
func Str(s string) Expr {
	q, err := Quote(s)
	return Expr{text: q, node: ast.String(s), prec: precPrimary, err: err}
}

// Entity is the entity reference uid: its type checked to be a Cedar
// path, its id quoted.
func Entity(uid types.EntityUID) Expr {
	text, err := entityText(uid)
	return Expr{text: text, node: ast.EntityUID(uid.Type, uid.ID), prec: precPrimary, err: err}
}

// entityText is uid in Cedar syntax.
func entityText(uid types.EntityUID) (string, error) {
	if err := checkPath(uid.Type); err != nil {
		return "", err
	}
	q, err := Quote(string(uid.ID))
	if err != nil {
		return "", fmt.Errorf("entity id: %w", err)
	}
	return string(uid.Type) + "::" + q, nil
}

// pathPattern is a Cedar path: identifiers joined by "::".
var pathPattern = regexp.MustCompile(`^[_A-Za-z][_A-Za-z0-9]*(::[_A-Za-z][_A-Za-z0-9]*)*$`)

// reserved are Cedar's reserved words, which are no identifiers.
var reserved = []string{"true", "false", "if", "then", "else", "in", "like", "has", "is", "__cedar"}

// isIdent reports whether s is a Cedar identifier (not a reserved word).
func isIdent(s string) bool {
	return pathPattern.MatchString(s) && !strings.Contains(s, ":") && !slices.Contains(reserved, s)
}

// checkPath checks that t is a Cedar path of identifiers.
func checkPath(t types.EntityType) error {
	if !pathPattern.MatchString(string(t)) {
		return fmt.Errorf("entity type %s is not a Cedar path", Shorten(string(t)))
	}
	for _, part := range strings.Split(string(t), "::") {
		if slices.Contains(reserved, part) {
			return fmt.Errorf("entity type %s holds the reserved word %q", Shorten(string(t)), part)
		}
	}
	return nil
}

// Set is the set literal [xs...].
func Set(xs ...Expr) Expr {
	texts := make([]string, len(xs))
	nodes := make([]ast.Node, len(xs))
	for i, x := range xs {
		texts[i], nodes[i] = x.text, x.node
	}
	return Expr{text: "[" + strings.Join(texts, ", ") + "]", node: ast.Set(nodes...), prec: precPrimary, err: firstErr(xs...)}
}

// attrName is the attribute name as Cedar writes it after x: `.name` for
// an identifier, else `["name"]`.
func attrName(name string) (string, error) {
	if isIdent(name) {
		return "." + name, nil
	}
	q, err := Quote(name)
	return "[" + q + "]", err
}

// Attr is x's attribute name.
func (x Expr) Attr(name string) Expr {
	sel, err := attrName(name)
	return Expr{text: x.operand(precMember) + sel, node: x.node.Access(types.String(name)), prec: precMember, err: cmp.Or(x.Err(), err)}
}

// Has is `x has name`.
func (x Expr) Has(name string) Expr {
	sel := name
	var err error
	if !isIdent(name) {
		sel, err = Quote(name)
	}
	return Expr{text: x.operand(precUnary) + " has " + sel, node: x.node.Has(types.String(name)), prec: precRelation, err: cmp.Or(x.Err(), err)}
}

// Is is `x is t`.
func (x Expr) Is(t types.EntityType) Expr {
	return Expr{text: x.operand(precUnary) + " is " + string(t), node: x.node.Is(t), prec: precRelation, err: cmp.Or(x.Err(), checkPath(t))}
}

// relation is `x op y`.
func relation(x Expr, op string, y Expr, node ast.Node) Expr {
	return Expr{text: x.operand(precUnary) + " " + op + " " + y.operand(precUnary), node: node, prec: precRelation, err: firstErr(x, y)}
}

// Eq is `x == y`.
func (x Expr) Eq(y Expr) Expr { return relation(x, "==", y, x.node.Equal(y.node)) }

// In is `x in y`.
func (x Expr) In(y Expr) Expr { return relation(x, "in", y, x.node.In(y.node)) }

// Contains is `x.contains(y)`.
func (x Expr) Contains(y Expr) Expr {
	return Expr{text: x.operand(precMember) + ".contains(" + y.text + ")", node: x.node.Contains(y.node), prec: precMember, err: firstErr(x, y)}
}

// LikePrefix is `x like "<prefix>*"`: every string that starts with
// prefix (whose own `*` are escaped).
func (x Expr) LikePrefix(prefix string) Expr { return x.Like(prefix, "") }

// Like is `x like "<literals[0]>*<literals[1]>*..."`: the literals in
// order, any text (a wildcard) between two; each literal's own `*` is
// escaped. With no literal it is an error.
func (x Expr) Like(literals ...string) Expr {
	if len(literals) == 0 {
		return Expr{err: errEmpty}
	}
	var text strings.Builder
	var parts []any
	var err error
	text.WriteByte('"')
	for i, lit := range literals {
		if i > 0 {
			text.WriteByte('*')
			parts = append(parts, types.Wildcard{})
		}
		q, qerr := Quote(lit)
		err = cmp.Or(err, qerr)
		if qerr == nil {
			// No escape Quote writes holds a '*': every '*' is the literal's.
			text.WriteString(strings.ReplaceAll(q[1:len(q)-1], "*", `\*`))
		}
		if lit != "" {
			parts = append(parts, types.String(lit))
		}
	}
	text.WriteByte('"')
	pat := types.NewPattern(parts...)
	return Expr{text: x.operand(precUnary) + " like " + text.String(), node: x.node.Like(pat), prec: precRelation, err: cmp.Or(x.Err(), err)}
}

// Not is `!x`.
func Not(x Expr) Expr {
	return Expr{text: "!" + x.operand(precMember), node: ast.Not(x.node), prec: precUnary, err: x.Err()}
}

// And is `x && y && ...`: nested chains are flattened, as Cedar reads
// `a && b && c` as one chain from the left. One operand is itself; none
// is an error.
func And(xs ...Expr) Expr {
	var flat []Expr
	for _, x := range xs {
		if x.and != nil {
			flat = append(flat, x.and...)
		} else {
			flat = append(flat, x)
		}
	}
	switch len(flat) {
	case 0:
		return Expr{err: errEmpty}
	case 1:
		return flat[0]
	}
	texts := make([]string, len(flat))
	node := flat[0].node
	for i, x := range flat {
		texts[i] = x.operand(precRelation)
		if i > 0 {
			node = node.And(x.node)
		}
	}
	return Expr{text: strings.Join(texts, " && "), node: node, prec: precAnd, and: flat, err: firstErr(flat...)}
}

// maxOrLine is the longest alternative written on one line; a longer one
// is written one operand per line.
const maxOrLine = 100

// Or is `(x || y || ...)`, always parenthesized, with each operand that
// is a && chain parenthesized too; one operand is itself, none is an
// error. Longer than 100 bytes, it is written one operand per line.
func Or(xs ...Expr) Expr {
	switch len(xs) {
	case 0:
		return Expr{err: errEmpty}
	case 1:
		return xs[0]
	}
	texts := make([]string, len(xs))
	node := xs[0].node
	for i, x := range xs {
		texts[i] = x.operand(precRelation)
		if i > 0 {
			node = node.Or(x.node)
		}
	}
	text := "(" + strings.Join(texts, " || ") + ")"
	if len(text) > maxOrLine {
		text = "(\n    " + strings.Join(texts, " ||\n    ") + "\n  )"
	}
	return Expr{text: text, node: node, prec: precPrimary, err: firstErr(xs...)}
}

// OneOf is `x == "a"` for one value, `["a", "b"].contains(x)` for more.
func OneOf(x Expr, vals []string) Expr {
	if len(vals) == 1 {
		return x.Eq(Str(vals[0]))
	}
	elems := make([]Expr, len(vals))
	for i, v := range vals {
		elems[i] = Str(v)
	}
	return Set(elems...).Contains(x)
}
