package accessmatrix

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/kcedar/kcedar/internal/lib/safetext"
)

// Legend explains the marks of Write's table.
const Legend = "✔ allowed  ~ allowed under a condition  ✖ denied by a forbid  ! a forbid applies under a condition  · no policy  (blank: the verb does not apply)"

// Mark is a cell's mark in the terminal table (and the page): its state,
// then "!" when a forbid with a condition also applies to the subject.
func Mark(c *Cell) string {
	if c == nil {
		return "·"
	}
	mark := map[State]string{StateAllowed: "✔", StateConditional: "~", StateDenied: "✖", StateForbidOnly: ""}[c.State]
	if c.State != StateDenied && c.Has(DeniedWhen) {
		mark += "!"
	}
	return mark
}

// Write prints the matrix as a table: a row per subject and resource the
// policies mention, a column per verb. Every cell is escaped for the
// terminal (tableRow): subjects, resources and verbs come from the
// policies and the command line.
func Write(w io.Writer, m *Matrix) error {
	safetext.Fprintf(w, "Who can do what in %s\n", scope(m))
	if m.Chain != "" {
		safetext.Fprintf(w, "chain: %s\n", m.Chain)
	}
	safetext.Fprintf(w, "%s\n\n", Legend)
	if len(m.Rows) == 0 {
		_, err := fmt.Fprintln(w, "no policy allows or denies anyone any of these requests")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header := []string{"SUBJECT", "KIND", "RESOURCE"}
	if m.Namespace == "" {
		header = []string{"SUBJECT", "KIND", "NAMESPACES", "RESOURCE"}
	}
	for _, verb := range m.Verbs {
		header = append(header, strings.ToUpper(verb))
	}
	tableRow(tw, header)
	for _, row := range m.Rows {
		for _, res := range m.Resources {
			if !rowMentions(row, res) {
				continue
			}
			cells := []string{row.Label, KindLabel(row), res}
			if m.Namespace == "" {
				cells = []string{row.Label, KindLabel(row), NamespacesLabel(row), res}
			}
			for _, verb := range m.Verbs {
				mark := ""
				if m.applies(res, verb) {
					mark = Mark(row.Cell(res, verb))
				}
				cells = append(cells, mark)
			}
			tableRow(tw, cells)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, e := range m.Errors {
		safetext.Fprintf(w, "error: %s\n", e)
	}
	return nil
}

// tableRow writes cells as one tabwriter row, each escaped for the
// terminal: a tab or newline in a name cannot add a column or a row.
func tableRow(w io.Writer, cells []string) {
	safetext.Fprintf(w, strings.Repeat("%s\t", len(cells)-1)+"%s\n", toAny(cells)...)
}

// toAny is cells as formatting arguments.
func toAny(cells []string) []any {
	out := make([]any, len(cells))
	for i, c := range cells {
		out[i] = c
	}
	return out
}

// scope names where the matrix holds: a namespace, or the cluster.
func scope(m *Matrix) string {
	if m.Namespace != "" {
		return "namespace " + m.Namespace
	}
	return "the cluster (every namespace)"
}

// KindLabel is the subject's kind as who-can prints it: Group, or Group
// (User) for a group limited to one principal type.
func KindLabel(r *Row) string {
	kind := string(r.Subject.Kind)
	if r.Subject.PrincipalType != "" {
		kind += " (" + strings.TrimPrefix(r.Subject.PrincipalType, "k8s::") + ")"
	}
	if r.Subject.Namespace != "" && r.Subject.Kind != "ServiceAccount" {
		kind += " in " + r.Subject.Namespace
	}
	return kind
}

// NamespacesLabel is a row's scope in the cluster's matrix: its namespaces,
// or * for every namespace.
func NamespacesLabel(r *Row) string {
	if r.Namespaces == "" {
		return "*"
	}
	return r.Namespaces
}

// rowMentions reports whether the row has a cell for the resource.
func rowMentions(row *Row, resource string) bool {
	for _, c := range row.Cells {
		if c.Resource == resource {
			return true
		}
	}
	return false
}

// applies reports whether the schema gives verb to the resource.
func (m *Matrix) applies(resource, verb string) bool {
	for _, v := range m.Applies[resource] {
		if v == verb {
			return true
		}
	}
	return false
}
