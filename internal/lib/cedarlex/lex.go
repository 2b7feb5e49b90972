// Package cedarlex splits Cedar text into tokens the way cedar-go's scanner
// does, so that kcedar's own passes over policy source (the parser's nesting
// guard in package cedarlang, and lint's searches) agree with cedar-go on what is a
// string, what is a comment and where each token is; Quote writes a string
// literal the same scanner reads back.
//
// It is also kcedar's one writer of Cedar: File writes comments (escaped
// so that no text ends or opens one: CommentText) and whole policies built
// from typed parts (Policy, Scope, Expr), in which outside text can only be
// a quoted string or the quoted id of an entity; every policy written is
// kept as built, for package format's Verify to check the parsed file
// against.
//
// What cedar-go (v1.9) accepts, and so what this lexer reads:
//   - whitespace is space, tab, CR and LF;
//   - `// ...` comments run to the end of the line, and `/* ... */` comments
//     (a cedar-go extension; the Cedar grammar has only line comments) run to
//     the first `*/` after the opening `/*` ("/*/" does not close one) and may
//     span lines;
//   - string literals are double-quoted, end at the first unescaped `"`, and
//     may not contain a raw newline; a backslash escapes the next character;
//   - identifiers are [_A-Za-z][_A-Za-z0-9]*, integers [0-9]+;
//   - punctuation is @ . , ; ( ) { } [ ] + - * : :: ! != < <= > >= == || &&.
//
// Anything else (a lone `=`, `|`, `&` or `/`, a non-ASCII rune outside strings
// and comments, ...) is an Invalid token: cedar-go's parser rejects it. The
// lexer never fails on such input; it returns an error only for a string or
// block comment that is not terminated. It does not check escapes or UTF-8
// (cedar-go does, and rejects the input): a backslash always skips one
// character. Positions are cedar-go's: 1-based lines, 1-based columns counted
// in runes, byte offsets.
package cedarlex

import "fmt"

// Kind is a token's kind.
type Kind uint8

const (
	// EOF is the end of the input.
	EOF Kind = iota
	// Ident is an identifier or keyword.
	Ident
	// Int is a decimal integer literal.
	Int
	// String is a string literal, quotes included.
	String
	// LineComment is a `//` comment, without its newline.
	LineComment
	// BlockComment is a `/* */` comment.
	BlockComment
	// Punct is an operator or punctuation (see the package doc).
	Punct
	// Invalid is a rune cedar-go's scanner does not accept here.
	Invalid
)

func (k Kind) String() string {
	switch k {
	case EOF:
		return "EOF"
	case Ident:
		return "Ident"
	case Int:
		return "Int"
	case String:
		return "String"
	case LineComment:
		return "LineComment"
	case BlockComment:
		return "BlockComment"
	case Punct:
		return "Punct"
	case Invalid:
		return "Invalid"
	}
	return fmt.Sprintf("Kind(%d)", k)
}

// IsComment reports whether k is a line or block comment.
func (k Kind) IsComment() bool { return k == LineComment || k == BlockComment }

// Pos is a position in the source.
type Pos struct {
	Offset int // byte offset, from 0
	Line   int // from 1
	Column int // from 1, in runes
}

func (p Pos) String() string { return fmt.Sprintf("%d:%d", p.Line, p.Column) }

// Token is one token: src[Pos.Offset:End].
type Token struct {
	Kind Kind
	Pos  Pos
	End  int // byte offset just past the token
}

// Text is the token's text in src.
func (t Token) Text(src []byte) string { return string(src[t.Pos.Offset:t.End]) }

// Is reports whether the token's text in src is s (without allocating).
func (t Token) Is(src []byte, s string) bool {
	return t.End-t.Pos.Offset == len(s) && string(src[t.Pos.Offset:t.End]) == s
}

// Lexer reads the tokens of one source. The zero Lexer is not usable: use New.
type Lexer struct {
	src  []byte
	off  int
	line int
	col  int // column of the rune at off, from 1
}

// New returns a lexer at the start of src.
func New(src []byte) *Lexer {
	return &Lexer{src: src, line: 1, col: 1}
}

// advance moves past the byte at off, keeping line and column.
func (l *Lexer) advance() {
	c := l.src[l.off]
	l.off++
	if c == '\n' {
		l.line, l.col = l.line+1, 1
	} else if l.off >= len(l.src) || l.src[l.off]&0xC0 != 0x80 {
		// The next byte starts a rune (or the input ends): the rune at
		// the old offset is complete.
		l.col++
	}
}

func (l *Lexer) pos() Pos { return Pos{Offset: l.off, Line: l.line, Column: l.col} }

func (l *Lexer) peek(n int) byte {
	if l.off+n < len(l.src) {
		return l.src[l.off+n]
	}
	return 0
}

// Next returns the next token, comments included; at the end of the input it
// returns an EOF token (again on every later call). The error, for a string
// literal or block comment without its end, carries the position where it
// starts; the lexer then stands at the end of the input.
func (l *Lexer) Next() (Token, error) {
	l.skipSpace()
	start := l.pos()
	if l.off >= len(l.src) {
		return Token{Kind: EOF, Pos: start, End: l.off}, nil
	}
	c := l.src[l.off]
	switch {
	case isIdentStart(c):
		return l.run(start, Ident, IsIdentByte), nil
	case isDigit(c):
		return l.run(start, Int, isDigit), nil
	case c == '"':
		return l.stringLiteral(start)
	case c == '/' && l.peek(1) == '/':
		return l.lineComment(start), nil
	case c == '/' && l.peek(1) == '*':
		return l.blockComment(start)
	}
	return l.punct(start), nil
}

// skipSpace moves past whitespace (ASCII: one column per byte).
func (l *Lexer) skipSpace() {
	for l.off < len(l.src) {
		switch l.src[l.off] {
		case ' ', '\t', '\r':
			l.off++
			l.col++
		case '\n':
			l.off++
			l.line, l.col = l.line+1, 1
		default:
			return
		}
	}
}

// run reads a token of kind whose first byte is at start and whose other
// bytes are those for which more holds (ASCII).
func (l *Lexer) run(start Pos, kind Kind, more func(byte) bool) Token {
	end := l.off + 1
	for end < len(l.src) && more(l.src[end]) {
		end++
	}
	l.col += end - l.off // ASCII
	l.off = end
	return Token{Kind: kind, Pos: start, End: end}
}

// stringLiteral reads a string literal: up to the first unescaped `"`, on
// one line.
func (l *Lexer) stringLiteral(start Pos) (Token, error) {
	src := l.src
	i := l.off + 1
	for {
		if i >= len(src) || src[i] == '\n' {
			l.col += runes(src[l.off:i])
			l.off = i
			l.skipToEnd()
			return Token{}, fmt.Errorf("%s: string literal not terminated", start)
		}
		b := src[i]
		i++
		if b == '"' {
			break
		}
		if b == '\\' && i < len(src) && src[i] != '\n' {
			i++ // the escaped character (its first byte)
		}
	}
	l.col += runes(src[l.off:i]) // no newline inside
	l.off = i
	return Token{Kind: String, Pos: start, End: i}, nil
}

// lineComment reads a `//` comment up to (without) the end of the line.
func (l *Lexer) lineComment(start Pos) Token {
	i := l.off
	for i < len(l.src) && l.src[i] != '\n' {
		i++
	}
	l.col += runes(l.src[l.off:i])
	l.off = i
	return Token{Kind: LineComment, Pos: start, End: i}
}

// blockComment reads a `/* */` comment, which ends at the first `*/` after
// the opening `/*`.
func (l *Lexer) blockComment(start Pos) (Token, error) {
	l.advance()
	l.advance()
	for {
		if l.off+1 >= len(l.src) {
			l.skipToEnd()
			return Token{}, fmt.Errorf("%s: comment not terminated", start)
		}
		if l.src[l.off] == '*' && l.src[l.off+1] == '/' {
			l.advance()
			l.advance()
			return Token{Kind: BlockComment, Pos: start, End: l.off}, nil
		}
		l.advance()
	}
}

// punct reads punctuation, or one invalid rune.
func (l *Lexer) punct(start Pos) Token {
	c := l.src[l.off]
	l.advance()
	next := l.peek(0)
	kind := Punct
	switch c {
	case '@', '.', ',', ';', '(', ')', '{', '}', '[', ']', '+', '-', '*':
	case ':':
		if next == ':' {
			l.advance()
		}
	case '!', '<', '>':
		if next == '=' {
			l.advance()
		}
	case '=', '|', '&':
		if next == c {
			l.advance()
		} else {
			kind = Invalid
		}
	default:
		kind = Invalid
		for l.off < len(l.src) && l.src[l.off]&0xC0 == 0x80 { // the rest of a multi-byte rune
			l.advance()
		}
	}
	return Token{Kind: kind, Pos: start, End: l.off}
}

// runes counts the runes of b as cedar-go's columns do (bytes that start a
// rune; b holds no newline).
func runes(b []byte) int {
	n := 0
	for _, c := range b {
		if c&0xC0 != 0x80 {
			n++
		}
	}
	return n
}

// skipToEnd moves to the end of the input (after an error).
func (l *Lexer) skipToEnd() {
	for l.off < len(l.src) {
		l.advance()
	}
}

// Pos is the position of the next byte to read.
func (l *Lexer) Pos() Pos { return l.pos() }

// isDigit reports whether c is an ASCII digit.
func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// isIdentStart reports whether c can start an identifier.
func isIdentStart(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// IsIdentByte reports whether c can continue an identifier.
func IsIdentByte(c byte) bool {
	return isIdentStart(c) || isDigit(c)
}

// Tokens returns all tokens of src, comments included, up to and without EOF.
func Tokens(src []byte) ([]Token, error) {
	l := New(src)
	var out []Token
	for {
		t, err := l.Next()
		if err != nil {
			return out, err
		}
		if t.Kind == EOF {
			return out, nil
		}
		out = append(out, t)
	}
}
