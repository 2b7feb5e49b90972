// Package format lays out Cedar policy files in one canonical style, close
// to Cedar's own formatter (cedar-policy-formatter): 2-space indentation, the
// scope on one line when it fits in 80 columns and one element per line when
// it does not, each `when { ... }` / `unless { ... }` on a line of its own
// with its body indented when it does not fit, long && and || chains broken
// one operand per line, annotations on lines of their own and one blank line
// between policies (docs/policy-authoring.md, "Formatting").
//
// It works on the tokens of package cedarlex, which keeps comments: every
// comment survives where it was (before a policy, at the end of a line,
// inside a condition), and only the whitespace between tokens changes, but
// for the runes some reader ends a line at inside a `//` comment (a
// carriage return, U+2028, ...: cedarlex.EscapeLineBreaks), written as
// escapes so that no reader takes the rest of the comment for code. Each
// result is checked: it must parse to the same policies as the input, or
// Source returns an error instead of it.
package format

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/lib/cedarlex"
)

// Width is the line width the layout aims for.
const Width = 80

// Result is a formatted file.
type Result struct {
	Text []byte
	// Warnings name the policies without @id that formatting moves: their
	// ids are their positions, so they change ("file:line: ...").
	Warnings []string
}

// Changed reports whether the formatted text differs from src.
func (r Result) Changed(src []byte) bool { return !bytes.Equal(r.Text, src) }

// Source formats the policy file src, named name in errors and warnings. A
// file that does not parse, or holds a template, is an error with its
// position (name:line:column: ...).
func Source(name string, src []byte) (Result, error) {
	if err := refuseTemplates(name, src); err != nil {
		return Result{}, err
	}
	before, err := cedarlang.ParsePolicies(name, src)
	if err != nil {
		return Result{}, err
	}
	toks, err := attach(src)
	if err != nil {
		return Result{}, fmt.Errorf("%s:%v", name, err)
	}
	d, err := (&layout{toks: toks}).file()
	if err != nil {
		return Result{}, fmt.Errorf("%s:%v", name, err)
	}
	out := []byte(strings.TrimRight(render(d, Width), "\n"))
	if len(out) > 0 {
		out = append(out, '\n')
	}
	after, err := cedarlang.ParsePolicies(name, out)
	if err != nil {
		return Result{}, fmt.Errorf("%s: formatting would break the file (a bug in kcedar fmt): %v", name, err)
	}
	if err := SamePolicies(before, after); err != nil {
		return Result{}, fmt.Errorf("%s: formatting would change the policies (a bug in kcedar fmt): %v", name, err)
	}
	return Result{Text: out, Warnings: movedWithoutID(before, after)}, nil
}

// refuseTemplates returns an error at the first slot (?principal,
// ?resource): templates are not policies kcedar loads, nor formats.
func refuseTemplates(name string, src []byte) error {
	toks, err := cedarlex.Tokens(src)
	if err != nil {
		return fmt.Errorf("%s:%v", name, err)
	}
	for _, t := range toks {
		if t.Kind == cedarlex.Invalid && t.Is(src, "?") {
			return fmt.Errorf("%s:%s: templates (?principal, ?resource) are not supported", name, t.Pos)
		}
	}
	return nil
}

// SamePolicies reports how b differs from a, nil if it does not: the same
// number of policies, each with the same canonical Cedar text (effect,
// scope, conditions and annotations) and the same @id, or none in either.
func SamePolicies(a, b []*cedarlang.Policy) error {
	if len(a) != len(b) {
		return fmt.Errorf("%d policies became %d", len(a), len(b))
	}
	for i := range a {
		if hasID(a[i]) != hasID(b[i]) || hasID(a[i]) && a[i].ID != b[i].ID {
			return fmt.Errorf("policy %d: id %s became %s", i+1, a[i].ID, b[i].ID)
		}
		ta, tb := a[i].Text(), b[i].Text()
		if !bytes.Equal(ta, tb) {
			return fmt.Errorf("policy %s: %s became %s", a[i].ID, ta, tb)
		}
	}
	return nil
}

// hasID reports whether p has an @id (else its id is its position).
func hasID(p *cedarlang.Policy) bool { return p.ID != p.Source }

// movedWithoutID warns about each policy without @id whose position, and so
// id, formatting changes ("name:line: ...").
func movedWithoutID(before, after []*cedarlang.Policy) []string {
	var out []string
	for i, p := range before {
		if hasID(p) || p.Source == after[i].Source {
			continue
		}
		out = append(out, fmt.Sprintf("%s: policy without @id: its id is its position (%s), which formatting moves to %s; add @id(\"...\") to keep its id stable",
			withoutColumn(p.Source), p.ID, after[i].Source))
	}
	return out
}

// withoutColumn is a Source (name:line:column) without its column.
func withoutColumn(source string) string {
	if i := strings.LastIndexByte(source, ':'); i >= 0 {
		return source[:i]
	}
	return source
}
