package format

import (
	"fmt"
	"strings"
)

// maxDiffCells bounds the table of the line diff (lines before × lines
// after, once the common head and tail are set aside); past it the changed
// middle is shown as one replacement.
const maxDiffCells = 4 << 20

// edit is one line of a diff: ' ' kept, '-' removed, '+' added.
type edit struct {
	op   byte
	line string
}

// Diff is a unified diff (3 lines of context) from a to b, whose files are
// both named name ("--- name.orig", "+++ name"); "" when they are equal.
func Diff(name string, a, b []byte) string {
	if string(a) == string(b) {
		return ""
	}
	edits := lineEdits(splitLines(string(a)), splitLines(string(b)))
	var out strings.Builder
	fmt.Fprintf(&out, "--- %s.orig\n+++ %s\n", name, name)
	const context = 3
	aLine, bLine := 1, 1 // line numbers at edits[i]
	for i := 0; i < len(edits); {
		if edits[i].op == ' ' {
			aLine, bLine, i = aLine+1, bLine+1, i+1
			continue
		}
		// A hunk: from context lines before this change to context lines
		// after the last change closer than 2*context to the previous one.
		start := max(0, i-context)
		end := i
		for j := i; j < len(edits) && j-end <= 2*context; j++ {
			if edits[j].op != ' ' {
				end = j
			}
		}
		end = min(len(edits), end+context+1)
		hunk, na, nb := edits[start:end], 0, 0
		for _, e := range hunk {
			na += b2i(e.op != '+')
			nb += b2i(e.op != '-')
		}
		back := i - start
		fmt.Fprintf(&out, "@@ -%d,%d +%d,%d @@\n", aLine-back, na, bLine-back, nb)
		for _, e := range hunk {
			out.WriteString(string(e.op) + e.line + "\n")
		}
		for _, e := range edits[i:end] {
			aLine += b2i(e.op != '+')
			bLine += b2i(e.op != '-')
		}
		i = end
	}
	return out.String()
}

// b2i is 1 for true.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// splitLines splits s into lines without their newlines.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// lineEdits is a shortest edit script from a to b (a longest common
// subsequence kept), or, past maxDiffCells, the changed middle replaced.
func lineEdits(a, b []string) []edit {
	head := 0
	for head < len(a) && head < len(b) && a[head] == b[head] {
		head++
	}
	tail := 0
	for tail < len(a)-head && tail < len(b)-head && a[len(a)-1-tail] == b[len(b)-1-tail] {
		tail++
	}
	var out []edit
	for _, l := range a[:head] {
		out = append(out, edit{' ', l})
	}
	out = append(out, middleEdits(a[head:len(a)-tail], b[head:len(b)-tail])...)
	for _, l := range a[len(a)-tail:] {
		out = append(out, edit{' ', l})
	}
	return out
}

// middleEdits diffs a and b by dynamic programming over their longest
// common subsequence.
func middleEdits(a, b []string) []edit {
	var out []edit
	if len(a)*len(b) > maxDiffCells {
		for _, l := range a {
			out = append(out, edit{'-', l})
		}
		for _, l := range b {
			out = append(out, edit{'+', l})
		}
		return out
	}
	// lcs[i][j] is the length of the LCS of a[i:] and b[j:].
	w := len(b) + 1
	lcs := make([]int32, (len(a)+1)*w)
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i*w+j] = lcs[(i+1)*w+j+1] + 1
			} else {
				lcs[i*w+j] = max(lcs[(i+1)*w+j], lcs[i*w+j+1])
			}
		}
	}
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			out = append(out, edit{' ', a[i]})
			i, j = i+1, j+1
		case i < len(a) && (j == len(b) || lcs[(i+1)*w+j] >= lcs[i*w+j+1]):
			out = append(out, edit{'-', a[i]})
			i++
		default:
			out = append(out, edit{'+', b[j]})
			j++
		}
	}
	return out
}
