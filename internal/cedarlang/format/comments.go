package format

import (
	"strings"

	"github.com/kcedar/kcedar/internal/lib/cedarlex"
)

// token is a non-comment token with the comments attached to it.
type token struct {
	cedarlex.Token
	text   string
	before []doc // own-line and inline comments before it
	after  []doc // trailing comments: on its line, after it
}

// commentRun is one or more comments on the same line, written together.
type commentRun struct {
	texts    []string
	inline   bool // a block comment followed, on its line, by a token
	trailing bool // after a token on the same line
	endLine  int
	blank    bool // followed by a blank line
}

// attach reads the tokens of src and attaches every comment to a token: a
// comment after a token on the same line trails it; a block comment followed
// on its line by a token sits inline before it; any other comment stands on
// a line of its own before the next token. The last token returned is EOF
// (its comments end the file).
func attach(src []byte) ([]*token, error) {
	var all []cedarlex.Token
	for lx := cedarlex.New(src); len(all) == 0 || all[len(all)-1].Kind != cedarlex.EOF; {
		t, err := lx.Next()
		if err != nil {
			return nil, err
		}
		all = append(all, t)
	}
	var out []*token
	var runs []*commentRun // comments waiting for their token
	prevEnd := 0           // end line of the previous token, comments included
	for i, t := range all {
		if !t.Kind.IsComment() {
			tok := &token{Token: t, text: t.Text(src)}
			for _, r := range runs {
				tok.before = append(tok.before, r.doc())
			}
			runs = nil
			out = append(out, tok)
			prevEnd = endLine(t, src)
			continue
		}
		text := strings.TrimRight(t.Text(src), " \t\r")
		if t.Kind == cedarlex.LineComment {
			// cedar-go ends a line comment at '\n' only; other readers
			// end it at '\r', U+2028, ... too, and would read the rest
			// as code: written as escapes, it stays comment text.
			text = cedarlex.EscapeLineBreaks(text)
		}
		next := all[i+1]
		last := lastRun(runs)
		switch {
		case last != nil && !last.inline && last.endLine == t.Pos.Line:
			last.texts = append(last.texts, text)
		case len(out) > 0 && prevEnd == t.Pos.Line && len(runs) == 0 && !inlineBefore(t, next, src):
			r := &commentRun{texts: []string{text}, trailing: true}
			out[len(out)-1].after = append(out[len(out)-1].after, r.doc())
		default:
			runs = append(runs, &commentRun{texts: []string{text}, inline: inlineBefore(t, next, src)})
		}
		prevEnd = endLine(t, src)
		if r := lastRun(runs); r != nil {
			r.endLine = prevEnd
			r.blank = next.Pos.Line > prevEnd+1
		}
	}
	return out, nil
}

// lastRun is the last of runs, or nil.
func lastRun(runs []*commentRun) *commentRun {
	if len(runs) == 0 {
		return nil
	}
	return runs[len(runs)-1]
}

// inlineBefore reports whether comment c is a block comment followed on the
// line where it ends by next, a token that is not a comment.
func inlineBefore(c, next cedarlex.Token, src []byte) bool {
	return c.Kind == cedarlex.BlockComment && !next.Kind.IsComment() && next.Kind != cedarlex.EOF &&
		next.Pos.Line == endLine(c, src)
}

// endLine is the line on which t ends.
func endLine(t cedarlex.Token, src []byte) int {
	return t.Pos.Line + strings.Count(t.Text(src), "\n")
}

// doc lays out the run: inline, its text and a space; else a comment that
// ends its line.
func (r *commentRun) doc() doc {
	s := strings.Join(r.texts, " ")
	if r.inline {
		return inlineComment(s)
	}
	return lineComment{text: s, trailing: r.trailing, blank: r.blank && !r.trailing, slashes: strings.HasPrefix(r.texts[len(r.texts)-1], "//")}
}
