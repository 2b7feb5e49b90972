package docs

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// otherToolsFlags are flags the docs name on their own (`--flag` in inline
// code) that belong to other programs, not to kcedar.
var otherToolsFlags = map[string]string{
	"admission-control-config-file": "kube-apiserver",
	"authorization-config":          "kube-apiserver",
	"authorization-mode":            "kube-apiserver",
	"feature-gates":                 "kube-apiserver",
	"disable-admission-plugins":     "kube-apiserver",
	"admission-control":             "kube-apiserver",
	"api-versions":                  "helm template",
	"cascade":                       "kubectl delete",
	"prune-allowlist":               "kubectl apply",
}

// removedFlags are former kcedar flags the docs may name on their own, to
// say they are gone; a kcedar command line must never use them.
var removedFlags = map[string]bool{
	"policy-objects-kubeconfig":        true,
	"admission-webhook-kubeconfig":     true,
	"admission-webhook-check-interval": true,
}

// command is one kcedar command as its --help describes it.
type command struct {
	flags map[string]bool     // long flags, inherited ones included
	subs  map[string]*command // subcommands by name
}

// TestDocFlagsExist fails when README.md or docs/*.md names a kcedar flag
// that the command's --help does not list: in a command line
// (`kcedar SUBCOMMAND ... --flag`, in a code block or inline code) against
// that command's flags, and a flag on its own (`--flag` in inline code)
// against every kcedar command's flags.
func TestDocFlagsExist(t *testing.T) {
	if testing.Short() {
		t.Skip("builds kcedar")
	}
	rootCmd := loadCommands(t, buildKcedar(t))
	all := map[string]bool{}
	rootCmd.allFlags(all)
	commands := 0
	check := func(where, line string) {
		n, problems := checkCommandLine(rootCmd, line)
		commands += n
		for _, msg := range problems {
			t.Errorf("%s: %s", where, msg)
		}
	}
	for _, path := range docFiles(t) {
		name, _ := filepath.Rel(root, path)
		fences, prose := parseMarkdown(readDoc(t, path))
		for _, f := range fences {
			for _, l := range logicalLines(f.body) {
				check(fmt.Sprintf("%s: code block at line %d", name, f.line), l)
			}
		}
		for _, span := range inlineSpans(prose) {
			check(fmt.Sprintf("%s: `%s`", name, span), span)
			if msg := checkBareFlag(all, span); msg != "" {
				t.Errorf("%s: `%s`: %s", name, span, msg)
			}
		}
	}
	// A parser that stopped finding command lines would pass every doc.
	if commands < 50 {
		t.Errorf("found only %d kcedar command lines in the docs: is the parser broken?", commands)
	}
	t.Logf("%d kcedar command lines checked", commands)
}

// buildKcedar builds cmd/kcedar into a temporary directory.
func buildKcedar(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "kcedar")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/kcedar/kcedar/cmd/kcedar")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

var (
	helpSection = regexp.MustCompile(`^([A-Z][A-Za-z ]*):$`)
	helpSub     = regexp.MustCompile(`^  ([a-z][-a-z0-9]*)\s`)
	// pflag's usage lines: "  -n, --namespace string" or "      --policies".
	helpFlag = regexp.MustCompile(`^  (?:-\S, |    )--([A-Za-z0-9][-A-Za-z0-9]*)`)
)

// loadCommands reads the command tree from the --help of bin and of every
// subcommand (but help and completion).
func loadCommands(t *testing.T, bin string, path ...string) *command {
	t.Helper()
	out, err := exec.Command(bin, append(append([]string{}, path...), "--help")...).Output()
	if err != nil {
		t.Fatalf("kcedar %s --help: %v", strings.Join(path, " "), err)
	}
	c := &command{flags: map[string]bool{}, subs: map[string]*command{}}
	section := ""
	for _, l := range strings.Split(string(out), "\n") {
		if m := helpSection.FindStringSubmatch(l); m != nil {
			section = m[1]
			continue
		}
		if m := helpFlag.FindStringSubmatch(l); m != nil && strings.HasSuffix(section, "Flags") {
			c.flags[m[1]] = true
		}
		if m := helpSub.FindStringSubmatch(l); m != nil && section == "Available Commands" && m[1] != "help" && m[1] != "completion" {
			c.subs[m[1]] = loadCommands(t, bin, append(append([]string{}, path...), m[1])...)
		}
	}
	if len(c.flags) == 0 {
		t.Fatalf("kcedar %s --help lists no flags: has its format changed?", strings.Join(path, " "))
	}
	return c
}

// allFlags adds the flags of c and of its subcommands to into.
func (c *command) allFlags(into map[string]bool) {
	for f := range c.flags {
		into[f] = true
	}
	for _, s := range c.subs {
		s.allFlags(into)
	}
}

var longFlag = regexp.MustCompile(`^--([A-Za-z0-9][-A-Za-z0-9]*)`)

// checkCommandLine checks every kcedar command in line (a shell line or an
// inline code span): its subcommands exist and each --flag up to the end of
// the command (a pipe, &&, ;, a comment) is one of the command's.
func checkCommandLine(rootCmd *command, line string) (commands int, problems []string) {
	tokens := strings.Fields(line)
	for i, tok := range tokens {
		if !isKcedar(tok) {
			continue
		}
		cmd, words := rootCmd, []string{"kcedar"}
		j := i + 1
		for ; j < len(tokens); j++ {
			sub, ok := cmd.subs[tokens[j]]
			if !ok {
				break
			}
			cmd, words = sub, append(words, tokens[j])
		}
		if cmd == rootCmd {
			continue // kcedar named, not run: "kcedar serve" needs a subcommand word
		}
		commands++
		for ; j < len(tokens) && !startsOtherCommand(tokens[j]); j++ {
			m := longFlag.FindStringSubmatch(tokens[j])
			if m != nil && !cmd.flags[m[1]] {
				problems = append(problems, fmt.Sprintf("%s has no flag --%s (see %s --help)", strings.Join(words, " "), m[1], strings.Join(words, " ")))
			}
			if end := strings.TrimRight(tokens[j], `"'`); strings.HasSuffix(end, ";") || strings.HasSuffix(end, ")") {
				break
			}
		}
	}
	return commands, problems
}

// isKcedar reports whether a shell word runs kcedar: kcedar, ./kcedar,
// bin/kcedar, x="$(kcedar.
func isKcedar(tok string) bool {
	tok = tok[strings.LastIndexAny(tok, `"'$(=`)+1:]
	return tok == "kcedar" || strings.HasSuffix(tok, "/kcedar")
}

// startsOtherCommand reports whether a shell word ends the command before
// it: an operator or a comment.
func startsOtherCommand(tok string) bool {
	switch tok {
	case "|", "||", "&&", ";", "&":
		return true
	}
	return strings.HasPrefix(tok, "#")
}

// checkBareFlag checks an inline code span that is a flag on its own
// (`--flag`, `--flag=value`, `--flag VALUE`) against every kcedar flag.
func checkBareFlag(all map[string]bool, span string) string {
	m := longFlag.FindStringSubmatch(span)
	if m == nil || all[m[1]] || removedFlags[m[1]] || otherToolsFlags[m[1]] != "" {
		return ""
	}
	return fmt.Sprintf("--%s is no kcedar command's flag (if it is another program's, add it to otherToolsFlags)", m[1])
}

// TestCheckCommandLine pins the command line rule on a small tree, so that a
// broken check cannot pass the docs by finding nothing.
func TestCheckCommandLine(t *testing.T) {
	serve := &command{flags: map[string]bool{"policies": true, "kubeconfig": true}}
	pack := &command{flags: map[string]bool{"namespace": true}}
	rootCmd := &command{subs: map[string]*command{"serve": serve, "policy": {subs: map[string]*command{"pack": pack}}}}
	tests := []struct {
		line     string
		commands int
		problems int
	}{
		{"kcedar serve --policies p/ --kubeconfig=k", 1, 0},
		{"kcedar serve --require-client-cert", 1, 1},
		{"sudo ./bin/kcedar serve --policies=DIR) --other", 1, 0},
		{"kcedar policy pack -n a --namespace a dir/ | kubectl apply --server-side -f -", 1, 0},
		{"kcedar policy pack --policies dir/ && kcedar serve --nope # --also-not-checked", 2, 2},
		{"kcedar is the webhook --nope", 0, 0},
		{`x="$(kcedar serve --nope)"`, 1, 1},
	}
	for _, tc := range tests {
		n, problems := checkCommandLine(rootCmd, tc.line)
		if n != tc.commands || len(problems) != tc.problems {
			t.Errorf("%q: %d commands, problems %q; want %d commands, %d problems", tc.line, n, problems, tc.commands, tc.problems)
		}
	}
}
