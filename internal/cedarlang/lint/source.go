package lint

import (
	"sort"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/kcedar/kcedar/internal/lib/cedarlex"
)

const badRune = utf8.RuneError

func decodeRune(b []byte) (rune, int) {
	r, size := utf8.DecodeRune(b)
	if r == utf8.RuneError && size <= 1 {
		return badRune, 1
	}
	return r, size
}

// sourceFile maps between byte offsets and cedar-go's line:column positions
// (1-based, columns counted in runes). Conversions are O(1) on ASCII lines;
// a line with other runes gets a rune index on first use, so a huge
// one-line file with many policies is not quadratic.
type sourceFile struct {
	name    string
	data    []byte
	lines   []int      // byte offset of each line's start
	ascii   []bool     // whether each line is ASCII
	runesMu sync.Mutex // policies of one file are linted in parallel
	runes   map[int][]int32
	mask    string // data with comments blanked out, for searching
}

func newSourceFile(name string, data []byte) *sourceFile {
	sf := &sourceFile{name: name, data: data, lines: []int{0}, ascii: []bool{true}, runes: map[int][]int32{}}
	for i, c := range data {
		if c == '\n' {
			sf.lines = append(sf.lines, i+1)
			sf.ascii = append(sf.ascii, true)
		} else if c >= 0x80 {
			sf.ascii[len(sf.ascii)-1] = false
		}
	}
	sf.mask = maskComments(data)
	return sf
}

// lineEnd is the byte offset of the end of line (1-based), without '\n'.
func (sf *sourceFile) lineEnd(line int) int {
	if line < len(sf.lines) {
		return sf.lines[line] - 1
	}
	return len(sf.data)
}

// runeIndex lists the byte offset (from the line's start) of each rune of
// a non-ASCII line.
func (sf *sourceFile) runeIndex(line int) []int32 {
	sf.runesMu.Lock()
	defer sf.runesMu.Unlock()
	if idx, ok := sf.runes[line]; ok {
		return idx
	}
	start, end := sf.lines[line-1], sf.lineEnd(line)
	var idx []int32
	for off := start; off < end; {
		idx = append(idx, int32(off-start))
		_, size := decodeRune(sf.data[off:])
		off += size
	}
	sf.runes[line] = idx
	return idx
}

// offset is the byte offset of line:col.
func (sf *sourceFile) offset(line, col int) int {
	if line < 1 || line > len(sf.lines) {
		return 0
	}
	start, end := sf.lines[line-1], sf.lineEnd(line)
	if col < 1 {
		col = 1
	}
	if sf.ascii[line-1] {
		return min(start+col-1, end)
	}
	idx := sf.runeIndex(line)
	if col-1 < len(idx) {
		return start + int(idx[col-1])
	}
	return end
}

// position is the line:col of a byte offset.
func (sf *sourceFile) position(off int) (int, int) {
	off = max(0, min(off, len(sf.data)))
	line := sort.Search(len(sf.lines), func(i int) bool { return sf.lines[i] > off }) // first line starting after off
	start := sf.lines[line-1]
	if sf.ascii[line-1] {
		return line, 1 + off - start
	}
	idx := sf.runeIndex(line)
	return line, 1 + sort.Search(len(idx), func(i int) bool { return int(idx[i]) >= off-start })
}

// maskComments replaces the contents of comments (`//` and `/* */`, as
// cedar-go reads them: see internal/lib/cedarlex) with spaces, keeping byte
// offsets and newlines, and leaves strings intact. After a string or comment
// that does not end (which cedar-go rejects) the rest is left as it is.
func maskComments(data []byte) string {
	out := []byte(string(data))
	lx := cedarlex.New(data)
	for {
		tok, err := lx.Next()
		if err != nil || tok.Kind == cedarlex.EOF {
			return string(out)
		}
		if tok.Kind.IsComment() {
			for i := tok.Pos.Offset; i < tok.End; i++ {
				if out[i] != '\n' {
					out[i] = ' '
				}
			}
		}
	}
}

// find returns the offset of the first occurrence of needle in the policy's
// text (outside comments) that is not part of a longer name, or -1.
func (ps *policySource) find(needle string) int {
	return ps.findFrom(ps.start, needle)
}

func (ps *policySource) findFrom(from int, needle string) int {
	text := ps.file.mask[:ps.end]
	for from < ps.end {
		i := strings.Index(text[from:], needle)
		if i < 0 {
			return -1
		}
		at := from + i
		after := at + len(needle)
		if after < len(text) && isNameByte(needle[len(needle)-1]) && (isNameByte(text[after]) || text[after] == ':') {
			from = at + 1
			continue
		}
		return at
	}
	return -1
}

func isNameByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// diag makes a diagnostic for the policy at offset at (the policy's start
// when at < 0).
func (ps *policySource) diag(sev Severity, code, msg, hint string, at int) Diagnostic {
	if at < 0 {
		at = ps.start
	}
	line, col := ps.file.position(at)
	return Diagnostic{File: ps.file.name, Line: line, Column: col, Policy: ps.p.ID, Severity: sev, Code: code, Message: msg, Hint: hint}
}

// condStart is the offset of the policy's first when/unless, or -1.
func (ps *policySource) condStart() int {
	w, u := ps.find("when"), ps.find("unless")
	switch {
	case w < 0:
		return u
	case u < 0:
		return w
	}
	return min(w, u)
}

// at returns the byte at line:col, or 0.
func (sf *sourceFile) at(line, col int) byte {
	off := sf.offset(line, col)
	if off < len(sf.data) {
		return sf.data[off]
	}
	return 0
}

// lastIndexInLine returns the column of the last occurrence of word on line
// before column col, or 0.
func (sf *sourceFile) lastIndexInLine(line, col int, word string) int {
	start := sf.offset(line, 1)
	end := sf.offset(line, col)
	i := strings.LastIndex(string(sf.data[start:end]), word)
	if i < 0 {
		return 0
	}
	_, c := sf.position(start + i)
	return c
}

// condStartOrEnd is condStart, or the policy's end without conditions.
func (ps *policySource) condStartOrEnd() int {
	if c := ps.condStart(); c >= 0 {
		return c
	}
	return ps.end
}

// findNth returns the offset of the nth (0-based) occurrence of needle as
// find sees them, or of the first when there are not that many, or -1.
func (ps *policySource) findNth(needle string, nth int) int {
	first := ps.find(needle)
	at := first
	for i := 0; i < nth && at >= 0; i++ {
		at = ps.findFrom(at+1, needle)
	}
	if at < 0 {
		return first
	}
	return at
}

// findHas returns the offset of the nth (0-based) `has attr` (or
// `has "attr"`) in the policy's text outside comments, or of the first when
// there are not that many, or -1.
func (ps *policySource) findHas(attr string, nth int) int {
	first, seen := -1, 0
	for at := ps.find("has"); at >= 0; at = ps.findFrom(at+1, "has") {
		if at > 0 && isNameByte(ps.file.mask[at-1]) || !ps.followedBy(at+len("has"), attr) {
			continue
		}
		if first < 0 {
			first = at
		}
		if seen == nth {
			return at
		}
		seen++
	}
	return first
}

// followedBy reports whether the policy's text at offset from is, after
// blanks, the name attr (not the start of a longer name) or the string "attr".
func (ps *policySource) followedBy(from int, attr string) bool {
	text := ps.file.mask[:ps.end]
	rest := strings.TrimLeft(text[min(from, len(text)):], " \t\r\n")
	if strings.HasPrefix(rest, `"`+attr+`"`) {
		return true
	}
	r, ok := strings.CutPrefix(rest, attr)
	return ok && (r == "" || !isNameByte(r[0]))
}
