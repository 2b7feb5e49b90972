package accessmatrix

import (
	_ "embed"
	"encoding/json"
	"html/template"
	"io"
	"strings"
	"time"
)

//go:embed page.html.tmpl
var pageTemplate string

var page = template.Must(template.New("page").Funcs(template.FuncMap{
	"upper": strings.ToUpper,
}).Parse(pageTemplate))

// pageRow is one table row of the page: a subject and a resource.
type pageRow struct {
	Subject, Kind, Resource string
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
func WriteHTML(w io.Writer, m *Matrix, generated time.Time) error {
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	scope := "the cluster (every namespace)"
	if m.Namespace != "" {
		scope = "namespace " + m.Namespace
	}
	return page.Execute(w, map[string]any{
		"Scope": scope, "Verbs": m.Verbs, "Rows": pageRows(m), "Legend": Legend,
		"Errors": m.Errors, "Generated": generated.UTC().Format(time.RFC3339),
		"Data": template.JS(data), // html/template escapes it for a <script> element
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
			pr := pageRow{Subject: row.Label, Kind: KindLabel(row), Resource: res, First: first,
				SubjectKind: string(row.Subject.Kind), PrincipalType: row.Subject.PrincipalType}
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
	pc := pageCell{Verb: verb, Applies: m.applies(res, verb), State: "n/a"}
	if !pc.Applies {
		return pc
	}
	c := row.Cell(res, verb)
	pc.Mark, pc.State = Mark(c), string(StateNone)
	if c == nil {
		return pc
	}
	pc.State = string(c.State)
	pc.Policies = strings.Join(c.Policies(), ",")
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
		lines = append(lines, line+" ("+strings.Join(e.Policies, ", ")+")")
	}
	pc.Detail = strings.Join(lines, "\n")
	return pc
}
