package accessmatrix

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
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
// policies mention, a column per verb.
func Write(w io.Writer, m *Matrix) error {
	scope := "the cluster (every namespace)"
	if m.Namespace != "" {
		scope = "namespace " + m.Namespace
	}
	fmt.Fprintf(w, "Who can do what in %s\n%s\n\n", scope, Legend)
	if len(m.Rows) == 0 {
		_, err := fmt.Fprintln(w, "no policy allows or denies anyone any of these requests")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "SUBJECT\tKIND\tRESOURCE\t%s\n", strings.ToUpper(strings.Join(m.Verbs, "\t")))
	for _, row := range m.Rows {
		for _, res := range m.Resources {
			if !rowMentions(row, res) {
				continue
			}
			marks := make([]string, len(m.Verbs))
			for i, verb := range m.Verbs {
				if m.applies(res, verb) {
					marks[i] = Mark(row.Cell(res, verb))
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", row.Label, KindLabel(row), res, strings.Join(marks, "\t"))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, e := range m.Errors {
		fmt.Fprintln(w, "error:", e)
	}
	return nil
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
