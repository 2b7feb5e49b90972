package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kcedar/kcedar/internal/cedarlang/lint"
	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/lib/safetext"
	"github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/tools/offline"
)

func init() { rootCmd.AddCommand(newTestCmd()) }

// testOptions are kcedar test's flags and arguments.
type testOptions struct {
	src     schemaSource
	pol     policySourceOptions
	output  string
	verbose bool
	// paths are the test files and directories, set by Complete.
	paths []string
}

func newTestCmd() *cobra.Command {
	var o testOptions
	cmd := &cobra.Command{
		Use:   "test [--schema FILE | ...] FILE|DIR...",
		Short: "Run YAML files of expected decisions against policies",
		Long: `Run decision tests: YAML files listing requests and the decision the
policies must give (Allow, Deny, NoOpinion or Conditional and, for
Conditional, the outcome given the objects). Directories are searched for
*_test.yaml and *.test.yaml files. Each file names its policies (paths
relative to the file) or uses the *.cedar files next to it:

  policies: [team.cedar]
  tests:
  - name: team members read pods in their namespace
    request: {user: alice, groups: [team-a], verb: list, resource: pods, namespace: team-a}
    expect: Allow
  - name: pods only on the team's nodes
    request: {user: alice, groups: [team-a], verb: create, resource: pods, namespace: team-a}
    object: {apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {nodeName: n1}}
    expect: Conditional
    outcome: Allow

A request may instead be a SubjectAccessReview (sar:). Decisions use the
server's code path, like 'kcedar authorize'. With --policy-objects FILE or
--cluster, policy objects join each test file's policies, composed as kcedar
serve composes them (a NamespacedCedarPolicy only grants in its namespace;
objects serve would refuse are reported and not used).

Exit status: 0 all passed, 1 a test failed or the policies are invalid,
2 usage or I/O error.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Complete(args)
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

// AddFlags registers the flags on f.
func (o *testOptions) AddFlags(f *pflag.FlagSet) {
	o.src.AddFlags(f)
	o.pol.AddFlags(f, false)
	f.StringVarP(&o.output, "output", "o", "text", "output format: text or json")
	f.BoolVarP(&o.verbose, "verbose", "v", false, "list passing tests too")
}

// Complete keeps the test paths and lets --cluster read the cluster's
// schema too (see policySourceOptions.Complete).
func (o *testOptions) Complete(args []string) {
	o.paths = args
	o.pol.Complete(&o.src)
}

// Validate checks --output and the policy sources; errors are usage errors
// (exit 2).
func (o *testOptions) Validate() error {
	if err := checkOutputFormat(o.output); err != nil {
		return err
	}
	if err := o.pol.Validate(""); err != nil {
		return &exitError{2, err}
	}
	return nil
}

// Run loads the schema (and the policy objects, if asked for) and runs the
// tests, reporting on stdout (policy objects not used on stderr).
func (o *testOptions) Run(ctx context.Context, stdout, stderr io.Writer) error {
	checker, err := loadChecker(ctx, o.src)
	if err != nil {
		return err
	}
	var loader offline.PolicyLoader = checker
	if o.pol.usesObjects() {
		srcs, err := o.pol.objectSources(ctx, stderr, checker)
		if err != nil {
			return err
		}
		loader = composedLoader{checker: checker, srcs: srcs}
	}
	return runTests(stdout, checker.Schema, loader, o.paths, *o)
}

type testFileReport struct {
	File    string               `json:"file"`
	Error   string               `json:"error,omitempty"`
	Results []offline.TestResult `json:"results,omitempty"`
}

// runTests runs the test files at paths, loading their policies with
// loader, and reports on w.
func runTests(w io.Writer, schema *schemagen.Schema, loader offline.PolicyLoader, paths []string, o testOptions) error {
	files, err := offline.FindTestFiles(paths)
	if err != nil {
		return &exitError{2, err}
	}
	if len(files) == 0 {
		return &exitError{2, fmt.Errorf("no *_test.yaml files in %v", paths)}
	}
	var reports []testFileReport
	passed, failed, broken := 0, 0, 0
	for _, f := range files {
		rep := testFileReport{File: f}
		results, err := offline.RunTestFile(f, schema, loader)
		var diags []lint.Diagnostic
		if inv := (*lint.InvalidPoliciesError)(nil); errors.As(err, &inv) {
			diags = inv.Diagnostics
		}
		if o.output == "text" && err != nil {
			safetext.Fprintf(w, "FAIL %s: %v\n", f, err)
			for _, d := range diags {
				fmt.Fprintln(w, safetext.Lines(d.String()))
			}
		}
		if err != nil {
			rep.Error = err.Error()
			broken++
		}
		rep.Results = results
		for _, r := range results {
			if r.Passed {
				passed++
				if o.verbose && o.output == "text" {
					safetext.Fprintf(w, "ok   %s: %s\n", f, r.Name)
					printAuditFindings(w, r.Got.Audit)
				}
				continue
			}
			failed++
			if o.output == "text" {
				safetext.Fprintf(w, "FAIL %s: %s\n", f, r.Name)
				for _, msg := range r.Failures {
					safetext.Fprintf(w, "     %s\n", msg)
				}
				for _, c := range r.Got.Conditions {
					state := "not evaluated"
					switch {
					case c.Error != "":
						state = "error: " + c.Error
					case c.Holds != nil:
						state = fmt.Sprint(*c.Holds)
					}
					safetext.Fprintf(w, "     %s condition %s: %s -> %s\n", c.Effect, c.ID, c.Expression, state)
				}
				printAuditFindings(w, r.Got.Audit)
			}
		}
		reports = append(reports, rep)
	}
	if o.output == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		doc := map[string]any{"passed": passed, "failed": failed, "brokenFiles": broken, "files": reports}
		if len(o.pol.refused) > 0 {
			doc["refusedPolicyObjects"] = o.pol.refused
		}
		if err := enc.Encode(doc); err != nil {
			return &exitError{2, err}
		}
	} else {
		fmt.Fprintf(w, "%s: %d passed, %d failed", plural(len(files), "test file"), passed, failed)
		if broken > 0 {
			fmt.Fprintf(w, ", %d could not run", broken)
		}
		fmt.Fprintln(w)
	}
	if failed > 0 || broken > 0 {
		return &exitError{1, fmt.Errorf("%d tests failed, %d test files could not run", failed, broken)}
	}
	return nil
}

// printAuditFindings lists the audit policies that would have changed a
// test's decision, under its line.
func printAuditFindings(w io.Writer, audit []engine.AuditReport) {
	for _, a := range audit {
		safetext.Fprintf(w, "     audit: %s %s would %s\n", a.Effect, a.Policy, a.Would)
	}
}
