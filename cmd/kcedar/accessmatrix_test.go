package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/kcedar/kcedar/internal/accessreview"
	"github.com/kcedar/kcedar/internal/engine"
)

// matrixPolicies mix unconditional, conditional and forbidden access,
// single principals and selectors.
const matrixPolicies = `
@id("dev-read") permit(principal in k8s::Group::"dev", action in [k8s::Action::"get", k8s::Action::"list", k8s::Action::"watch"], resource is core::pods);
@id("alice-edit") permit(principal == k8s::User::"alice", action, resource is core::pods) when { resource.namespace == "dev" };
@id("alice-own") permit(principal == k8s::User::"alice", action in [k8s::Action::"get", k8s::Action::"update"], resource is apps::deployments) when { resource has name && resource.name like "alice-*" };
@id("ci") permit(principal == k8s::ServiceAccount::"system:serviceaccount:dev:ci", action, resource is apps::deployments);
@id("sa-read") permit(principal is k8s::ServiceAccount, action == k8s::Action::"get", resource is core::configmaps) when { principal.namespace == "dev" };
@id("no-secrets") forbid(principal, action, resource is core::secrets) unless { principal in k8s::Group::"admins" };
@id("admins") permit(principal in k8s::Group::"admins", action, resource is core::secrets);
@id("no-bob") forbid(principal == k8s::User::"bob", action == k8s::Action::"delete", resource is core::pods);
@id("bob") permit(principal == k8s::User::"bob", action, resource is core::pods);
@id("contractors") forbid(principal is k8s::User, action == k8s::Action::"create", resource is apps::deployments) when { principal.username like "ext-*" };
`

// TestAccessMatrixCommand prints the table and checks the JSON's shape.
func TestAccessMatrixCommand(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "p.cedar", matrixPolicies)
	out, code := run(t, newAccessMatrixCmd(), "-n", "dev", "--policies", dir)
	if code != 0 || !strings.Contains(out, "SUBJECT") || !strings.Contains(out, "alice") || !strings.Contains(out, "✖") {
		t.Fatalf("table (exit %d):\n%s", code, out)
	}
	out, code = run(t, newAccessMatrixCmd(), "-n", "dev", "--policies", dir, "-o", "yaml")
	if code != 2 {
		t.Errorf("-o yaml: exit %d, want 2:\n%s", code, out)
	}
	out, code = run(t, newAccessMatrixCmd(), "--policies", dir, "--resources", "nosuchthing")
	if code != 2 || !strings.Contains(out, "nosuchthing") {
		t.Errorf("--resources nosuchthing: exit %d:\n%s", code, out)
	}
}

// TestAccessMatrixPageInChromium renders the page in headless Chromium and
// checks every cell it shows against kcedar who-can, then a filter from
// the address, and keeps a screenshot. Without Chromium it is skipped
// (.ci/run installs Debian's chromium package).
func TestAccessMatrixPageInChromium(t *testing.T) {
	browser := findChromium()
	if browser == "" && os.Getenv("KCEDAR_REQUIRE_CHROMIUM") != "" {
		t.Fatal("KCEDAR_REQUIRE_CHROMIUM is set but chromium is not found")
	}
	if browser == "" {
		t.Skip("chromium not found (set KCEDAR_CHROMIUM, or apt-get install chromium): the access-matrix page is not rendered")
	}
	dir := t.TempDir()
	writeFile(t, dir, "p.cedar", matrixPolicies)
	page, code := run(t, newAccessMatrixCmd(), "-n", "dev", "--policies", dir, "-o", "html")
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, page)
	}
	if strings.Contains(page, "http://") || strings.Contains(page, "https://") || strings.Contains(page, " src=") {
		t.Error("the page refers to something outside itself")
	}
	file := writeFile(t, dir, "matrix.html", page)
	rows := renderedRows(t, browser, "file://"+file)
	checked := 0
	for _, res := range []string{"pods", "deployments.apps", "configmaps", "secrets"} {
		for _, verb := range []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"} {
			checked += checkCellsAgainstWhoCan(t, rows, dir, res, verb)
		}
	}
	if checked < 40 {
		t.Errorf("only %d cells checked", checked)
	}
	filtered := renderedRows(t, browser, "file://"+file+"#subject=alice&verbs=get,update")
	for _, r := range filtered {
		if visible := !r.hidden; visible != strings.Contains(r.subject, "alice") {
			t.Errorf("filter subject=alice: row %s %s visible=%v", r.subject, r.resource, visible)
		}
		for verb, c := range r.cells {
			if c.hidden == (verb == "get" || verb == "update") {
				t.Errorf("filter verbs=get,update: column %s hidden=%v", verb, c.hidden)
			}
		}
	}
	shot := screenshot(t, browser, "file://"+file)
	t.Logf("%d cells agree with who-can; screenshot: %s", checked, shot)
}

// findChromium is $KCEDAR_CHROMIUM, or Chromium on PATH.
func findChromium() string {
	if p := os.Getenv("KCEDAR_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

func chromium(t *testing.T, browser string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--user-data-dir=" + t.TempDir()}
	out, err := exec.CommandContext(ctx, browser, append(base, args...)...).Output()
	if err != nil {
		t.Fatalf("%s %v: %v", browser, args, err)
	}
	return out
}

// renderedCell and renderedRow are the table as Chromium shows it.
type renderedCell struct {
	state, mark, policies string
	hidden                bool
}

type renderedRow struct {
	subject, resource, kind, principalType string
	hidden                                 bool
	cells                                  map[string]renderedCell
}

// renderedRows loads url in Chromium, waits for the page's script (it
// marks the body data-ready) and reads the table from the DOM.
func renderedRows(t *testing.T, browser, url string) []renderedRow {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(string(chromium(t, browser, "--dump-dom", url))))
	if err != nil {
		t.Fatal(err)
	}
	var rows []renderedRow
	ready := false
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == "body" && attr(n, "data-ready") == "true" {
			ready = true
		}
		if n.Type == html.ElementNode && n.Data == "tr" && hasClass(n, "row") {
			rows = append(rows, readRow(n))
			return
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	if !ready {
		t.Fatal("the page's script did not run")
	}
	return rows
}

func readRow(tr *html.Node) renderedRow {
	r := renderedRow{subject: attr(tr, "data-subject"), resource: attr(tr, "data-resource"), kind: attr(tr, "data-kind"), principalType: attr(tr, "data-principal-type"), hidden: hasClass(tr, "hidden"), cells: map[string]renderedCell{}}
	for td := tr.FirstChild; td != nil; td = td.NextSibling {
		if td.Type != html.ElementNode || !hasClass(td, "v") {
			continue
		}
		mark := ""
		if td.FirstChild != nil {
			mark = td.FirstChild.Data
		}
		r.cells[attr(td, "data-verb")] = renderedCell{state: attr(td, "data-state"), mark: mark, policies: attr(td, "data-policies"), hidden: hasClass(td, "hidden")}
	}
	return r
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func hasClass(n *html.Node, class string) bool {
	return slices.Contains(strings.Fields(attr(n, "class")), class)
}

// checkCellsAgainstWhoCan asks kcedar who-can VERB RES -n dev and checks
// that the page shows a cell for exactly the subjects it names, with their
// policies, and that a single principal or group is shown allowed exactly
// when who-can lists it. It returns the number of cells checked.
func checkCellsAgainstWhoCan(t *testing.T, rows []renderedRow, dir, res, verb string) int {
	t.Helper()
	out, code := run(t, newWhoCanCmd(), verb, res, "-n", "dev", "--policies", dir, "-o", "json")
	if code != 0 {
		t.Fatalf("who-can %s %s: exit %d\n%s", verb, res, code, out)
	}
	var resp accessreview.ResourceAccessReviewResponse
	if err := json.Unmarshal([]byte(out), &resp); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{} // subject label: policies
	for _, list := range [][]engine.SubjectAccess{resp.Allowed, resp.Conditional, resp.Denied} {
		for _, a := range list {
			want[a.Subject.String()] = append(want[a.Subject.String()], a.Policies...)
		}
	}
	n := 0
	for _, r := range rows {
		c, ok := r.cells[verb]
		if r.resource != res || !ok || c.state == "none" {
			continue
		}
		n++
		policies, named := want[r.subject]
		if !named {
			t.Errorf("%s %s: the page shows %s (%s) but who-can does not name it", verb, res, r.subject, c.state)
			continue
		}
		for _, id := range policies {
			if !slices.Contains(strings.Split(c.policies, ","), id) {
				t.Errorf("%s %s: %s's cell names policies %q, who-can %v", verb, res, r.subject, c.policies, policies)
			}
		}
		if (c.state == "allowed") != strings.HasPrefix(c.mark, "✔") {
			t.Errorf("%s %s: %s shown %s with the mark %q", verb, res, r.subject, c.state, c.mark)
		}
		if listed, single := listedByWhoCan(&resp, r); single && listed != (c.state == "allowed") {
			t.Errorf("%s %s: %s shown %s %q, who-can lists it: %v", verb, res, r.subject, c.state, c.mark, listed)
		}
		delete(want, r.subject)
	}
	for sub := range want {
		t.Errorf("%s %s: who-can names %s, the page shows no cell", verb, res, sub)
	}
	return n
}

// listedByWhoCan reports whether who-can lists the row's subject in users
// or groups, and whether it is a single principal or group that who-can
// would list.
func listedByWhoCan(resp *accessreview.ResourceAccessReviewResponse, r renderedRow) (listed, single bool) {
	if r.principalType != "" {
		return false, false
	}
	switch engine.SubjectKind(r.kind) {
	case engine.SubjectUser, engine.SubjectServiceAccount, engine.SubjectNode:
		return slices.Contains(resp.Users, r.subject), true
	case engine.SubjectGroup:
		return slices.Contains(resp.Groups, r.subject), true
	}
	return false, false
}

// screenshot keeps a picture of the page in a directory the test does not
// remove ($KCEDAR_TEST_ARTIFACTS, or a new one under the system's temp).
func screenshot(t *testing.T, browser, url string) string {
	t.Helper()
	dir := os.Getenv("KCEDAR_TEST_ARTIFACTS")
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "kcedar-access-matrix-"); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "access-matrix.png")
	chromium(t, browser, "--window-size=1400,900", "--hide-scrollbars", "--screenshot="+path, url)
	if st, err := os.Stat(path); err != nil || st.Size() == 0 {
		t.Fatalf("no screenshot: %v", err)
	}
	return path
}
