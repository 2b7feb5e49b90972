package format

import (
	"fmt"

	"github.com/kcedar/kcedar/internal/lib/cedarlex"
)

// layout walks the tokens of a policy file along Cedar's grammar and builds
// the doc of its canonical layout. Every token is emitted once, in order,
// with its comments: only the whitespace between tokens changes.
type layout struct {
	toks []*token
	i    int
}

// syntaxError is raised (as a panic, recovered by file) when the tokens do
// not follow the grammar.
type syntaxError struct{ err error }

// peek is the current token.
func (l *layout) peek() *token { return l.toks[l.i] }

// is reports whether the current token's text is s.
func (l *layout) is(s string) bool { t := l.peek(); return t.Kind != cedarlex.EOF && t.text == s }

// fail raises a syntax error at the current token.
func (l *layout) fail(what string) {
	t := l.peek()
	panic(syntaxError{fmt.Errorf("%s: %s, found %q", t.Pos, what, t.text)})
}

// take emits the current token with its comments and moves past it.
func (l *layout) take() doc {
	t := l.peek()
	if t.Kind == cedarlex.EOF {
		l.fail("unexpected end of input")
	}
	l.i++
	d := make(concat, 0, len(t.before)+2+len(t.after))
	d = append(d, t.before...)
	if len(t.after) > 0 && (t.text == "," || t.text == ";") {
		d = append(d, endPending{})
	}
	d = append(d, text(t.text))
	return append(d, t.after...)
}

// closing emits the closing bracket s apart from its trailing comments,
// which the caller places after the group the bracket closes: they end its
// line without forcing the group to break.
func (l *layout) closing(s string) (tok, after doc) {
	if !l.is(s) {
		l.fail(fmt.Sprintf("expected %q", s))
	}
	t := l.peek()
	trailing := t.after
	t.after = nil
	return l.take(), concat(trailing)
}

// expect emits the current token, which must be s.
func (l *layout) expect(s string) doc {
	if !l.is(s) {
		l.fail(fmt.Sprintf("expected %q", s))
	}
	return l.take()
}

// file is the doc of a whole file: policies one blank line apart, then the
// comments that end the file.
func (l *layout) file() (d doc, err error) {
	defer func() {
		if r := recover(); r != nil {
			se, ok := r.(syntaxError)
			if !ok {
				panic(r)
			}
			err = se.err
		}
	}()
	var out concat
	for l.peek().Kind != cedarlex.EOF {
		if len(out) > 0 {
			out = append(out, softLine, softLine)
		}
		out = append(out, l.policy())
	}
	eof := l.peek()
	if len(eof.before) > 0 && len(out) > 0 {
		out = append(out, softLine, softLine)
	}
	return append(out, eof.before...), nil
}

// policy: annotations on lines of their own, the effect and scope, each
// condition on a line of its own, and the semicolon.
func (l *layout) policy() doc {
	var d concat
	for l.is("@") {
		a := concat{l.take(), l.take()}
		if l.is("(") {
			a = append(a, l.take(), l.take(), l.expect(")"))
		}
		d = append(d, a, softLine)
	}
	if !l.is("permit") && !l.is("forbid") {
		l.fail("expected permit or forbid")
	}
	d = append(d, l.take(), text(" "), l.scope())
	for l.is("when") || l.is("unless") {
		kw := l.take()
		body := concat{l.expect("{"), nest{2, concat{space, l.expr()}}, space}
		end, after := l.closing("}")
		d = append(d, softLine, kw, text(" "), newGroup(append(body, end)), after)
	}
	return append(d, l.expect(";"))
}

// scope: `(principal, action, resource)` on one line if it fits, else each
// on a line of its own.
func (l *layout) scope() doc {
	open := l.expect("(")
	var inner concat
	for !l.is(")") {
		inner = append(inner, l.scopeVar())
		if l.is(",") {
			inner = append(inner, l.take(), space)
		} else if !l.is(")") {
			l.fail("expected , or )")
		}
	}
	end, after := l.closing(")")
	return concat{newGroup(concat{open, nest{2, concat{softLine, inner}}, softLine, end}), after}
}

// scopeVar: principal, action or resource, and its constraint.
func (l *layout) scopeVar() doc {
	d := concat{l.take()}
	switch {
	case l.is("==") || l.is("in"):
		d = append(d, text(" "), l.take(), text(" "), l.member())
	case l.is("is"):
		d = append(d, text(" "), l.take(), text(" "), l.path())
		if l.is("in") {
			d = append(d, text(" "), l.take(), text(" "), l.member())
		}
	}
	return d
}

// expr: `if c then a else b` (on three lines when it does not fit), or an
// || chain.
func (l *layout) expr() doc {
	if !l.is("if") {
		return l.chain("||", l.and)
	}
	d := concat{l.take(), text(" "), l.expr(), space, l.expect("then"), text(" "), l.expr(), space, l.expect("else"), text(" "), l.expr()}
	return newGroup(d)
}

// and is an && chain.
func (l *layout) and() doc { return l.chain("&&", l.relation) }

// chain is operands joined by op: on one line if it fits, else one operand
// per line, the operator ending each line.
func (l *layout) chain(op string, operand func() doc) doc {
	first := operand()
	if !l.is(op) {
		return first
	}
	d := concat{first}
	for l.is(op) {
		d = append(d, text(" "), l.take(), space, operand())
	}
	return newGroup(d)
}

// relation: a comparison, `in`, `has`, `like` or `is`, or a sum.
func (l *layout) relation() doc {
	left := l.sum()
	t := l.peek()
	if t.Kind == cedarlex.EOF {
		return left
	}
	switch t.text {
	case "==", "!=", "<", "<=", ">", ">=", "in":
		return concat{left, text(" "), l.take(), text(" "), l.sum()}
	case "has":
		d := concat{left, text(" "), l.take(), text(" "), l.take()}
		for l.is(".") {
			d = append(d, l.take(), l.take())
		}
		return d
	case "like":
		return concat{left, text(" "), l.take(), text(" "), l.take()}
	case "is":
		d := concat{left, text(" "), l.take(), text(" "), l.path()}
		if l.is("in") {
			d = append(d, text(" "), l.take(), text(" "), l.sum())
		}
		return d
	}
	return left
}

// sum is + and - between products.
func (l *layout) sum() doc {
	d := l.product()
	for l.is("+") || l.is("-") {
		d = concat{d, text(" "), l.take(), text(" "), l.product()}
	}
	return d
}

// product is * between unary expressions.
func (l *layout) product() doc {
	d := l.unary()
	for l.is("*") {
		d = concat{d, text(" "), l.take(), text(" "), l.unary()}
	}
	return d
}

// unary is ! and - (no space) before a member expression.
func (l *layout) unary() doc {
	if l.is("!") || l.is("-") {
		return concat{l.take(), l.unary()}
	}
	return l.member()
}

// member is a primary expression and its attribute accesses, method calls
// and indexing.
func (l *layout) member() doc {
	d := concat{l.primary()}
	for {
		switch {
		case l.is("."):
			d = append(d, l.take(), l.take())
			if l.is("(") {
				d = append(d, l.list("(", ")", l.expr))
			}
		case l.is("["):
			d = append(d, l.take(), l.take(), l.expect("]"))
		default:
			return d
		}
	}
}

// primary: a literal, a variable, an entity, a function call, a
// parenthesized expression, a set or a record.
func (l *layout) primary() doc {
	t := l.peek()
	switch {
	case t.Kind == cedarlex.Int || t.Kind == cedarlex.String:
		return l.take()
	case t.Kind == cedarlex.Ident:
		d := l.path()
		if l.is("(") {
			return concat{d, l.list("(", ")", l.expr)}
		}
		return d
	case l.is("("):
		inner := concat{l.take(), nest{2, concat{softLine, l.expr()}}, softLine}
		end, after := l.closing(")")
		return concat{newGroup(append(inner, end)), after}
	case l.is("["):
		return l.list("[", "]", l.expr)
	case l.is("{"):
		return l.list("{", "}", l.field)
	case l.is("?"):
		l.fail("templates (?principal, ?resource) are not supported")
	}
	l.fail("expected an expression")
	return nil
}

// path is an identifier, a namespaced name (`k8s::Group`) or an entity
// (`k8s::Group::"admins"`).
func (l *layout) path() doc {
	if l.peek().Kind != cedarlex.Ident {
		l.fail("expected a name")
	}
	d := concat{l.take()}
	for l.is("::") {
		d = append(d, l.take())
		k := l.peek().Kind
		if k != cedarlex.Ident && k != cedarlex.String {
			l.fail("expected a name or string after ::")
		}
		d = append(d, l.take())
		if k == cedarlex.String {
			break
		}
	}
	return d
}

// field is a record's `key: value`.
func (l *layout) field() doc {
	return concat{l.take(), l.expect(":"), text(" "), l.expr()}
}

// list is elements between open and close, separated by commas: on one
// line if it fits, else one element per line.
func (l *layout) list(open, close string, elem func() doc) doc {
	o := l.expect(open)
	var inner concat
	for !l.is(close) {
		inner = append(inner, elem())
		if l.is(",") {
			inner = append(inner, l.take())
			if !l.is(close) {
				inner = append(inner, space)
			}
		} else if !l.is(close) {
			l.fail(fmt.Sprintf("expected , or %s", close))
		}
	}
	end, after := l.closing(close)
	return concat{newGroup(concat{o, nest{2, concat{softLine, inner}}, softLine, end}), after}
}
