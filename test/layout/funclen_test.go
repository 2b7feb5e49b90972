package layout

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

// maxFuncLines bounds every production function: one a reader can hold.
const maxFuncLines = 80

// TestProductionFunctionsAreShort: no function of a production package (a
// package of any layer but test) is longer than maxFuncLines, counting from
// its "func" line to its closing brace. Generated files are exempt.
func TestProductionFunctionsAreShort(t *testing.T) {
	table, _ := readTable(t)
	var long []string
	for _, dir := range goDirs(t) {
		if layer, ok := table[dir]; !ok || layer == testLayer {
			continue
		}
		long = append(long, longFunctions(t, dir)...)
	}
	for _, l := range long {
		t.Errorf("%s: split it (at most %d lines)", l, maxFuncLines)
	}
}

// longFunctions lists the functions over maxFuncLines in the non-test,
// non-generated .go files of dir (relative to repoRoot).
func longFunctions(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(repoRoot, filepath.FromSlash(dir)))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var long []string
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		file := path.Join(dir, name)
		f, err := parser.ParseFile(fset, filepath.Join(repoRoot, filepath.FromSlash(file)), nil, parser.ParseComments)
		if err != nil {
			t.Errorf("%s: %v", file, err)
			continue
		}
		if ast.IsGenerated(f) {
			continue
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			if n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1; n > maxFuncLines {
				long = append(long, fmt.Sprintf("%s:%d: %s is %d lines", file, fset.Position(fd.Pos()).Line, funcName(fd), n))
			}
		}
	}
	return long
}

// funcName is "Recv.Name" for a method, "Name" for a function.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	if ix, ok := t.(*ast.IndexExpr); ok {
		t = ix.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}
