package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/kcedar/kcedar/internal/cedarlang/lint"
	"github.com/kcedar/kcedar/internal/engine/offline"
	"github.com/kcedar/kcedar/internal/schemagen"
)

func init() { rootCmd.AddCommand(newTestCmd()) }

type testOptions struct {
	src     schemaSource
	pol     policySourceOptions
	output  string
	verbose bool
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
			if err := checkOutputFormat(o.output); err != nil {
				return err
			}
			o.pol.Complete(&o.src)
			if err := o.pol.Validate(""); err != nil {
				return &exitError{2, err}
			}
			checker, err := loadChecker(cmd.Context(), o.src)
			if err != nil {
				return err
			}
			var loader offline.PolicyLoader = checker
			if o.pol.usesObjects() {
				srcs, err := o.pol.objectSources(cmd.Context(), cmd.ErrOrStderr(), checker)
				if err != nil {
					return err
				}
				loader = composedLoader{checker: checker, srcs: srcs}
			}
			return runTests(cmd.OutOrStdout(), checker.Schema, loader, args, o)
		},
	}
	o.src.AddFlags(cmd.Flags())
	o.pol.AddFlags(cmd.Flags(), false)
	cmd.Flags().StringVarP(&o.output, "output", "o", "text", "output format: text or json")
	cmd.Flags().BoolVarP(&o.verbose, "verbose", "v", false, "list passing tests too")
	return cmd
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
			fmt.Fprintf(w, "FAIL %s: %v\n", f, err)
			for _, d := range diags {
				fmt.Fprintln(w, d)
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
					fmt.Fprintf(w, "ok   %s: %s\n", f, r.Name)
				}
				continue
			}
			failed++
			if o.output == "text" {
				fmt.Fprintf(w, "FAIL %s: %s\n", f, r.Name)
				for _, msg := range r.Failures {
					fmt.Fprintf(w, "     %s\n", msg)
				}
				for _, c := range r.Got.Conditions {
					state := "not evaluated"
					switch {
					case c.Error != "":
						state = "error: " + c.Error
					case c.Holds != nil:
						state = fmt.Sprint(*c.Holds)
					}
					fmt.Fprintf(w, "     %s condition %s: %s -> %s\n", c.Effect, c.ID, c.Expression, state)
				}
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
