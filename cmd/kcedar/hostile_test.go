package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"golang.org/x/net/html"

	"github.com/kcedar/kcedar/internal/lib/safetext"
	"github.com/kcedar/kcedar/internal/testing/hostile"
)

// cedarString is s as a Cedar string literal: printable ASCII as it is,
// everything else as \u{...} (s as valid UTF-8: Cedar strings are).
func cedarString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		if r >= 0x20 && r < 0x7f && r != '"' && r != '\\' {
			b.WriteRune(r)
		} else {
			fmt.Fprintf(&b, `\u{%x}`, r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// hostilePolicies name each of names as a user, an object name and a
// policy id (a permit to get pods of that name), and with forbids also as
// a group (a forbid to delete pods).
func hostilePolicies(names []string, forbids bool) string {
	var b strings.Builder
	for i, n := range names {
		q := cedarString(n)
		fmt.Fprintf(&b, "@id(%s) permit(principal == k8s::User::%s, action == k8s::Action::\"get\", resource is core::pods) when { resource has name && resource.name == %s };\n",
			cedarString(fmt.Sprintf("p%d-%s", i, n)), q, q)
		if forbids {
			fmt.Fprintf(&b, "@id(%s) forbid(principal in k8s::Group::%s, action == k8s::Action::\"delete\", resource is core::pods);\n",
				cedarString(fmt.Sprintf("f%d-%s", i, n)), q)
		}
	}
	return b.String()
}

// diffNames are the hostile names kcedar diff's test compares (the diff's
// regions grow with the names a change holds): terminal escapes, an OSC 8
// link, overwriting, the right-to-left override, newlines, and Markdown
// and HTML structure.
var diffNames = []string{hostile.Names[0], hostile.Names[2], hostile.Names[3], hostile.Names[4], hostile.Names[7], hostile.Names[9],
	"pipe|cell", "`code` and ``more``", "<script>alert(1)</script>", "</code><img src=x onerror=alert(1)>", "[link](https://evil.example) ![img](x)", `back\slash\|pipe`}

// checkTerminalText fails if out passes a control, format or separator
// character, or a byte that is not UTF-8, raw (its own newlines aside).
func checkTerminalText(t *testing.T, what, out string) {
	t.Helper()
	if r := hostile.RawControl(out, true); r != "" {
		t.Errorf("%s holds %s raw:\n%q", what, r, out)
	}
}

// Every human-readable output that prints names from the policies shows
// them escaped: who-can, can-i, access-matrix (text), why, authorize, diff
// (table) and validate's diagnostics with their source excerpts. Nothing
// that acts on a terminal passes raw, and a name's newline or tab does not
// add a row or a column: each table keeps one line per entry.
func TestOutputsEscapeHostileNames(t *testing.T) {
	dir := t.TempDir()
	pol := writeFile(t, dir, "p.cedar", hostilePolicies(hostile.Names, true))
	first := hostile.Names[0]
	cases := []struct {
		name string
		cmd  func() *cobra.Command
		args []string
		rows int // lines the output must have (the chain's, the header, the entries), 0: any
	}{
		{"who-can", newWhoCanCmd, []string{"get", "pods", "-n", "dev", "--policies", pol}, 2 + len(hostile.Names)},
		{"who-can delete", newWhoCanCmd, []string{"delete", "pods", "-n", "dev", "--policies", pol}, 2 + len(hostile.Names)},
		{"can-i", newCanICmd, []string{"--list", "--as", first, "--as-group", hostile.Names[3], "--policies", pol}, 0},
		{"access-matrix", newAccessMatrixCmd, []string{"-n", "dev", "--resources", "pods", "--verbs", "get,delete", "--policies", pol}, 0},
		{"why", newWhyCmd, []string{"get", "pods", first, "-n", "dev", "--as", first, "--policies", pol}, 0},
		{"authorize", newAuthorizeCmd, []string{"--verb", "get", "--resource", "pods", "--name", first, "-n", "dev", "--as", first, "--policies", pol}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, code := run(t, tc.cmd(), tc.args...)
			if code != 0 {
				t.Fatalf("exit %d:\n%s", code, out)
			}
			checkTerminalText(t, tc.name, out)
			if !strings.Contains(out, safetext.Terminal(first)) {
				t.Errorf("%s does not show %q escaped:\n%s", tc.name, first, out)
			}
			if tc.rows > 0 {
				if n := strings.Count(strings.TrimSuffix(out, "\n"), "\n") + 1; n != tc.rows {
					t.Errorf("%s: %d lines, want %d:\n%s", tc.name, n, tc.rows, out)
				}
			}
		})
	}
}

// validate quotes the policy file: its diagnostics (policy ids) and the
// source line under them. A file holding terminal escapes is refused, the
// line shown escaped with the caret under the first escape; characters
// that do not show (the right-to-left override, a zero-width space) are
// shown escaped, the caret moved along under the column it names.
func TestValidateEscapesHostileSource(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, comment, want, under string }{
		{"escapes", "\x1b[2K\x1b[1A\r\u202e", `/* ^[[2K^[[1A\r\u202e */`, "^[[2K"},
		{"invisible", "\u202e\u200b\t", "/* \\u202e\\u200b\t */", "nmespace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := "@id(" + cedarString(hostile.Names[0]) + ")\npermit (principal, action, resource is core::pods) /* " + tc.comment + " */ when { resource.nmespace == \"dev\" };\n"
			out, code := run(t, newValidateCmd(), writeFile(t, dir, tc.name+".cedar", src))
			if code != 1 {
				t.Fatalf("exit %d, want 1:\n%s", code, out)
			}
			// The file's tabs are kept, so that the caret's pad lines up.
			checkTerminalText(t, "validate", strings.ReplaceAll(out, "\t", " "))
			lines := strings.Split(out, "\n")
			for i, l := range lines {
				text, ok := strings.CutPrefix(l, "     | ")
				if !ok || i+1 >= len(lines) {
					continue
				}
				if !strings.Contains(text, tc.want) {
					t.Errorf("the source line is not shown escaped (want %q):\n%s", tc.want, text)
				}
				pad, _ := strings.CutPrefix(lines[i+1], "     | ")
				caret := strings.Index(pad, "^")
				runes := []rune(text)
				if caret < 0 || caret > len(runes) || !strings.HasPrefix(string(runes[caret:]), tc.under) {
					t.Errorf("the caret is not under %q:\n%s\n%s", tc.under, l, lines[i+1])
				}
				return
			}
			t.Errorf("no source excerpt:\n%s", out)
		})
	}
}

// kcedar diff's table and Markdown show names from the policies under
// review. The table escapes them as every terminal output does; the
// Markdown, pasted into a pull-request comment, keeps its structure: one
// line per row, eight cells in each (no pipe of a name splits one), no
// backtick, no tag but <code>, no raw character Markdown reads.
func TestDiffEscapesHostileNames(t *testing.T) {
	oldDir, newDir := t.TempDir(), t.TempDir()
	writeFile(t, oldDir, "p.cedar", `@id("base") permit(principal == k8s::User::"carol", action == k8s::Action::"get", resource is core::configmaps);`)
	writeFile(t, newDir, "p.cedar", hostilePolicies(diffNames, false))
	out, code := run(t, newDiffCmd(), oldDir, newDir)
	if code != 0 {
		t.Fatalf("table: exit %d:\n%s", code, out)
	}
	checkTerminalText(t, "diff table", out)
	md, code := run(t, newDiffCmd(), "-o", "markdown", oldDir, newDir)
	if code != 0 {
		t.Fatalf("markdown: exit %d:\n%s", code, md)
	}
	checkTerminalText(t, "diff markdown", md)
	if strings.Contains(md, "`") {
		t.Errorf("a backtick in the Markdown:\n%s", md)
	}
	if tags := regexp.MustCompile(`</?([a-zA-Z]+)`).FindAllStringSubmatch(md, -1); len(tags) == 0 {
		t.Errorf("no <code> in the Markdown:\n%s", md)
	} else {
		for _, tag := range tags {
			if tag[1] != "code" {
				t.Errorf("tag %q in the Markdown:\n%s", tag[0], md)
			}
		}
	}
	rows := 0
	for _, line := range strings.Split(md, "\n") {
		if !strings.HasPrefix(line, "| ") {
			continue
		}
		rows++
		if cells := strings.Count(line, "|") - 1; cells != len(diffColumns) {
			t.Errorf("a row of %d cells, want %d: %s", cells, len(diffColumns), line)
		}
		if strings.Contains(line, "\\") || regexp.MustCompile(`[*_~\[\]!$]`).MatchString(line) {
			t.Errorf("a raw Markdown character in a row: %s", line)
		}
	}
	if rows < 2+len(diffNames) {
		t.Errorf("%d table lines, want the header, its rule and a row per name at least:\n%s", rows, md)
	}
}

// The access matrix page: html/template escapes every name for where it
// lands, so no name adds an element, an attribute or a script; the text
// shown is escaped as for a terminal; and the matrix data stays one JSON
// document holding the names as they are.
func TestAccessMatrixPageEscapesHostileNames(t *testing.T) {
	dir := t.TempDir()
	pol := writeFile(t, dir, "p.cedar", hostilePolicies(hostile.Names, true))
	page, code := run(t, newAccessMatrixCmd(), "-n", "dev", "--resources", "pods", "--verbs", "get,delete", "--policies", pol, "-o", "html")
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, page)
	}
	doc, err := html.Parse(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	var scripts []string
	elements := map[string]int{}
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		switch n.Type {
		case html.ElementNode:
			elements[n.Data]++
			for _, a := range n.Attr {
				if strings.HasPrefix(a.Key, "on") || a.Key == "src" || a.Key == "href" {
					t.Errorf("<%s %s=%q>: an attribute no template writes", n.Data, a.Key, a.Val)
				}
				checkTerminalText(t, "attribute "+a.Key, a.Val)
			}
			if n.Data == "script" && n.FirstChild != nil {
				scripts = append(scripts, n.FirstChild.Data)
			}
		case html.TextNode:
			if n.Parent == nil || n.Parent.Data != "script" {
				checkTerminalText(t, "text", n.Data)
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	for _, tag := range []string{"img", "code", "a"} {
		if tag == "code" && elements[tag] != 1 {
			t.Errorf("%d <code> elements, want the page's one", elements[tag])
		} else if tag != "code" && elements[tag] > 0 {
			t.Errorf("%d <%s> elements: a name added markup", elements[tag], tag)
		}
	}
	if len(scripts) != 2 {
		t.Fatalf("%d scripts, want the data and the page's", len(scripts))
	}
	var data struct {
		Subjects []struct {
			Label string `json:"label"`
		} `json:"subjects"`
	}
	if err := json.Unmarshal([]byte(scripts[0]), &data); err != nil {
		t.Fatalf("the matrix data is not one JSON document: %v\n%s", err, scripts[0])
	}
	labels := map[string]bool{}
	for _, s := range data.Subjects {
		labels[s.Label] = true
	}
	if !labels[hostile.Names[0]] || !labels["<script>alert(1)</script>"] {
		t.Errorf("the data does not hold the names as they are: %v", labels)
	}
	if strings.Contains(page, "<script>alert") || strings.Contains(page, "</code><img") {
		t.Error("a name's markup is in the page raw")
	}
}
