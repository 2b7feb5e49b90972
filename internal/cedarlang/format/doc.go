package format

import (
	"strings"
	"unicode/utf8"
)

// A doc is a piece of layout in the style of Wadler's "prettier printer": text
// and line breaks that a group lays out flat (on one line) when it fits in the
// width and broken (every line of the group a newline) when it does not.
type doc interface{}

// text is literal output. It may hold newlines only inside a block comment.
type text string

// line is a break: flat, a space (or nothing when soft); broken, a newline
// and the current indentation.
type line struct{ soft bool }

// concat is docs one after the other.
type concat []doc

// nest indents the lines that break inside it by n more columns.
type nest struct {
	n int
	d doc
}

// inlineComment is a block comment before a token on its line.
type inlineComment string

// endPending ends the line if a trailing comment is pending: before a comma
// or semicolon that has a trailing comment of its own, where the pending one
// cannot wait.
type endPending struct{}

// group is laid out flat if it fits and holds no comment that must end a
// line, else broken.
type group struct {
	d      doc
	forced bool // holds a comment that ends its line: never flat
}

// lineComment is a comment that must end its line: `// ...`, or a block
// comment followed by a line break in the source.
type lineComment struct {
	text string
	// trailing: after a token on the same line (written at the end of that
	// line); otherwise on a line of its own before the next token.
	trailing bool
	blank    bool // an own-line comment followed by a blank line in the source
	slashes  bool // ends with a `//` comment: nothing can follow on its line
}

var (
	space    = line{}
	softLine = line{soft: true}
)

// newGroup is a group of d, forced broken when d holds a line comment.
func newGroup(d doc) group { return group{d: d, forced: forcesBreak(d)} }

// forcesBreak reports whether d holds a comment that ends its line.
func forcesBreak(d doc) bool {
	switch d := d.(type) {
	case lineComment:
		return true
	case concat:
		for _, e := range d {
			if forcesBreak(e) {
				return true
			}
		}
	case nest:
		return forcesBreak(d.d)
	case group:
		return d.forced
	}
	return false
}

// printer lays out docs in a width.
type printer struct {
	width   int
	out     []byte
	col     int    // columns written on the current line
	indent  int    // indentation of the current line
	pending string // a trailing comment waiting for the end of the line
	// pendingSlashes: the pending comment ends with a `//` comment.
	pendingSlashes bool
	// indentDue: the indentation is owed (written before the line's first
	// text, so that empty lines carry no spaces).
	indentDue bool
}

// cmd is a doc to print at an indentation, flat or broken.
type cmd struct {
	indent int
	flat   bool
	d      doc
}

// render lays out d in width columns.
func render(d doc, width int) string {
	p := &printer{width: width}
	stack := []cmd{{d: d}}
	for len(stack) > 0 {
		c := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		switch d := c.d.(type) {
		case text:
			p.text(string(d))
		case line:
			if c.flat {
				if !d.soft {
					p.space()
				}
			} else {
				p.newline(c.indent)
			}
		case concat:
			for i := len(d) - 1; i >= 0; i-- {
				stack = append(stack, cmd{c.indent, c.flat, d[i]})
			}
		case nest:
			stack = append(stack, cmd{c.indent + d.n, c.flat, d.d})
		case group:
			flat := c.flat || !d.forced && p.fits(cmd{c.indent, true, d.d}, stack)
			stack = append(stack, cmd{c.indent, flat, d.d})
		case lineComment:
			p.comment(d, c.indent)
		case inlineComment:
			p.space()
			p.text(string(d))
			p.space()
		case endPending:
			if p.pending != "" {
				p.newline(p.indent)
			}
		}
	}
	p.flush()
	return string(p.out)
}

// fits reports whether next, flat, and what follows it up to the next line
// break fit in the rest of the current line.
func (p *printer) fits(next cmd, rest []cmd) bool {
	left := p.width - p.col
	cmds := []cmd{next}
	for left >= 0 {
		if len(cmds) == 0 {
			if len(rest) == 0 {
				return true
			}
			cmds = append(cmds, rest[len(rest)-1])
			rest = rest[:len(rest)-1]
		}
		c := cmds[len(cmds)-1]
		cmds = cmds[:len(cmds)-1]
		switch d := c.d.(type) {
		case text:
			left -= utf8.RuneCountInString(string(d))
		case line:
			if !c.flat {
				return true
			}
			if !d.soft {
				left--
			}
		case concat:
			for i := len(d) - 1; i >= 0; i-- {
				cmds = append(cmds, cmd{c.indent, c.flat, d[i]})
			}
		case nest:
			cmds = append(cmds, cmd{c.indent, c.flat, d.d})
		case group:
			cmds = append(cmds, cmd{c.indent, c.flat || !d.forced, d.d})
		case lineComment:
			return true
		case inlineComment:
			left -= utf8.RuneCountInString(string(d)) + 2
		}
	}
	return false
}

// text writes s. A pending trailing comment is written first, ending its
// line, unless s is a comma or semicolon: those stay before the comment.
func (p *printer) text(s string) {
	if s == " " {
		p.space()
		return
	}
	if p.pending != "" && s != "," && s != ";" {
		p.newline(p.indent)
	}
	if p.indentDue {
		p.out = append(p.out, strings.Repeat(" ", p.indent)...)
		p.indentDue = false
	}
	p.out = append(p.out, s...)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		p.col = utf8.RuneCountInString(s[i+1:])
	} else {
		p.col += utf8.RuneCountInString(s)
	}
}

// space writes a space between tokens, or ends the line if a trailing
// comment is pending.
func (p *printer) space() {
	switch {
	case p.pending != "":
		p.newline(p.indent)
	case !p.indentDue && (len(p.out) == 0 || p.out[len(p.out)-1] != ' ' && p.out[len(p.out)-1] != '\n'):
		p.out = append(p.out, ' ')
		p.col++
	}
}

// newline ends the line (with its pending comment) and indents the next.
func (p *printer) newline(indent int) {
	p.flush()
	p.trimSpaces()
	p.out = append(p.out, '\n')
	p.col, p.indent, p.indentDue = indent, indent, true
}

// trimSpaces drops the spaces at the end of the output (before a newline).
func (p *printer) trimSpaces() {
	n := len(p.out)
	for n > 0 && p.out[n-1] == ' ' {
		n--
	}
	p.out = p.out[:n]
}

// flush writes the pending trailing comment.
func (p *printer) flush() {
	if p.pending != "" {
		if p.indentDue {
			p.out = append(p.out, strings.Repeat(" ", p.indent)...)
			p.indentDue = false
		} else {
			p.out = append(p.out, ' ')
		}
		p.out = append(p.out, p.pending...)
		p.pending, p.pendingSlashes = "", false
	}
}

// atLineStart reports whether nothing but indentation is on the line.
func (p *printer) atLineStart() bool { return p.col == p.indent && p.pending == "" }

// comment writes a comment that ends its line.
func (p *printer) comment(c lineComment, indent int) {
	if c.trailing {
		if p.pendingSlashes {
			p.newline(p.indent)
		}
		if p.pending != "" {
			p.pending += " " + c.text
		} else {
			p.pending = c.text
		}
		p.pendingSlashes = c.slashes
		return
	}
	if !p.atLineStart() {
		p.newline(indent)
	}
	p.text(c.text)
	p.newline(indent)
	if c.blank {
		p.out = append(p.out, '\n')
	}
}
