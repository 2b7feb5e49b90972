package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/cedarlang/lint"
	"github.com/kcedar/kcedar/internal/cluster/policyobjects"
	"github.com/kcedar/kcedar/internal/lib/safetext"
	"github.com/kcedar/kcedar/internal/store"
)

func init() { rootCmd.AddCommand(newValidateCmd()) }

// validateOptions are kcedar validate's flags and arguments. AddFlags
// registers the flags, Complete takes the arguments and stdin, Validate
// refuses bad combinations (with exit code 2) and Run checks the policies.
type validateOptions struct {
	src            schemaSource
	pol            policySourceOptions
	output         string
	strictWarnings bool
	paths          []string  // PATH... ("-" is stdin)
	stdin          io.Reader // for the path "-"
	// objects are the policy objects' sources serve would load (with
	// --policy-objects or --cluster; o.pol.refused the others).
	objects []store.Source
}

// readPolicyPaths reads policy files as serve does, plus "-": the policies
// on stdin (once), named <stdin> in findings.
func readPolicyPaths(paths []string, stdin io.Reader) ([]lint.File, error) {
	var out []lint.File
	var rest []string
	flush := func() error {
		if len(rest) == 0 {
			return nil
		}
		files, err := lint.ReadPaths(rest)
		out, rest = append(out, files...), nil
		return err
	}
	usedStdin := false
	for _, p := range paths {
		if p != "-" {
			rest = append(rest, p)
			continue
		}
		if usedStdin {
			return nil, fmt.Errorf("- (stdin) given twice")
		}
		usedStdin = true
		if err := flush(); err != nil {
			return nil, err
		}
		if stdin == nil {
			stdin = os.Stdin
		}
		data, err := io.ReadAll(io.LimitReader(stdin, cedarlang.MaxPolicyFileBytes+1))
		if err != nil {
			return nil, fmt.Errorf("reading stdin: %w", err)
		}
		out = append(out, lint.File{Name: "<stdin>", Data: data})
	}
	return out, flush()
}

const validateLong = `Check policy files (and directories of *.cedar files) the way 'kcedar serve'
loads them: strict parsing (trailing garbage, an empty or duplicate @id are
errors) and type checking against the schema (unknown types, actions and
attributes, type mismatches, optional attributes read without has, actions
that do not apply to the resource). Without a schema flag the embedded
Kubernetes v1.37 schema is used.

Each finding is printed as
  file:line:col: policy <id>: message
      hint: how to fix it

With --policy-objects FILE (objects as kubectl get -o yaml prints them) or
--cluster (the cluster's objects), each CedarPolicy and NamespacedCedarPolicy
is checked as kcedar serve checks it (a NamespacedCedarPolicy holds permits
that stay within its namespace), objects serve would refuse are reported,
and the objects' policies and the files are loaded as one set, as serve
loads them (policy ids unique across objects and files). PATH is optional
then.

Lint warnings flag valid policies that cannot do what they seem to: a
comparison to "*", like "*", a forbid that can fail to evaluate, a permit
that depends on the object but only applies to reads, a has test that never
holds on the schema (resource.object has spec: objects sit under their
version, resource.object.v1.spec).

Exit status: 0 clean (warnings allowed unless --strict-warnings), 1 invalid
policies, 2 usage or I/O error.`

func newValidateCmd() *cobra.Command {
	o := &validateOptions{}
	cmd := &cobra.Command{
		Use:   "validate [--schema FILE | --kubeconfig FILE | --from-dir DIR] [--policy-objects FILE | --cluster] PATH... (- for stdin)",
		Short: "Check Cedar policy files against the schema, with positions and hints",
		Long:  validateLong,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Complete(args, cmd.InOrStdin())
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context(), cmd.OutOrStdout())
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

// AddFlags registers kcedar validate's flags on f.
func (o *validateOptions) AddFlags(f *pflag.FlagSet) {
	o.src.AddFlags(f)
	o.pol.AddFlags(f, false)
	f.StringVarP(&o.output, "output", "o", "text", "output format: text or json")
	f.BoolVar(&o.strictWarnings, "strict-warnings", false, "fail (exit 1) on lint warnings too")
}

// Complete takes the policy paths and the stdin that "-" (and
// --policy-objects -) read, and lets --cluster fill in the schema source.
func (o *validateOptions) Complete(paths []string, stdin io.Reader) {
	o.paths = paths
	o.stdin, o.pol.stdin = stdin, stdin
	o.pol.Complete(&o.src)
}

// Validate refuses an unknown --output, nothing to check, and conflicting
// policy sources; its errors exit 2.
func (o *validateOptions) Validate() error {
	if err := checkOutputFormat(o.output); err != nil {
		return err
	}
	if len(o.paths) == 0 && !o.pol.usesObjects() {
		return &exitError{2, fmt.Errorf("give policy files (PATH...), --policy-objects FILE or --cluster")}
	}
	stdinTaken := ""
	if slices.Contains(o.paths, "-") {
		stdinTaken = "the path -"
	}
	if err := o.pol.Validate(stdinTaken); err != nil {
		return &exitError{2, err}
	}
	return nil
}

// Run loads the schema (and the policy objects), checks the policies and
// reports on w; the returned error carries the exit code.
func (o *validateOptions) Run(ctx context.Context, w io.Writer) error {
	checker, err := loadChecker(ctx, o.src)
	if err != nil {
		return err
	}
	if o.pol.usesObjects() {
		// Refusals are findings: runValidate reports them.
		if o.objects, err = o.pol.objectSources(ctx, io.Discard, checker); err != nil {
			return err
		}
	}
	return runValidate(w, checker, o.paths, *o)
}

// validateReport is the --output json document.
type validateReport struct {
	Valid       bool              `json:"valid"`
	Files       int               `json:"files"`
	Policies    int               `json:"policies"`
	Errors      int               `json:"errors"`
	Warnings    int               `json:"warnings"`
	Diagnostics []lint.Diagnostic `json:"diagnostics"`
	// Unnarrowed: what the policy index cannot narrow (valid sets only).
	Unnarrowed *unnarrowedReport `json:"unnarrowed,omitempty"`
	// With policy objects: how many serve would load, those it would
	// refuse and why, and why the set of files and objects does not load
	// as one (SetError).
	PolicyObjects        *int                    `json:"policyObjects,omitempty"`
	RefusedPolicyObjects []policyobjects.Refusal `json:"refusedPolicyObjects,omitempty"`
	SetError             string                  `json:"setError,omitempty"`
}

// unnarrowedReport is cedarlang.UnnarrowedReport for validate's output.
type unnarrowedReport struct {
	Policies      int    `json:"policies"`
	MaxPerRequest int    `json:"maxPerRequest"`
	Verb          string `json:"verb,omitempty"`
	ResourceType  string `json:"resourceType,omitempty"`
	examples      []string
}

// unnarrowedNote: validate's text output notes unnarrowed policies once a
// request can meet this many.
const unnarrowedNote = 100

func unnarrowed(policies []*cedarlang.Policy) *unnarrowedReport {
	r := cedarlang.Unnarrowed(policies)
	out := &unnarrowedReport{Policies: len(r.Policies), MaxPerRequest: r.Max, Verb: r.Verb, ResourceType: r.ResourceType}
	for _, p := range r.Policies[:min(3, len(r.Policies))] {
		out.examples = append(out.examples, fmt.Sprintf("%s (%s)", p.ID, p.Source))
	}
	return out
}

// note is the text output's line about unnarrowed policies, "" when there
// are few.
func (u *unnarrowedReport) note() string {
	if u == nil || u.MaxPerRequest < unnarrowedNote {
		return ""
	}
	what := "a request"
	switch {
	case u.Verb != "" && u.ResourceType != "":
		what = fmt.Sprintf("a request to %s %s", u.Verb, u.ResourceType)
	case u.Verb != "":
		what = fmt.Sprintf("a request to %s", u.Verb)
	case u.ResourceType != "":
		what = fmt.Sprintf("a request on %s", u.ResourceType)
	}
	return safetext.Sprintf("note: %s meets %d policies that nothing but their verbs, resource types and principal type narrows; each is evaluated for every such request, so decisions cost more as they grow (%d such policies in all, e.g. %s). Where you can, give each a predicate the index keys on an attribute of the principal or the request (not an object's field): == or a literal set's .contains, in, containsAny or containsAll, or like with a literal of two bytes or more (docs/performance.md, \"The policy index\").",
		what, u.MaxPerRequest, u.Policies, strings.Join(u.examples, ", "))
}

// runValidate checks the policies at paths and reports on w; the returned
// error carries the exit code.
func runValidate(w io.Writer, checker *lint.Checker, paths []string, o validateOptions) error {
	files, err := readPolicyPaths(paths, o.stdin)
	if err != nil {
		return &exitError{2, err}
	}
	if len(files) == 0 && !o.pol.usesObjects() {
		return &exitError{2, fmt.Errorf("no *.cedar files in %v", paths)}
	}
	res := checker.Check(files)
	rep := validateReport{Files: res.Files, Policies: len(res.Policies), Errors: res.Errors(), Warnings: res.Warnings(), Diagnostics: res.Diagnostics}
	if rep.Diagnostics == nil {
		rep.Diagnostics = []lint.Diagnostic{}
	}
	if o.pol.usesObjects() {
		validateObjects(checker, files, o, &rep)
	}
	failed := rep.Errors > 0 || (o.strictWarnings && rep.Warnings > 0) || len(rep.RefusedPolicyObjects) > 0 || rep.SetError != ""
	rep.Valid = !failed
	if rep.Errors == 0 {
		rep.Unnarrowed = unnarrowed(res.Policies)
	}
	if o.output == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return &exitError{2, err}
		}
	} else {
		colour := isTerminal(w)
		for _, d := range res.Diagnostics {
			// A diagnostic quotes the policies (ids, names, text): nothing
			// but its own newline (before the hint) reaches the terminal.
			fmt.Fprintln(w, safetext.Lines(d.String()))
			fmt.Fprint(w, sourceExcerpt(files, d, colour))
		}
		printObjectFindings(w, &rep)
		if note := rep.Unnarrowed.note(); note != "" {
			fmt.Fprintln(w, note)
		}
		fmt.Fprintf(w, "%s, %s: %s, %s\n", plural(rep.Files, "file"), plural(rep.Policies, "policy"), plural(rep.Errors, "error"), plural(rep.Warnings, "warning"))
	}
	if failed {
		what := plural(rep.Errors, "error")
		switch {
		case len(rep.RefusedPolicyObjects) > 0:
			what = plural(len(rep.RefusedPolicyObjects), "policy object") + " refused"
		case rep.SetError != "":
			what = "the files and policy objects do not load as one set"
		case rep.Errors == 0:
			what = plural(rep.Warnings, "warning") + " (--strict-warnings)"
		}
		return &exitError{1, fmt.Errorf("policies are not valid: %s", what)}
	}
	return nil
}

// validateObjects adds the policy objects to rep: those serve would refuse,
// and, when the files are valid, whether files and objects load as one set
// the way serve loads them (then rep.Policies counts the whole set).
func validateObjects(checker *lint.Checker, files []lint.File, o validateOptions, rep *validateReport) {
	n := len(o.objects)
	rep.PolicyObjects, rep.RefusedPolicyObjects = &n, o.pol.refused
	if rep.Errors > 0 {
		return
	}
	// The set as serve builds it: the files (as read, stdin too) and the
	// objects, through serve's policy store.
	srcs := make([]store.Source, 0, len(files)+len(o.objects))
	for _, f := range files {
		srcs = append(srcs, store.Source{Name: f.Name, Data: f.Data})
	}
	ps, err := composeSet(checker, nil, append(srcs, o.objects...))
	if err != nil {
		rep.SetError = err.Error()
		return
	}
	rep.Policies = ps.Len()
}

// printObjectFindings prints what validateObjects found.
func printObjectFindings(w io.Writer, rep *validateReport) {
	for _, r := range rep.RefusedPolicyObjects {
		safetext.Fprintf(w, "%s: refused (kcedar serve does not load it):\n", r.Object)
		fmt.Fprintf(w, "    %s\n", strings.ReplaceAll(safetext.Lines(r.Reason), "\n", "\n    "))
	}
	if rep.SetError != "" {
		fmt.Fprintf(w, "the files and policy objects do not load as one set (kcedar serve would keep its last good set): %s\n", safetext.Lines(rep.SetError))
	}
	if rep.PolicyObjects != nil {
		fmt.Fprintf(w, "%s loaded as kcedar serve loads them, %d refused\n", plural(*rep.PolicyObjects, "policy object"), len(rep.RefusedPolicyObjects))
	}
}

// sourceExcerpt is the diagnostic's source line with a caret under its
// column (in characters), indented; red (yellow for a warning) when colour is
// set. A long line is cut to a window around the column.
func sourceExcerpt(files []lint.File, d lint.Diagnostic, colour bool) string {
	if d.Line < 1 || d.Column < 1 {
		return ""
	}
	for _, f := range files {
		if f.Name != d.File {
			continue
		}
		data := f.Data
		for i := 1; i < d.Line; i++ {
			nl := bytes.IndexByte(data, '\n')
			if nl < 0 {
				return ""
			}
			data = data[nl+1:]
		}
		if nl := bytes.IndexByte(data, '\n'); nl >= 0 {
			data = data[:nl]
		}
		line := []rune(strings.TrimRight(string(data), "\r"))
		col := min(d.Column-1, len(line))
		const width, before = 100, 40
		start, end := 0, len(line)
		if len(line) > width {
			start = max(0, col-before)
			end = min(len(line), start+width)
		}
		var text, pad strings.Builder
		if start > 0 {
			text.WriteString("...")
			pad.WriteString("   ")
		}
		// The line is the policy file's: each character is escaped for
		// the terminal (tabs kept, to line up with the caret's pad), and
		// the pad under it as wide as it shows.
		for i, r := range line[start:end] {
			shown := string(r)
			if r != '\t' {
				shown = safetext.Terminal(shown)
			}
			text.WriteString(shown)
			if start+i < col {
				if r == '\t' {
					pad.WriteRune('\t')
				} else {
					pad.WriteString(strings.Repeat(" ", utf8.RuneCountInString(shown)))
				}
			}
		}
		if end < len(line) {
			text.WriteString("...")
		}
		caret := "^"
		if colour {
			code := "31" // red
			if d.Severity == lint.Warning {
				code = "33" // yellow
			}
			caret = "\x1b[1;" + code + "m^\x1b[0m"
		}
		return "     | " + text.String() + "\n     | " + pad.String() + caret + "\n"
	}
	return ""
}

// isTerminal reports whether w is a terminal (colour only there; NO_COLOR
// turns it off).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && os.Getenv("NO_COLOR") == "" && term.IsTerminal(int(f.Fd()))
}
