// Package hostile holds names that try to act on whoever reads them (a
// terminal, a Markdown renderer, a browser) and checks that an output
// passes none of them on raw.
package hostile

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Names are outside names that try to act on a terminal or on Markdown and
// HTML: ANSI sequences that erase a line, move up, retitle the window; an
// OSC 8 hyperlink; carriage returns and backspaces that overwrite; bell;
// the one-character C1 CSI; the right-to-left override and an isolate;
// zero-width and tag characters; newlines and tabs; bytes that are not
// UTF-8; and Markdown and HTML structure (table pipes, backticks, tags,
// links, emphasis, math, mentions). Each is a valid Kubernetes user name.
var Names = []string{
	"alice\x1b[2K\x1b[1A\x1b[2Kroot",
	"evil\x1b]0;owned\x07title",
	"\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\",
	"bob\rroot",
	"mallory\b\b\b\b\b\b\bsystem:admin",
	"ring\a\a",
	"csi\u009b2Jc1",
	"\u202etxt.exe",
	"a\u2066b\u2069c\u200bd\ufeffe\U000E0041",
	"line1\nline2\r\nline3\u2028line4\u2029",
	"tab\there",
	"bad\xffutf8\xc3",
	"del\x7f",
	"nul\x00byte",
	"pipe|cell",
	"`code` and ``more``",
	"<script>alert(1)</script>",
	"</code><img src=x onerror=alert(1)>",
	"**bold** _em_ ~~strike~~",
	"[link](https://evil.example) ![img](x)",
	"$x^2$",
	`back\slash\|pipe`,
	"&lt;entity&#124;",
	"@org/team #123 :smile:",
}

// RawControl returns the first character of s that acts on a terminal or
// does not show (a control, format or separator character, or a byte that
// is not UTF-8), described, or "" when there is none. Newlines are allowed
// when keepNewlines is set.
func RawControl(s string, keepNewlines bool) string {
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			return fmt.Sprintf("byte %#x (not UTF-8) at %d", s[i], i)
		case r == '\n' && keepNewlines:
		case unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp):
			return fmt.Sprintf("%U at %d", r, i)
		}
	}
	return ""
}
