// Package safetext renders text from outside kcedar (audit logs, policy
// files, policy objects, the cluster, the command line) for people: on a
// terminal, where a control character could move the cursor, erase or
// rewrite lines, set a link or reorder what is shown, and in Markdown
// pasted into a pull-request comment, where it could add structure.
//
// Terminal escapes a name so that it prints as one visible run of
// characters; Sprintf and Fprintf escape every argument that way (only the
// format, kcedar's own text, prints as it is), so a renderer built on them
// cannot pass an outside name through raw. MarkdownCode renders a name as
// inline code that no character of it can break out of. NewJSONWriter
// completes what JSON encoders escape, for JSON logs read on a terminal.
package safetext

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"k8s.io/cli-runtime/pkg/printers"
)

// Terminal returns s safe to print on a terminal as part of one line.
// ESC and CR are escaped as kubectl escapes them (printers.EscapeTerminal:
// ^[ and \r); every other character that a terminal acts on or that does
// not show is written as a Go escape: the other C0 controls (\n, \t, \b,
// \a, \x00...), DEL and the C1 controls (among them the one-character CSI
// and OSC, \u009b and \u009d), the format characters (Unicode Cf: the
// bidirectional overrides and isolates such as \u202e, zero-width
// characters, tag characters), the line and paragraph separators, and
// bytes that are not UTF-8 (\xff). Everything else is kept, so ordinary
// names read as they are.
func Terminal(s string) string {
	if !needsEscape(s, false) {
		return s
	}
	return escape(printers.EscapeTerminal(s), false)
}

// Lines is Terminal for text of several lines that kcedar itself laid
// out: newlines are kept, everything else Terminal escapes is escaped.
// Names inside such text should have been escaped with Terminal before
// they were put in it (Sprintf), or a newline in one can still start a
// line of its own.
func Lines(s string) string {
	if !needsEscape(s, true) {
		return s
	}
	return escape(printers.EscapeTerminal(s), true)
}

// needsEscape reports whether s holds anything Terminal (keepNewlines:
// Lines) changes; the common case, plain names, costs one scan.
func needsEscape(s string, keepNewlines bool) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf || c == 0x7f || (c < 0x20 && !(keepNewlines && c == '\n')) {
			return true
		}
	}
	return false
}

// escape writes every character of s that hides or acts as a Go escape.
func escape(s string, keepNewlines bool) string {
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteString(`\x`)
			b.WriteString(strconv.FormatUint(uint64(s[i])|0x100, 16)[1:])
		case r == '\n' && keepNewlines:
			b.WriteByte('\n')
		case hidden(r):
			b.WriteString(escapeRune(r))
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// hidden reports whether r acts on a terminal or does not show: a control
// character, a format character, a line or paragraph separator.
func hidden(r rune) bool {
	return unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp)
}

// escapeRune is r as a Go escape: \n, \t and the like by name, other ASCII
// controls as \xNN, the rest as \uNNNN or \UNNNNNNNN.
func escapeRune(r rune) string {
	switch r {
	case '\a':
		return `\a`
	case '\b':
		return `\b`
	case '\f':
		return `\f`
	case '\n':
		return `\n`
	case '\r':
		return `\r`
	case '\t':
		return `\t`
	case '\v':
		return `\v`
	}
	q := strconv.QuoteRuneToASCII(r) // '\x1b', '\u202e', '\U000e0041'
	return q[1 : len(q)-1]
}

// Sprintf formats as fmt.Sprintf does, with every argument escaped by
// Terminal after it is formatted: a string, a []string, an error, a
// fmt.Stringer, anything. Only format, kcedar's own text, is written as it
// is; a number formats as it would.
func Sprintf(format string, args ...any) string {
	return fmt.Sprintf(format, escaped(args)...)
}

// Fprintf is Sprintf to w.
func Fprintf(w io.Writer, format string, args ...any) (int, error) {
	return fmt.Fprintf(w, format, escaped(args)...)
}

// Fprintln is fmt.Fprintln with every argument escaped by Terminal.
func Fprintln(w io.Writer, args ...any) (int, error) {
	return fmt.Fprintln(w, escaped(args)...)
}

// escaped wraps each argument in a formatter that escapes its output.
func escaped(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		out[i] = escapedArg{a}
	}
	return out
}

// escapedArg formats its value with the verb, flags and precision it is
// given, escapes the result with Terminal, then pads it to the width: an
// escaped name takes its columns as it shows.
type escapedArg struct{ v any }

func (e escapedArg) Format(f fmt.State, verb rune) {
	directive := fmt.FormatString(f, verb)
	width, hasWidth := f.Width()
	if !hasWidth {
		io.WriteString(f, Terminal(fmt.Sprintf(directive, e.v)))
		return
	}
	narrow := fmt.FormatString(widthless{f}, verb)
	text := fmt.Sprintf(narrow, e.v)
	safe := Terminal(text)
	if safe == text {
		fmt.Fprintf(f, directive, e.v) // as fmt pads it (zeros, signs)
		return
	}
	pad := strings.Repeat(" ", max(0, width-utf8.RuneCountInString(safe)))
	if f.Flag('-') {
		io.WriteString(f, safe+pad)
	} else {
		io.WriteString(f, pad+safe)
	}
}

// widthless is a fmt.State without its width, for fmt.FormatString.
type widthless struct{ fmt.State }

func (widthless) Width() (int, bool) { return 0, false }
