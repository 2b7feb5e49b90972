package accessmatrix

import (
	_ "embed"
	"html/template"
	"io"
	"strings"
	"time"

	"github.com/kcedar/kcedar/internal/lib/safetext"
)

//go:embed page.html.tmpl
var pageTemplate string

var page = template.Must(template.New("page").Funcs(template.FuncMap{
	"upper": strings.ToUpper,
}).Parse(pageTemplate))

// pageRow is one table row of the page: a subject and a resource.
type pageRow struct {
	Subject, Kind, Resource string
	// Namespaces is the row's scope (the cluster's matrix only).
	Namespaces string
	// SubjectKind and PrincipalType are the subject selector's, as
	// who-can's JSON gives them.
	SubjectKind, PrincipalType string
	First                      bool // the subject's first row
	Cells                      []pageCell
}

// pageCell is one verb's cell of a page row.
type pageCell struct {
	Verb, Mark, State, Policies, Detail string
	Applies                             bool
}

// WriteHTML writes the matrix as a self-contained HTML page: the table is
// in the page (it shows without JavaScript); the page's script adds the
// filters (subject, resource, verbs, state; kept in the address's #
// fragment), and a panel with the entries and policy ids of a clicked cell.
// Nothing is fetched at view time.
//
// html/template escapes every value for where it lands: text, attribute
// values, and the matrix itself, which it encodes as JSON for the
// <script type="application/json"> element (no value is marked trusted).
// The text shown (subjects, kinds, resources, verbs, details, errors) is
// also escaped as for a terminal (safetext.Terminal), so a control,
// bidirectional override or invisible character in a name shows as an
// escape instead of reordering or hiding what the page says.
func WriteHTML(w io.Writer, m *Matrix, generated time.Time) error {
	verbs := make([]string, len(m.Verbs))
	for i, v := range m.Verbs {
		verbs[i] = safetext.Terminal(v)
	}
	errs := make([]string, len(m.Errors))
	for i, e := range m.Errors {
		errs[i] = safetext.Terminal(e)
	}
	return page.Execute(w, map[string]any{
		"Scope": safetext.Terminal(scope(m)), "Chain": safetext.Terminal(m.Chain), "Cluster": m.Namespace == "", "Verbs": verbs, "Rows": pageRows(m), "Legend": Legend,
		"Errors": errs, "Generated": generated.UTC().Format(time.RFC3339),
		"Data": m,
	})
}

// pageRows flattens the matrix into the page's rows.
func pageRows(m *Matrix) []pageRow {
	var rows []pageRow
	for _, row := range m.Rows {
		first := true
		for _, res := range m.Resources {
			if !rowMentions(row, res) {
				continue
			}
			pr := pageRow{Subject: safetext.Terminal(row.Label), Kind: safetext.Terminal(KindLabel(row)), Resource: safetext.Terminal(res), First: first,
				Namespaces:  safetext.Terminal(NamespacesLabel(row)),
				SubjectKind: safetext.Terminal(string(row.Subject.Kind)), PrincipalType: safetext.Terminal(row.Subject.PrincipalType)}
			first = false
			for _, verb := range m.Verbs {
				pr.Cells = append(pr.Cells, makePageCell(m, row, res, verb))
			}
			rows = append(rows, pr)
		}
	}
	return rows
}

// makePageCell is one cell with its data attributes and tooltip.
func makePageCell(m *Matrix, row *Row, res, verb string) pageCell {
	pc := pageCell{Verb: safetext.Terminal(verb), Applies: m.applies(res, verb), State: "n/a"}
	if !pc.Applies {
		return pc
	}
	c := row.Cell(res, verb)
	pc.Mark, pc.State = Mark(c), string(StateNone)
	if c == nil {
		return pc
	}
	pc.State = string(c.State)
	pc.Policies = safetext.Terminal(strings.Join(c.Policies(), ","))
	var lines []string
	for _, e := range c.Entries {
		line := string(e.Kind)
		if e.Via != "" {
			line += " via " + e.Via
		}
		if e.Case != "" {
			line += " [" + e.Case + "]"
		}
		if e.Condition != "" {
			line += " when " + strings.Join(strings.Fields(e.Condition), " ")
		}
		lines = append(lines, safetext.Terminal(line+" ("+strings.Join(e.Policies, ", ")+")"))
	}
	pc.Detail = strings.Join(lines, "\n") // a line per entry, each escaped
	return pc
}
