// Package layout checks that the tree is the architecture: the package table
// of docs/architecture.md lists every Go package directory of the repository
// and nothing else; every package imports only kcedar packages of its own
// layer or a lower one; the public packages (the faces: server, cedar,
// residual, schemagen) import only faces below them, and nothing under
// internal/ imports a face; only the CLI imports the tools layer; production
// code never imports test code; and the only Go packages outside internal/,
// cmd/, test/ and hack/ are the faces.
package layout

import (
	"bufio"
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// modulePath is the import path of the kcedar module; imports under it are
// the ones the layers govern.
const modulePath = "github.com/kcedar/kcedar"

// repoRoot is the repository root, relative to this package's directory
// (where go test runs the test).
const repoRoot = "../.."

// archDoc is the document holding the package table, relative to repoRoot.
const archDoc = "docs/architecture.md"

// tableHeader is the header line of the package table in archDoc.
const tableHeader = "| package | layer | job |"

// testLayer is the layer of code that exists for tests and the build only.
const testLayer = "test"

// layerRank orders the layers top to bottom: a package may import packages
// whose rank is at least its own. The test layer is outside the order: it may
// import anything, and only it may import itself.
var layerRank = map[string]int{
	"cli":        0,
	faceLayer:    1,
	toolsLayer:   2,
	"serving":    3,
	"conditions": 4,
	"engine":     5,
	"sources":    6,
	"language":   7,
	"model":      8,
	"schema":     9,
	"lib":        10,
	testLayer:    11,
}

// faceLayer is the layer of the public packages; toolsLayer that of the
// CLI's offline tools, which only the CLI imports.
const (
	faceLayer  = "face"
	toolsLayer = "tools"
)

// faces are the public packages, top to bottom: a face imports only the
// faces after it.
var faces = []string{"server", "cedar", "residual", "schemagen"}

// topDirs are the only top-level directories that may hold Go packages
// besides the faces.
var topDirs = []string{"internal", "cmd", "test", "hack"}

// TestTableMatchesTree checks that every directory holding .go files is a
// row of the package table and that every row is such a directory.
func TestTableMatchesTree(t *testing.T) {
	table, problems := readTable(t)
	for _, p := range problems {
		t.Error(p)
	}
	dirs := goDirs(t)
	for _, dir := range dirs {
		if _, ok := table[dir]; !ok {
			t.Errorf("%s holds Go files but is not in %s's package table: add a row `%s` | layer | job", dir, archDoc, dir)
		}
	}
	onDisk := make(map[string]bool, len(dirs))
	for _, dir := range dirs {
		onDisk[dir] = true
	}
	for _, pkg := range slices.Sorted(maps.Keys(table)) {
		if !onDisk[pkg] {
			t.Errorf("%s's package table lists %s, but no directory with Go files has that path", archDoc, pkg)
		}
	}
}

// TestPublicPackagesAreTheFaces checks that the only Go packages outside
// internal/, cmd/, test/ and hack/ are the faces, each in the face layer,
// and that every face is in the table as one.
func TestPublicPackagesAreTheFaces(t *testing.T) {
	table, _ := readTable(t)
	for _, dir := range goDirs(t) {
		top, _, _ := strings.Cut(dir, "/")
		switch {
		case slices.Contains(faces, dir):
		case !slices.Contains(topDirs, top):
			t.Errorf("%s is a Go package outside %s and not a public package (%s): move it under internal/", dir, strings.Join(topDirs, "/, ")+"/", strings.Join(faces, ", "))
		case table[dir] == faceLayer:
			t.Errorf("%s is in layer %s but is not a public package", dir, faceLayer)
		}
	}
	for _, f := range faces {
		if table[f] != faceLayer {
			t.Errorf("public package %s: layer %q in %s, want %s", f, table[f], archDoc, faceLayer)
		}
	}
}

// TestImportsFollowLayers checks every import of every non-test .go file
// (whatever its build tags) against the layers of the package table.
func TestImportsFollowLayers(t *testing.T) {
	table, _ := readTable(t) // TestTableMatchesTree reports malformed rows
	for _, dir := range goDirs(t) {
		layer, ok := table[dir]
		if !ok {
			continue // TestTableMatchesTree reports it
		}
		for _, imp := range packageImports(t, dir) {
			if msg := checkImport(table, dir, layer, imp.path); msg != "" {
				t.Errorf("%s (%s)", msg, imp.file)
			}
		}
	}
}

// TestCheckImport pins the rule itself on a small table, so that a broken
// check cannot pass the real tree by accepting everything.
func TestCheckImport(t *testing.T) {
	table := map[string]string{
		"cmd/kcedar":                "cli",
		"server":                    faceLayer,
		"cedar":                     faceLayer,
		"schemagen":                 faceLayer,
		"internal/tools/diff":       toolsLayer,
		"internal/tools/replay":     toolsLayer,
		"internal/cluster/webhooks": "serving",
		"internal/conditions":       "conditions",
		"internal/engine":           "engine",
		"internal/store":            "sources",
		"internal/lib/watch":        "lib",
		"internal/testing/testgen":  testLayer,
		"test/load":                 testLayer,
	}
	tests := []struct {
		dir, imp, want string
	}{
		{"cmd/kcedar", modulePath + "/server", ""},
		{"cmd/kcedar", modulePath + "/internal/tools/diff", ""},
		{"server", modulePath + "/cedar", ""},
		{"server", modulePath + "/internal/store", ""},
		{"cedar", modulePath + "/server", "cedar imports server: a public package imports only those below it (server > cedar > residual > schemagen)"},
		{"schemagen", modulePath + "/schemagen", "schemagen imports schemagen: a public package imports only those below it (server > cedar > residual > schemagen)"},
		{"internal/engine", modulePath + "/cedar", "internal/engine imports cedar: layer face above engine"},
		{"server", modulePath + "/internal/tools/diff", "server imports internal/tools/diff: only the CLI imports the tools layer"},
		{"internal/tools/replay", modulePath + "/internal/tools/diff", "internal/tools/replay imports internal/tools/diff: only the CLI imports the tools layer"},
		{"internal/store", modulePath + "/internal/lib/watch", ""},
		{"internal/store", "k8s.io/client-go/rest", ""},
		{"test/load", modulePath + "/cmd/kcedar", ""},
		{"test/load", modulePath + "/internal/testing/testgen", ""},
		{"internal/engine", modulePath + "/internal/cluster/webhooks", "internal/engine imports internal/cluster/webhooks: layer serving above engine"},
		{"internal/lib/watch", modulePath + "/internal/store", "internal/lib/watch imports internal/store: layer sources above lib"},
		{"internal/engine", modulePath + "/internal/testing/testgen", "internal/engine imports internal/testing/testgen: a test-layer package in engine-layer code"},
		{"internal/conditions", modulePath + "/internal/engine", ""},
		{"internal/engine", modulePath + "/internal/conditions", "internal/engine imports internal/conditions: layer conditions above engine"},
		{"internal/engine", modulePath + "/internal/nowhere", "internal/engine imports internal/nowhere: not in " + archDoc + "'s package table"},
	}
	for _, tc := range tests {
		if got := checkImport(table, tc.dir, table[tc.dir], tc.imp); got != tc.want {
			t.Errorf("checkImport(%s, %s) = %q, want %q", tc.dir, tc.imp, got, tc.want)
		}
	}
}

// checkImport returns why the package dir, in layer, may not import the
// import path imp, or "" if it may.
func checkImport(table map[string]string, dir, layer, imp string) string {
	pkg, ok := strings.CutPrefix(imp, modulePath+"/")
	if !ok {
		return "" // the standard library or a third-party module
	}
	if layer == testLayer {
		return "" // test code may import anything
	}
	impLayer, ok := table[pkg]
	switch {
	case !ok:
		return fmt.Sprintf("%s imports %s: not in %s's package table", dir, pkg, archDoc)
	case impLayer == testLayer:
		return fmt.Sprintf("%s imports %s: a test-layer package in %s-layer code", dir, pkg, layer)
	case layerRank[impLayer] < layerRank[layer]:
		return fmt.Sprintf("%s imports %s: layer %s above %s", dir, pkg, impLayer, layer)
	case impLayer == toolsLayer && layer != "cli":
		return fmt.Sprintf("%s imports %s: only the CLI imports the tools layer", dir, pkg)
	case impLayer == faceLayer && layer == faceLayer && slices.Index(faces, pkg) <= slices.Index(faces, dir):
		return fmt.Sprintf("%s imports %s: a public package imports only those below it (%s)", dir, pkg, strings.Join(faces, " > "))
	}
	return ""
}

// readTable parses the package table of archDoc into package -> layer. It
// fails the test if there is no table, and returns as problems the rows that
// are malformed, name an unknown layer, have no job or repeat a package.
func readTable(t *testing.T) (table map[string]string, problems []string) {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot, archDoc))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	table = make(map[string]string)
	sc := bufio.NewScanner(f)
	lineNo, inTable := 0, false
	for sc.Scan() {
		lineNo++
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == tableHeader:
			inTable = true
		case !inTable || strings.HasPrefix(line, "|---"):
		case !strings.HasPrefix(line, "|"):
			inTable = false
		default:
			if err := addRow(table, line); err != nil {
				problems = append(problems, fmt.Sprintf("%s:%d: %v", archDoc, lineNo, err))
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(table) == 0 {
		t.Fatalf("%s has no package table (a table headed %q)", archDoc, tableHeader)
	}
	return table, problems
}

// addRow adds one table row, "| `pkg` | layer | job |", to table.
func addRow(table map[string]string, line string) error {
	cells := strings.Split(strings.Trim(line, "|"), "|")
	if len(cells) != 3 {
		return fmt.Errorf("row %q: want 3 cells (package | layer | job), have %d", line, len(cells))
	}
	pkg := strings.Trim(strings.TrimSpace(cells[0]), "`")
	layer := strings.TrimSpace(cells[1])
	job := strings.TrimSpace(cells[2])
	if _, ok := layerRank[layer]; !ok {
		return fmt.Errorf("package %s: unknown layer %q", pkg, layer)
	}
	if job == "" {
		return fmt.Errorf("package %s: no job", pkg)
	}
	if _, dup := table[pkg]; dup {
		return fmt.Errorf("package %s listed twice", pkg)
	}
	table[pkg] = layer
	return nil
}

// goDirs returns, slash-separated and relative to repoRoot, every directory
// holding .go files, skipping .git, testdata, bin, node_modules and hidden
// directories.
func goDirs(t *testing.T) []string {
	t.Helper()
	seen := make(map[string]bool)
	err := filepath.WalkDir(repoRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != repoRoot && skipDir(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(d.Name(), ".go") {
			rel, err := filepath.Rel(repoRoot, filepath.Dir(p))
			if err != nil {
				return err
			}
			seen[filepath.ToSlash(rel)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return slices.Sorted(maps.Keys(seen))
}

// skipDir reports whether the walk skips a directory named name.
func skipDir(name string) bool {
	switch name {
	case "testdata", "bin", "node_modules":
		return true
	}
	return strings.HasPrefix(name, ".")
}

// anImport is one import of a kcedar package's non-test file.
type anImport struct {
	path string // the import path
	file string // the importing file, relative to repoRoot
}

// packageImports returns the imports of every non-test .go file of dir
// (relative to repoRoot), whatever the files' build tags.
func packageImports(t *testing.T, dir string) []anImport {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(repoRoot, filepath.FromSlash(dir)))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var imports []anImport
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		file := path.Join(dir, name)
		f, err := parser.ParseFile(fset, filepath.Join(repoRoot, filepath.FromSlash(file)), nil, parser.ImportsOnly)
		if err != nil {
			t.Errorf("%s: %v", file, err)
			continue
		}
		for _, spec := range f.Imports {
			p, err := strconv.Unquote(spec.Path.Value)
			if err != nil {
				t.Errorf("%s: import %s: %v", file, spec.Path.Value, err)
				continue
			}
			imports = append(imports, anImport{path: p, file: file})
		}
	}
	return imports
}

// cedarGoAlias is the one name kcedar gives cedar-go's root package, whose
// names (Authorizer, Policy, PolicySet, Decision...) would otherwise read as
// kcedar's own, package cedar's above all.
const cedarGoAlias = "cedarlib"

// TestCedarGoHasOneName checks that every Go file, tests included, imports
// cedar-go's root package as cedarGoAlias.
func TestCedarGoHasOneName(t *testing.T) {
	fset := token.NewFileSet()
	for _, dir := range goDirs(t) {
		entries, err := os.ReadDir(filepath.Join(repoRoot, filepath.FromSlash(dir)))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") {
				continue
			}
			file := path.Join(dir, e.Name())
			f, err := parser.ParseFile(fset, filepath.Join(repoRoot, filepath.FromSlash(file)), nil, parser.ImportsOnly)
			if err != nil {
				t.Errorf("%s: %v", file, err)
				continue
			}
			for _, spec := range f.Imports {
				if spec.Path.Value == `"github.com/cedar-policy/cedar-go"` && (spec.Name == nil || spec.Name.Name != cedarGoAlias) {
					t.Errorf("%s: import cedar-go as %s", file, cedarGoAlias)
				}
			}
		}
	}
}
