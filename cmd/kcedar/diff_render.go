package main

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/kcedar/kcedar/internal/lib/safetext"
	"github.com/kcedar/kcedar/internal/tools/diff"
)

// How much of the regions the table and markdown views show (--all
// lifts it; -o json has every region): groups of one change and policies,
// subjects of a group, rows of a subject. The summary counts everything.
const (
	maxGroupsShown   = 12 // of each kind of change
	maxSubjectsShown = 6
	maxRowsShown     = 4
	// lineWidth is the width the table's lines fit (a policy id longer
	// than it has a line of its own).
	lineWidth = 100
	// maxMarkdownBytes bounds the markdown view, under GitHub's 65,536
	// characters for a comment.
	maxMarkdownBytes = 50000
)

// diffGroup is the regions of one kind of change with the same
// policies on each side, by subject.
type diffGroup struct {
	kind               string
	changes            []string // the changes ("Allow → NoOpinion") of its regions
	old, new           []string
	regions, requests  int
	subjects           []*subjectRows
	subjectsBySubjText map[string]*subjectRows
}

// subjectRows are a group's regions of one subject, or of several
// subjects whose regions read the same (all of one kind of change).
type subjectRows struct {
	subject  diff.Subject
	others   []diff.Subject // more subjects with the same rows
	regions  []diffRegion
	seen     map[string]bool // the rows' texts
	rowsText string          // all of them
}

// text is who the rows are about, to fit width: the subjects (as many as
// fit, then a count), their common groups said once.
func (s *subjectRows) text(width int) string {
	if len(s.others) == 0 {
		return subjectText(s.subject)
	}
	withGroups := s.subject
	withGroups.Kind, withGroups.All, withGroups.Name, withGroups.Namespace = diff.KindUser, false, "", ""
	groups := strings.TrimPrefix(subjectText(withGroups), principalText(withGroups))
	all := append([]diff.Subject{s.subject}, s.others...)
	names := make([]string, len(all))
	for i, x := range all {
		names[i] = principalText(x)
	}
	for n := len(names); ; n-- {
		text := strings.Join(names[:n], "; ")
		if n < len(names) {
			text += fmt.Sprintf("; and %d more", len(names)-n)
		}
		if text += groups; n == 1 || utf8.RuneCountInString(text) <= width {
			return text
		}
	}
}

// kindOrder is the order of the kinds of change in the views: what may
// need a review first.
var kindOrder = map[string]int{changeInexact: 0, changeGained: 1, changeConditional: 2, changeLost: 3}

// groups are the report's regions by kind, change and policies (most
// regions first), each by subject (anyone first, then every principal of
// a kind, then one by one).
func (r *diffReport) groups() []*diffGroup {
	index := map[string]*diffGroup{}
	var out []*diffGroup
	for _, g := range r.Regions {
		k := strings.Join([]string{g.Kind, strings.Join(g.OldPolicies, "\x01"), strings.Join(g.NewPolicies, "\x01")}, "\x00")
		grp, ok := index[k]
		if !ok {
			grp = &diffGroup{kind: g.Kind, old: g.OldPolicies, new: g.NewPolicies, subjectsBySubjText: map[string]*subjectRows{}}
			index[k] = grp
			out = append(out, grp)
		}
		if change := changeText(g); !slices.Contains(grp.changes, change) {
			grp.changes = append(grp.changes, change)
		}
		grp.regions++
		grp.requests += g.Requests
		who := subjectText(g.Subject)
		rows, ok := grp.subjectsBySubjText[who]
		if !ok {
			rows = &subjectRows{subject: g.Subject, seen: map[string]bool{}}
			grp.subjectsBySubjText[who] = rows
			grp.subjects = append(grp.subjects, rows)
		}
		// Regions that read the same (two placeholders for "any other
		// name", say) are one row.
		if text := changeText(g) + "\x00" + fitLine("", regionParts(g)); !rows.seen[text] {
			rows.seen[text] = true
			rows.regions = append(rows.regions, g)
			rows.rowsText += text + "\x01"
		}
	}
	for _, grp := range out {
		sort.SliceStable(grp.subjects, func(i, j int) bool {
			return subjectRank(grp.subjects[i].subject) < subjectRank(grp.subjects[j].subject)
		})
		grp.subjects = mergeSameRows(grp.subjects)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if kindOrder[out[i].kind] != kindOrder[out[j].kind] {
			return kindOrder[out[i].kind] < kindOrder[out[j].kind]
		}
		return out[i].regions > out[j].regions
	})
	return out
}

// mergeSameRows merges the subjects whose regions read the same (and
// whose groups are the same) into the first of them.
func mergeSameRows(subjects []*subjectRows) []*subjectRows {
	index := map[string]*subjectRows{}
	var out []*subjectRows
	for _, s := range subjects {
		k := s.rowsText + "\x02" + strings.Join(s.subject.InGroups, ",") + "\x02" + strings.Join(s.subject.NotIn, ",")
		if m, ok := index[k]; ok && s.subject.Kind != diff.KindAnyone {
			m.others = append(m.others, s.subject)
			continue
		}
		index[k] = s
		out = append(out, s)
	}
	return out
}

// changeText is a region's change: "Allow → NoOpinion".
func changeText(g diffRegion) string { return g.Change.From + " → " + g.Change.To }

// subjectRank orders subjects: anyone, every principal of a kind, named
// ones, any other.
func subjectRank(s diff.Subject) int {
	switch {
	case s.Kind == diff.KindAnyone:
		return 0
	case s.All:
		return 1
	case diff.IsOther(s.Name) || diff.IsOther(s.Namespace):
		return 3
	}
	return 2
}

// summaryLines are the report's summary: what changed, whether it was
// decided exactly, the regions by change, and the policies with the most
// regions. Outside text (policy ids, constructs) is rendered by name.
func (r *diffReport) summaryLines(name func(string) string, all bool) []string {
	lines := []string{r.headline()}
	if !r.Changed {
		return lines
	}
	if len(r.Inexact) > 0 {
		inexact := make([]string, len(r.Inexact))
		for i, c := range r.Inexact {
			inexact[i] = name(c)
		}
		lines = append(lines, "NOT DECIDED EXACTLY: "+strings.Join(inexact, "; ")+
			". A change may be missing from the regions below, and --exit-code counts every region as failing.")
	} else {
		lines = append(lines, fmt.Sprintf("Decided exactly (%s decided with both sets).", plural(r.Decided, "representative request")))
	}
	lines = append(lines, "By change:")
	for _, c := range r.byChange() {
		lines = append(lines, fmt.Sprintf("  %-11s %-26s %s, %s", c.kind, c.from+" → "+c.to, plural(c.regions, "region"), plural(c.requests, "request")))
	}
	lines = append(lines, "By policy (regions where it decides the change; old or new side, kinds of change):")
	policies := r.byPolicy()
	shown := policies
	if !all && len(shown) > 10 {
		shown = shown[:10]
	}
	for _, p := range shown {
		lines = append(lines, fmt.Sprintf("  %6d  %-18s %s", p.regions, p.side+", "+p.kinds, name(p.id)))
	}
	if len(shown) < len(policies) {
		lines = append(lines, fmt.Sprintf("  and %s not shown (--all lists them)", plural(len(policies)-len(shown), "more policy")))
	}
	return lines
}

// headline says whether access changes, and which policies did.
func (r *diffReport) headline() string {
	var counts []string
	for _, c := range []struct {
		n    int
		what string
	}{{len(r.Edited), "edited"}, {len(r.Removed), "removed"}, {len(r.Added), "added"}} {
		if c.n > 0 {
			counts = append(counts, fmt.Sprintf("%d %s", c.n, c.what))
		}
	}
	policies := "policies: " + strings.Join(counts, ", ")
	if len(counts) == 0 {
		policies = "no policy changed"
	}
	if !r.Changed {
		return fmt.Sprintf("no change in access (%s)", policies)
	}
	return fmt.Sprintf("%s changed (%s)", plural(len(r.Regions), "region"), policies)
}

// changeCount is the regions and requests of one change.
type changeCount struct {
	kind, from, to    string
	regions, requests int
}

// byChange counts the regions and requests by change, in kind order.
func (r *diffReport) byChange() []changeCount {
	var out []changeCount
	index := map[string]int{}
	for _, g := range r.Regions {
		k := g.Kind + "\x00" + g.Change.From + "\x00" + g.Change.To
		i, ok := index[k]
		if !ok {
			i = len(out)
			index[k] = i
			out = append(out, changeCount{kind: g.Kind, from: g.Change.From, to: g.Change.To})
		}
		out[i].regions++
		out[i].requests += g.Requests
	}
	sort.SliceStable(out, func(i, j int) bool { return kindOrder[out[i].kind] < kindOrder[out[j].kind] })
	return out
}

// policyCount is the regions one policy decides the change of.
type policyCount struct {
	id, side, kinds string
	regions         int
}

// byPolicy counts, for each policy, the regions whose change it decides
// (on the side whose decision it makes: the new for a region gained by a
// permit, the old for one lost by its removal), most regions first.
func (r *diffReport) byPolicy() []policyCount {
	type acc struct {
		regions int
		kinds   []string
	}
	counts := map[[2]string]*acc{}
	for _, g := range r.Regions {
		side, ids := "new", g.NewPolicies
		if len(ids) == 0 {
			side, ids = "old", g.OldPolicies
		}
		for _, id := range ids {
			a := counts[[2]string{id, side}]
			if a == nil {
				a = &acc{}
				counts[[2]string{id, side}] = a
			}
			a.regions++
			if !slices.Contains(a.kinds, g.Kind) {
				a.kinds = append(a.kinds, g.Kind)
			}
		}
	}
	out := make([]policyCount, 0, len(counts))
	for k, a := range counts {
		sort.Slice(a.kinds, func(i, j int) bool { return kindOrder[a.kinds[i]] < kindOrder[a.kinds[j]] })
		out = append(out, policyCount{id: k[0], side: k[1], kinds: strings.Join(a.kinds, ", "), regions: a.regions})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].regions != out[j].regions {
			return out[i].regions > out[j].regions
		}
		return out[i].id+out[i].side < out[j].id+out[j].side
	})
	return out
}

// writeDiffTable writes the report for a terminal: the summary, then the
// regions by change and policies, and in those by subject, one line each,
// fit to lineWidth. Every line holds names from the policies (subjects,
// groups, namespaces, names, policy ids): each is escaped
// (safetext.Terminal), so none can add a line or act on the terminal.
func writeDiffTable(w io.Writer, r *diffReport, all bool) error {
	var b strings.Builder
	for _, l := range r.summaryLines(safetext.Terminal, all) {
		b.WriteString(wrapLine(safetext.Terminal(l)))
	}
	for _, kind := range shownGroups(r.groups(), all) {
		for _, g := range kind.shown {
			b.WriteString("\n")
			writeGroupText(&b, g, all)
		}
		if len(kind.hidden) > 0 {
			fmt.Fprintf(&b, "\n... %s not shown (%s): --all shows them, -o json lists every region\n",
				plural(len(kind.hidden), kind.kind+" group"), plural(regionsOf(kind.hidden), "region"))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// kindGroups are the groups of one kind of change, those shown and those
// not.
type kindGroups struct {
	kind          string
	shown, hidden []*diffGroup
}

// shownGroups splits groups (in kind order) by kind, each kind showing at
// most maxGroupsShown of its groups (all of them with all).
func shownGroups(groups []*diffGroup, all bool) []kindGroups {
	var out []kindGroups
	for _, g := range groups {
		if len(out) == 0 || out[len(out)-1].kind != g.kind {
			out = append(out, kindGroups{kind: g.kind})
		}
		k := &out[len(out)-1]
		if all || len(k.shown) < maxGroupsShown {
			k.shown = append(k.shown, g)
		} else {
			k.hidden = append(k.hidden, g)
		}
	}
	return out
}

func regionsOf(groups []*diffGroup) int {
	n := 0
	for _, g := range groups {
		n += g.regions
	}
	return n
}

// writeGroupText writes one group: its change and policies, then each
// subject with its rows.
func writeGroupText(b *strings.Builder, g *diffGroup, all bool) {
	change := ""
	if len(g.changes) == 1 {
		change = g.changes[0] + ", "
	}
	fmt.Fprintf(b, "%s: %s%s, %s\n", strings.ToUpper(g.kind), change, plural(g.regions, "region"), plural(g.requests, "request"))
	for _, side := range []struct {
		name string
		ids  []string
	}{{"old", g.old}, {"new", g.new}} {
		if len(side.ids) == 0 {
			fmt.Fprintf(b, "  %s: no policy\n", side.name)
		}
		for _, id := range side.ids {
			b.WriteString(wrapLine(safetext.Terminal(fmt.Sprintf("  %s: %s", side.name, id))))
		}
	}
	for i, s := range g.subjects {
		if !all && i == maxSubjectsShown {
			fmt.Fprintf(b, "  ... and %s more\n", plural(len(g.subjects)-i, "subject"))
			break
		}
		b.WriteString(wrapLine(safetext.Terminal("  " + s.text(lineWidth-2))))
		for j, reg := range s.regions {
			if !all && j == maxRowsShown {
				fmt.Fprintf(b, "    ... and %s more\n", plural(len(s.regions)-j, "region"))
				break
			}
			indent := "    "
			if len(g.changes) > 1 {
				indent += changeText(reg) + ": "
			}
			b.WriteString(wrapLine(safetext.Terminal(fitLine(indent, regionParts(reg)))))
			if ex := exampleText(reg.Example); ex != "" {
				b.WriteString(wrapLine(safetext.Terminal("      e.g. " + ex)))
			}
		}
	}
}

// regionParts are a region's line: verbs, resources, then (where the
// change depends on them) namespaces, names, namespace labels, and the
// note. Each part is a list of items, fitLine shortens the longest.
func regionParts(g diffRegion) [][]string {
	parts := [][]string{verbItems(g), g.Resources}
	if !g.isAny(diff.AnyNamespace) && len(g.Namespaces) > 0 {
		parts = append(parts, prefixed("in ", namespaceItems(g)))
	}
	switch {
	case g.isAny(diff.AnyName) || len(g.Names) == 0:
	case ownName(g):
		parts = append(parts, []string{"named as the subject itself"})
	default:
		parts = append(parts, prefixed("named ", nameItems(g.Names)))
	}
	if len(g.NamespaceLabels) > 0 {
		worlds := make([]string, len(g.NamespaceLabels))
		for i, w := range g.NamespaceLabels {
			worlds[i] = labelsText(w)
		}
		parts = append(parts, prefixed("namespace labelled ", worlds))
	}
	if g.Note != "" {
		parts = append(parts, []string{"(" + g.Note + ")"})
	}
	return parts
}

// ownName reports whether the region's one name is the placeholder its
// subject has: a node (or user) listing itself.
func ownName(g diffRegion) bool {
	return len(g.Names) == 1 && diff.IsOther(g.Names[0]) && g.Names[0] == g.Subject.Name
}

// prefixed is items with prefix before the first.
func prefixed(prefix string, items []string) []string {
	if len(items) == 0 {
		return nil
	}
	out := slices.Clone(items)
	out[0] = prefix + out[0]
	return out
}

// fitLine joins parts (each a list of items, comma-separated) after
// indent, showing fewer items of the longest lists ("+N more") until the
// line fits lineWidth, or each list shows one item.
func fitLine(indent string, parts [][]string) string {
	shown := make([]int, len(parts))
	for i, p := range parts {
		shown[i] = len(p)
	}
	for {
		line := indent + joinParts(parts, shown)
		longest := -1
		for i, p := range parts {
			if shown[i] > 1 && (longest < 0 || len(strings.Join(p[:shown[i]], ", ")) > len(strings.Join(parts[longest][:shown[longest]], ", "))) {
				longest = i
			}
		}
		if utf8.RuneCountInString(line) <= lineWidth || longest < 0 {
			return line
		}
		shown[longest]--
	}
}

// wrapLine is line (with its newline) wrapped at spaces to lineWidth, its
// continuation lines indented four more than it; a word longer than the
// width (a long policy id) keeps a line of its own.
func wrapLine(line string) string {
	indent := strings.Repeat(" ", len(line)-len(strings.TrimLeft(line, " "))+4)
	var b strings.Builder
	width := 0
	for i, word := range strings.Split(line, " ") {
		n := utf8.RuneCountInString(word)
		switch {
		case i == 0:
		case width+1+n > lineWidth && strings.TrimSpace(b.String()) != "" && width > len(indent):
			b.WriteString("\n" + indent)
			width = len(indent)
		default:
			b.WriteString(" ")
			width++
		}
		b.WriteString(word)
		width += n
	}
	return b.String() + "\n"
}

// joinParts is parts with shown[i] items of part i.
func joinParts(parts [][]string, shown []int) string {
	texts := make([]string, 0, len(parts))
	for i, p := range parts {
		if len(p) == 0 {
			continue
		}
		t := strings.Join(p[:shown[i]], ", ")
		if more := len(p) - shown[i]; more > 0 {
			t += fmt.Sprintf(" +%d more", more)
		}
		texts = append(texts, t)
	}
	return strings.Join(texts, "  ")
}

// writeDiffMarkdown writes the report as a pull-request comment: the
// summary, then a table of each group's regions. Every cell, and every
// name the text holds, is inline code that no character of a name can
// break out of (safetext.MarkdownCode): a pipe cannot split the cell, a
// newline end the row, a backtick, tag or link add structure.
func writeDiffMarkdown(w io.Writer, r *diffReport, all bool) error {
	var b strings.Builder
	b.WriteString("### kcedar diff\n")
	writeMarkdownSummary(&b, r, all)
	for _, kind := range shownGroups(r.groups(), all) {
		hidden := kind.hidden
		for i, g := range kind.shown {
			if !all && b.Len() > maxMarkdownBytes {
				hidden = append(slices.Clone(kind.shown[i:]), hidden...)
				break
			}
			writeGroupMarkdown(&b, g, all)
		}
		if len(hidden) > 0 {
			fmt.Fprintf(&b, "\n%s not shown (%s): kcedar diff -o json lists every region, --all shows them.\n",
				plural(len(hidden), kind.kind+" group"), plural(regionsOf(hidden), "region"))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeMarkdownSummary writes the summary as Markdown: the headline and
// whether it was decided exactly, then lists of the regions by change and
// by policy (the only tables are the groups', all of diffColumns).
func writeMarkdownSummary(b *strings.Builder, r *diffReport, all bool) {
	lines := r.summaryLines(safetext.MarkdownCode, all)
	b.WriteString("\n**" + lines[0] + "**\n")
	if !r.Changed {
		return
	}
	b.WriteString("\n" + lines[1] + "\n\nBy change:\n\n")
	for _, c := range r.byChange() {
		fmt.Fprintf(b, "- %s, %s → %s: %s, %s\n", c.kind, c.from, c.to, plural(c.regions, "region"), plural(c.requests, "request"))
	}
	b.WriteString("\nBy policy (regions where it decides the change):\n\n")
	policies := r.byPolicy()
	for i, p := range policies {
		if !all && i == 10 {
			fmt.Fprintf(b, "- and %s not shown (--all lists them)\n", plural(len(policies)-i, "more policy"))
			break
		}
		fmt.Fprintf(b, "- %s (%s; %s): %s\n", safetext.MarkdownCode(p.id), p.side, p.kinds, plural(p.regions, "region"))
	}
}

// diffColumns are the columns of a markdown group's table.
var diffColumns = []string{"subject", "verbs", "resources", "namespaces", "names", "example"}

// writeGroupMarkdown writes one group as a heading and a table.
func writeGroupMarkdown(b *strings.Builder, g *diffGroup, all bool) {
	policies := func(ids []string) string {
		if len(ids) == 0 {
			return "no policy"
		}
		codes := make([]string, len(ids))
		for i, id := range ids {
			codes[i] = safetext.MarkdownCode(id)
		}
		return strings.Join(codes, ", ")
	}
	fmt.Fprintf(b, "\n#### %s: %s (%s)\n\nold: %s; new: %s\n\n", g.kind, strings.Join(g.changes, ", "), plural(g.regions, "region"), policies(g.old), policies(g.new))
	b.WriteString("| " + strings.Join(diffColumns, " | ") + " |\n|" + strings.Repeat(" --- |", len(diffColumns)) + "\n")
	for i, s := range g.subjects {
		if !all && i == maxSubjectsShown {
			fmt.Fprintf(b, "| %s more |%s\n", plural(len(g.subjects)-i, "subject"), strings.Repeat(" |", len(diffColumns)-1))
			break
		}
		for j, reg := range s.regions {
			if !all && j == maxRowsShown {
				fmt.Fprintf(b, "| %s more |%s\n", plural(len(s.regions)-j, "region"), strings.Repeat(" |", len(diffColumns)-1))
				break
			}
			verbs := shortList(verbItems(reg))
			if len(g.changes) > 1 {
				verbs = changeText(reg) + ": " + verbs
			}
			cells := []string{s.text(60), verbs, shortList(reg.Resources), namespacesCell(reg), namesCell(reg), exampleText(reg.Example)}
			for k, c := range cells {
				cells[k] = safetext.MarkdownCode(c)
			}
			b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
		}
	}
}

// shortList is items, at most 6 of them, comma-separated.
func shortList(items []string) string {
	if len(items) <= 6 {
		return strings.Join(items, ", ")
	}
	return strings.Join(items[:5], ", ") + fmt.Sprintf(" +%d more", len(items)-5)
}

func namespacesCell(g diffRegion) string {
	if g.isAny(diff.AnyNamespace) || len(g.Namespaces) == 0 {
		return "any"
	}
	text := shortList(namespaceItems(g))
	if len(g.NamespaceLabels) > 0 {
		worlds := make([]string, len(g.NamespaceLabels))
		for i, w := range g.NamespaceLabels {
			worlds[i] = labelsText(w)
		}
		text += " labelled " + shortList(worlds)
	}
	return text
}

func namesCell(g diffRegion) string {
	if g.isAny(diff.AnyName) || len(g.Names) == 0 {
		return "any"
	}
	if ownName(g) {
		return "the subject's own"
	}
	return shortList(nameItems(g.Names))
}
