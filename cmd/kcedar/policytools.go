package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/cedarlang/lint"
	"github.com/kcedar/kcedar/internal/conditions"
	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/lib/safetext"
	"github.com/kcedar/kcedar/internal/schemagen"
)

// Helpers shared by the offline policy tools: validate, authorize, test,
// who-can and can-i.

// loadSchema loads the schema of src (the embedded default when src is zero).
func loadSchema(ctx context.Context, src schemaSource) (*schemagen.Schema, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	s, err := src.Load(ctx)
	if err != nil {
		return nil, fmt.Errorf("loading the schema (%s): %w", src, err)
	}
	return s, nil
}

// loadChecker loads the schema and a checker for it; errors are usage or
// I/O errors (exit 2).
func loadChecker(ctx context.Context, src schemaSource) (*lint.Checker, error) {
	s, err := loadSchema(ctx, src)
	if err != nil {
		return nil, &exitError{2, err}
	}
	checker, err := lint.NewChecker(s)
	if err != nil {
		return nil, &exitError{2, err}
	}
	return checker, nil
}

// loadPolicySet reads, checks and indexes the policies at paths. Invalid
// policies are reported on w and give an exitError with code 1; unreadable
// paths code 2.
func loadPolicySet(w io.Writer, checker *lint.Checker, paths []string) (*cedarlang.PolicySet, error) {
	if len(paths) == 0 {
		return nil, &exitError{2, errors.New("no policies: give --policies FILE|DIR, --policy-objects FILE or --cluster")}
	}
	files, err := lint.ReadPaths(paths)
	if err != nil {
		return nil, &exitError{2, err}
	}
	res := checker.Check(files)
	if res.Errors() > 0 {
		for _, d := range res.Diagnostics {
			if d.Severity == lint.Error {
				fmt.Fprintln(w, safetext.Lines(d.String()))
			}
		}
		return nil, &exitError{1, fmt.Errorf("%d invalid policies; run kcedar validate", res.Errors())}
	}
	ps, err := cedarlang.NewPolicySet(res.Policies)
	if err != nil {
		return nil, &exitError{1, err}
	}
	return ps, nil
}

func checkOutputFormat(format string) error {
	if format != "text" && format != "json" {
		return &exitError{2, fmt.Errorf("--output must be text or json, not %q", format)}
	}
	return nil
}

func plural(n int, word string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, word)
	}
	if strings.HasSuffix(word, "y") {
		return fmt.Sprintf("%d %sies", n, strings.TrimSuffix(word, "y"))
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// reviewOptions are the flags and the set-up the offline access reviews
// (who-can, can-i) share: schema, policies (files and objects), output
// format and namespace.
type reviewOptions struct {
	src       schemaSource
	pol       policySourceOptions
	output    string
	namespace string
	nsObjects namespaceObjects
}

// AddFlags registers the shared flags on f; namespaceUsage is the help
// text of --namespace, which differs between the commands.
func (o *reviewOptions) AddFlags(f *pflag.FlagSet, namespaceUsage string) {
	o.src.AddFlags(f)
	o.pol.AddFlags(f, true)
	f.StringVarP(&o.output, "output", "o", "text", "output format: text or json")
	f.StringVarP(&o.namespace, "namespace", "n", "", namespaceUsage)
	o.nsObjects.AddFlag(f)
}

// Complete lets --cluster read the cluster's schema too (see
// policySourceOptions.Complete).
func (o *reviewOptions) Complete() {
	o.pol.Complete(&o.src)
}

// Validate checks the policy sources (a usage error, exit 2). The commands
// check --output and their own flags first.
func (o *reviewOptions) Validate() error {
	if err := o.pol.Validate(""); err != nil {
		return &exitError{2, err}
	}
	return nil
}

// engine loads the schema and the policies and builds the engine that
// answers the review, as the server's would (with a key of its own: the
// offline answers are not signed for anyone). Policy objects serve would
// refuse are reported on errw and kept in o.pol.refused. Complete and
// Validate must have run.
func (o *reviewOptions) engine(ctx context.Context, errw io.Writer) (*schemagen.Schema, engine.RuleResolver, error) {
	checker, err := loadChecker(ctx, o.src)
	if err != nil {
		return nil, nil, err
	}
	ps, err := o.pol.policySet(ctx, errw, checker, o.pol.policies)
	if err != nil {
		return nil, nil, err
	}
	ns, err := o.nsObjects.lookup()
	if err != nil {
		return nil, nil, &exitError{2, err}
	}
	return checker.Schema, conditions.New(engine.NewEngine(checker.Schema, ps, engine.EngineOptions{Namespaces: ns}), conditions.NewCodec(conditions.RandomKeyring())), nil
}

// writeJSON writes v as the server's endpoints answer: indented, with <, >
// and & as they are.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
