package policyobjects

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestRefusalSeriesStartAtZero checks that kcedar_policy_write_refusals_total
// has a series at 0 for every operation and reason as soon as it is
// registered, so the first refusal is an increase (a series that first
// appears at 1 has no increase() until its second count:
// KcedarPolicyWritesRefused would miss the first refusal).
func TestRefusalSeriesStartAtZero(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	if err := (&AdmissionHandler{}).RegisterMetrics(reg); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			got[labels["operation"]+" "+labels["reason"]] = m.GetCounter().GetValue()
		}
	}
	for _, op := range []string{"CREATE", "UPDATE", "DELETE"} {
		for _, reason := range refusalReasons {
			v, ok := got[op+" "+reason]
			if !ok || v != 0 {
				t.Errorf("operation %s reason %s: series %v at %v, want one at 0", op, reason, ok, v)
			}
		}
	}
	if len(got) != 3*len(refusalReasons) {
		t.Errorf("%d series, want %d: %v", len(got), 3*len(refusalReasons), got)
	}
}

// TestRefusalReasonsAreInitialized reads the package's source for every
// reason a write can be refused for: the Reason of each WriteRefusal
// literal, and the second result of each return of a function returning
// (*AdmissionResponse, string). Each must be in refusalReasons, or its
// first refusal would create a series at 1 that no alert sees.
func TestRefusalReasonsAreInitialized(t *testing.T) {
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	found := map[string]bool{}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, e.Name(), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			collectRefusalReasons(d, found)
		}
	}
	for _, want := range []string{"invalid", "duplicate-id", "escalation"} { // the scan finds what it is for
		if !found[want] {
			t.Fatalf("the scan found reasons %v, without %q: it is broken", found, want)
		}
	}
	for reason := range found {
		if !slices.Contains(refusalReasons, reason) {
			t.Errorf("reason %q is not in refusalReasons: its series would first appear at 1", reason)
		}
	}
}

func collectRefusalReasons(d ast.Decl, found map[string]bool) {
	fn, ok := d.(*ast.FuncDecl)
	returnsReason := ok && fn.Type.Results != nil && len(fn.Type.Results.List) == 2 &&
		resultTypes(fn.Type.Results.List) == "*admissionv1.AdmissionResponse string"
	ast.Inspect(d, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CompositeLit:
			if id, ok := n.Type.(*ast.Ident); ok && id.Name == "WriteRefusal" {
				for _, el := range n.Elts {
					if kv, ok := el.(*ast.KeyValueExpr); ok && kv.Key.(*ast.Ident).Name == "Reason" {
						addLiteral(kv.Value, found)
					}
				}
			}
		case *ast.ReturnStmt:
			if returnsReason && len(n.Results) == 2 {
				addLiteral(n.Results[1], found)
			}
		}
		return true
	})
}

func resultTypes(fields []*ast.Field) string {
	var out []string
	for _, f := range fields {
		switch t := f.Type.(type) {
		case *ast.StarExpr:
			if sel, ok := t.X.(*ast.SelectorExpr); ok {
				out = append(out, "*"+sel.X.(*ast.Ident).Name+"."+sel.Sel.Name)
			}
		case *ast.Ident:
			out = append(out, t.Name)
		}
	}
	return strings.Join(out, " ")
}

func addLiteral(e ast.Expr, found map[string]bool) {
	if lit, ok := e.(*ast.BasicLit); ok && lit.Kind == token.STRING {
		if s, _ := strconv.Unquote(lit.Value); s != "" {
			found[s] = true
		}
	}
}
