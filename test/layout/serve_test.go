package layout

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// serveDir holds kcedar serve: its non-test files named serve*.go.
const serveDir = "cmd/kcedar"

// servePlumbing are the internal packages kcedar serve may import beside the
// public ones, and why: what runs beside the decisions (cluster watches,
// schema loading, logging, tracing), never the decisions themselves.
var servePlumbing = map[string]string{
	"internal/cluster/namespaces":    "the namespace informer, handed to cedar.Options.Namespaces",
	"internal/cluster/schemarefresh": "follows a live cluster's API and moves the source to it with cedar.FileSource.SetSchema",
	"internal/cluster/webhooks":      "checks that the admission webhook is configured to see the writes it enforces",
	"internal/schemagen":             "loads the schema with its fingerprint for schema refresh, and hands it over with ToPublic",
	"internal/lib/safetext":          "quotes outside text in log lines",
	"internal/lib/tracing":           "the OpenTelemetry provider from OTEL_* variables",
	"internal/lib/version":           "the build's version, for tracing",
}

// decisionCore are the internal packages that make decisions: kcedar serve
// reaches them only through package cedar and package server.
var decisionCore = []string{
	"internal/conditions", "internal/engine", "internal/store", "internal/upstream", "internal/cedarlang",
	"internal/entities", "internal/wire", "internal/accessreview",
}

// TestServeImportsThePublicAPI checks that kcedar serve is built from the
// public packages: of this module's packages, its non-test serve*.go files
// import only the public ones and the plumbing of servePlumbing. So an
// embedder can build the same server (test/embed's TestServeFromThePublicAPI
// does).
func TestServeImportsThePublicAPI(t *testing.T) {
	imported := map[string]bool{}
	for _, imp := range packageImports(t, serveDir) {
		if !strings.HasPrefix(path.Base(imp.file), "serve") {
			continue
		}
		pkg, ours := strings.CutPrefix(imp.path, modulePath+"/")
		if !ours {
			continue
		}
		imported[pkg] = true
		if msg := checkServeImport(imp.file, pkg); msg != "" {
			t.Error(msg)
		}
	}
	// Not vacuous: serve's files are where this test looks for them.
	for _, pkg := range []string{"cedar", "server"} {
		if !imported[pkg] {
			t.Errorf("no serve*.go file of %s imports %s: has kcedar serve moved? update serveDir", serveDir, pkg)
		}
	}
	for pkg := range servePlumbing {
		if _, err := os.Stat(filepath.Join(repoRoot, filepath.FromSlash(pkg))); err != nil {
			t.Errorf("servePlumbing lists %s, which is not a package directory: %v", pkg, err)
		}
	}
}

// checkServeImport returns why file, one of kcedar serve's, may not import
// pkg (an import path relative to modulePath), or "" if it may.
func checkServeImport(file, pkg string) string {
	_, plumbing := servePlumbing[pkg]
	switch {
	case slices.Contains(faces, pkg), plumbing:
		return ""
	case slices.Contains(decisionCore, pkg):
		return fmt.Sprintf("%s imports %s: kcedar serve builds its decisions from the public packages (%s) alone, and %s is the decision core, which it reaches through package cedar or server; use (or add) their public API", file, pkg, strings.Join(faces, ", "), pkg)
	default:
		return fmt.Sprintf("%s imports %s: kcedar serve imports only the public packages (%s) and the plumbing listed in test/layout's servePlumbing, which does not list %s; use the public API, or, if %s runs beside the decisions rather than making them, add it to servePlumbing with why", file, pkg, strings.Join(faces, ", "), pkg, pkg)
	}
}

// TestCheckServeImport pins checkServeImport, so that a broken check
// cannot pass serve by accepting everything.
func TestCheckServeImport(t *testing.T) {
	const file = "cmd/kcedar/serve.go"
	for _, pkg := range append(slices.Clone(faces), "internal/cluster/webhooks", "internal/schemagen", "internal/lib/tracing") {
		if msg := checkServeImport(file, pkg); msg != "" {
			t.Errorf("serve may import %s, refused: %s", pkg, msg)
		}
	}
	refused := append(slices.Clone(decisionCore), "internal/cluster/policyobjects", "internal/lib/watch", "internal/tools/diff", "internal/testing/schematest", "cmd/kcedar")
	for _, pkg := range refused {
		msg := checkServeImport(file, pkg)
		if msg == "" {
			t.Errorf("serve may not import %s, accepted", pkg)
			continue
		}
		if !strings.HasPrefix(msg, file+" imports "+pkg+": ") {
			t.Errorf("refusal of %s does not say which file imports what: %s", pkg, msg)
		}
	}
}
