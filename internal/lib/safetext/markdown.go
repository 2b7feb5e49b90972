package safetext

import (
	"strconv"
	"strings"
)

// markdownSpecial are the ASCII characters that start or end structure in
// GitHub-flavoured Markdown inline text or in the HTML it allows: escapes,
// code spans, emphasis and strikethrough, links and images, HTML tags and
// character references, table cell delimiters, math, attribute quotes.
const markdownSpecial = "\\`*_~[]()!<>&|$\"'"

// MarkdownCode renders s as inline code in GitHub-flavoured Markdown that
// holds in a table cell: a <code> element holding s escaped by Terminal
// (so a newline cannot end the row or start a block), each character of
// markdownSpecial written as a numeric character reference. Nothing in s
// can close the element, start a tag, a link, emphasis, a code span or
// math, or split the cell, and inside code GitHub makes no mention, issue
// reference or emoji of it; the reader sees s's characters. "" for "".
func MarkdownCode(s string) string {
	if s == "" {
		return ""
	}
	return "<code>" + markdownEscape(Terminal(s)) + "</code>"
}

// markdownEscape writes each character of markdownSpecial in s as a
// numeric character reference (&#124; for |).
func markdownEscape(s string) string {
	if !strings.ContainsAny(s, markdownSpecial) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if c := s[i]; strings.IndexByte(markdownSpecial, c) >= 0 {
			b.WriteString("&#" + strconv.Itoa(int(c)) + ";")
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}
