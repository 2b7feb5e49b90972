package cedarlex

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Quote is s as a Cedar string literal: double-quoted, with `"` and `\`
// escaped, and every rune that is not printable (newline, tab, carriage
// return, NUL and the other control characters, U+2028, U+2029, U+0085,
// format and separator characters other than the space) written as an
// escape that Cedar reads back as the same rune, so that a literal is one
// line of visible text. A string that is not valid UTF-8 cannot be a Cedar
// string exactly (Cedar strings are Unicode text): Quote returns an error
// for it, never a different string.
func Quote(s string) (string, error) {
	if !utf8.ValidString(s) {
		return "", invalidUTF8(s)
	}
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case !printable(r):
			fmt.Fprintf(&b, `\u{%x}`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String(), nil
}

// printable reports whether r is written as itself in literals and
// comments: a graphic rune or the ASCII space (unicode.IsPrint), never a
// control, format or separator character another reader could take for
// a line break or a change of direction.
func printable(r rune) bool { return unicode.IsPrint(r) }

// invalidUTF8 is the error for text that is not valid UTF-8, the text
// shown escaped and cut short.
func invalidUTF8(s string) error {
	return fmt.Errorf("%s is not valid UTF-8, and a Cedar string holds Unicode text only", Shorten(s))
}

// maxShown bounds the bytes of outside text an error or warning shows.
const maxShown = 120

// Shorten is s for a message: quoted with its non-printable runes and
// invalid bytes escaped (strconv.Quote), and cut after 120 bytes.
func Shorten(s string) string {
	if len(s) <= maxShown {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%q... (%d bytes)", s[:maxShown], len(s))
}

// Visible is s with every rune that could end or confuse a line written
// as a visible escape: newline, carriage return and tab as \n, \r and \t,
// every other non-printable rune (controls, NUL, U+0085, U+2028, U+2029,
// bidirectional and other format characters) as \u{...}, and each byte of
// invalid UTF-8 as \x... Printable text, backslashes included, is left as
// it is: Visible is for people to read (comments, warnings), and is not
// meant to be read back.
func Visible(s string) string {
	if isVisible(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case !printable(r):
			fmt.Fprintf(&b, `\u{%x}`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// isVisible reports whether Visible leaves s as it is.
func isVisible(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			return utf8.ValidString(s) && strings.IndexFunc(s, func(r rune) bool { return !printable(r) }) < 0
		}
	}
	return true
}

// CommentText is s as the text of a `//` comment: Visible, so that it
// stays on its line whatever reads it (cedar-go ends a line comment at a
// newline only; Cedar's Rust parser at a carriage return too; editors and
// terminals at U+2028, U+2029 and U+0085), and with `/*` and `*/` broken
// up (`/\*`, `*\/`) so that it can neither open nor close a block comment
// around it.
func CommentText(s string) string {
	v := Visible(s)
	if !strings.Contains(v, "/*") && !strings.Contains(v, "*/") {
		return v
	}
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '*' && i > 0 && v[i-1] == '/':
			b.WriteString(`\*`)
		case c == '/' && i > 0 && v[i-1] == '*':
			b.WriteString(`\/`)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// lineBreaks are the runes other than '\n' that some reader of Cedar
// ends a line at: Cedar's Rust parser ends a line comment at '\r';
// editors, terminals and Unicode line breaking at the others.
const lineBreaks = "\r\v\f\u0085\u2028\u2029"

// EscapeLineBreaks is the text of a line comment with every rune some
// reader takes for a line break (lineBreaks) written as \u{...}, so that
// no reader sees the rest of the comment as code; the rest is unchanged.
func EscapeLineBreaks(s string) string {
	if !strings.ContainsAny(s, lineBreaks) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if strings.ContainsRune(lineBreaks, r) {
			fmt.Fprintf(&b, `\u{%x}`, r)
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}
