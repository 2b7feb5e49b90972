package cedarlang

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"unicode/utf8"

	cedarast "github.com/cedar-policy/cedar-go/ast"

	"github.com/kcedar/kcedar/internal/lib/cedarx/ast"
)

// Reparse parses src, the new text of policy file fileName, given an
// earlier text old of the file (then named oldName) and prev, the policies
// ParsePolicies(oldName, old) returned, in order. A policy whose text (from
// the end of the policy before it to its closing `;`, comments and
// annotations included) appears in old is not parsed again: it is prev's
// policy, as is where nothing moved, else a copy moved to its new position
// (its Source and, without @id, its id follow the position; it shares the
// AST's scope and conditions and the index keys already extracted). Texts
// are matched by content, not position, so inserting a policy moves the
// later ones rather than changing them. fresh lists the policies parsed
// anew: only they need validating. The policies (and any error) are
// exactly those of ParsePolicies(fileName, src): on any error, or when old
// and prev do not agree, src is parsed whole.
func Reparse(fileName string, src []byte, oldName string, old []byte, prev []*Policy) (policies, fresh []*Policy, err error) {
	if len(src) > MaxPolicyFileBytes || len(old) > MaxPolicyFileBytes {
		ps, err := ParsePolicies(fileName, src)
		return ps, ps, err
	}
	if policies, fresh, ok := reparseAround(fileName, src, oldName, old, prev); ok {
		return policies, fresh, nil
	}
	return reparseMatching(fileName, src, oldName, old, prev)
}

// reparseMatching is Reparse by reading both texts whole: every policy's
// text is hashed and looked up among the old ones.
func reparseMatching(fileName string, src []byte, oldName string, old []byte, prev []*Policy) (policies, fresh []*Policy, err error) {
	whole := func() ([]*Policy, []*Policy, error) {
		ps, err := ParsePolicies(fileName, src)
		return ps, ps, err
	}
	oldEnds, err := checkNesting(old)
	if err != nil || len(oldEnds) != len(prev) {
		return whole()
	}
	ends, err := checkNesting(src)
	if err != nil {
		return whole()
	}
	known := make(map[[32]byte][]placed, len(prev))
	for i, at := range chunkLayout(old, oldEnds) {
		if prev[i].AST.Position.Filename != oldName {
			return whole() // not what ParsePolicies(oldName, old) made
		}
		h := sha256.Sum256(old[at.start:oldEnds[i]])
		known[h] = append(known[h], placed{p: prev[i], at: at})
	}
	layout := chunkLayout(src, ends)
	policies = make([]*Policy, 0, len(ends))
	for i, at := range layout {
		text := src[at.start:ends[i]]
		h := sha256.Sum256(text)
		if l := known[h]; len(l) > 0 {
			known[h] = l[1:]
			policies = append(policies, l[0].p.moved(fileName, l[0].at, at))
			continue
		}
		p, err := parseChunk(fileName, src, text, at)
		if err != nil {
			return whole()
		}
		policies, fresh = append(policies, p), append(fresh, p)
	}
	if !emptyTail(fileName, src, ends) {
		return whole()
	}
	return policies, fresh, nil
}

// chunkAt is where one policy's text starts in its file: the byte offset,
// the lines before it, and the runes of its first line before it; line0:
// the lines before the text parseEach gives cedar-go (from the end of the
// policy before), to which the line of a policy's AST position is relative.
type chunkAt struct{ start, line, column, line0 int }

// placed is a policy and where its text was.
type placed struct {
	p  *Policy
	at chunkAt
}

// chunkLayout is where each policy's text starts, given the offsets after
// each policy's closing `;` (checkNesting): the arithmetic of parseEach,
// past the spaces and newlines that open the text (so a policy moved below
// another keeps its text).
func chunkLayout(src []byte, ends []int) []chunkAt {
	out := make([]chunkAt, len(ends))
	start, line, column := 0, 0, 0
	for i, end := range ends {
		at := chunkAt{start: start, line: line, column: column, line0: line}
		for at.start < end && (src[at.start] == ' ' || src[at.start] == '\n') {
			if src[at.start] == '\n' {
				at.line, at.column = at.line+1, 0
			} else {
				at.column++
			}
			at.start++
		}
		out[i] = at
		text := src[start:end]
		line += bytes.Count(text, []byte{'\n'})
		if nl := bytes.LastIndexByte(text, '\n'); nl >= 0 {
			column = utf8.RuneCount(text[nl+1:])
		} else {
			column += utf8.RuneCount(text)
		}
		start = end
	}
	return out
}

// parseChunk parses the text of one policy of file fileName (src) at at, as
// parseEach and ParsePolicies do.
func parseChunk(fileName string, src, text []byte, at chunkAt) (*Policy, error) {
	var a cedarast.Policy
	if err := a.UnmarshalCedar(text); err != nil {
		return nil, err
	}
	if a.Position.Line == 1 {
		a.Position.Column += at.column
	}
	a.Position.Line += at.line - at.line0
	a.Position.Filename, a.Position.Offset = fileName, a.Position.Offset+at.start
	p, err := newPolicy(fileName, src, (*ast.Policy)(&a), at.line0)
	if err == nil {
		p.textEnd = at.start + len(text)
	}
	return p, err
}

// moved is p, parsed from a text at from, as parsed from the same text at
// to in file fileName: p itself if nothing changes, else a copy with the
// new position (and, without @id, the id that follows it).
func (p *Policy) moved(fileName string, from, to chunkAt) *Policy {
	pos := p.AST.Position
	line := pos.Line + from.line0 - from.line // in the text, from 1
	if line == 1 {
		pos.Column += to.column - from.column
	}
	pos.Line = line + to.line - to.line0
	pos.Offset += to.start - from.start
	pos.Filename = fileName
	source := fmt.Sprintf("%s:%d:%d", fileName, line+to.line, pos.Column)
	if pos == p.AST.Position && source == p.Source {
		return p
	}
	q := *p
	a := *p.AST
	a.Position = pos
	q.AST, q.Source = &a, source
	if p.textEnd > 0 {
		q.textEnd = p.textEnd + to.start - from.start
	}
	if !hasIDAnnotation(&a) {
		q.ID = source
	}
	q.lazy = &lazyForms{} // compiled anew: cedar-go's policy carries its position
	q.lazy.keys.Store(p.lazy.keys.Load())
	return &q
}

func hasIDAnnotation(a *ast.Policy) bool {
	for _, an := range a.Annotations {
		if an.Key == "id" {
			return true
		}
	}
	return false
}
