package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/lib/safetext"
	"github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/tools/offline"
)

func init() { rootCmd.AddCommand(newWhyCmd()) }

// whyOptions are kcedar why's flags and arguments.
type whyOptions struct {
	reviewOptions
	identityFlags
	url  string
	args []string // VERB [RESOURCE [NAME]]
}

// whyLong is why's help text.
const whyLong = `Explain one decision: why the policies allow, deny, have no opinion on,
or leave conditional the request VERB RESOURCE [NAME] of the user --as.

It prints the decision as kcedar serve makes it, then the policies that
decided it (a Deny: every forbid that holds or fails to evaluate; an Allow:
every permit that holds; a Conditional decision: every policy whose condition
remains), each with its file (or policy object) and line and each scope
constraint and when/unless clause evaluated alone; then the policies that
nearly applied (two of principal, action and resource matched) with the part
that did not hold and the values it read ("when { resource.namespace ==
"prod" }" was false: resource.namespace is "dev"); and, for a conditional
decision, the conditions admission evaluates.

RESOURCE is written as kubectl writes it (pods, deployments.apps, pods/exec);
--url asks about a non-resource URL. Without NAME the name is open (every
name), as in kubectl auth can-i. The request is for one verb; "*" is not
explained.

Exit status: 0 when explained, 1 invalid policies, 2 usage or I/O error.`

func newWhyCmd() *cobra.Command {
	var o whyOptions
	cmd := &cobra.Command{
		Use:   "why VERB (RESOURCE [NAME] | --url PATH) --as USER [--as-group G]... (--policies DIR | --policy-objects FILE | --cluster)... [-n NAMESPACE] [-o json]",
		Short: "Explain one decision: the policies that decided it and those that nearly applied",
		Long:  whyLong,
		Args:  cobra.RangeArgs(1, 3),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.args = args
			o.reviewOptions.Complete()
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
func (o *whyOptions) AddFlags(f *pflag.FlagSet) {
	o.reviewOptions.AddFlags(f, "namespace of the request (empty: every namespace, or a cluster-scoped resource)")
	o.identityFlags.AddFlags(f, false)
	f.StringVar(&o.url, "url", "", "a non-resource URL (/healthz, /metrics) instead of a resource")
}

// Validate checks --output, the arguments, the user and the policy
// sources; errors are usage errors (exit 2).
func (o *whyOptions) Validate() error {
	if err := checkOutputFormat(o.output); err != nil {
		return err
	}
	if o.url != "" && len(o.args) != 1 {
		return &exitError{2, errors.New("with --url give only the verb")}
	}
	if o.url == "" && len(o.args) < 2 {
		return &exitError{2, errors.New("give VERB RESOURCE [NAME], or VERB --url PATH")}
	}
	if !o.given() {
		return &exitError{2, errNoSubject}
	}
	if _, err := o.userInfo(); err != nil {
		return &exitError{2, err}
	}
	return o.reviewOptions.Validate()
}

// Run explains the decision on stdout.
func (o *whyOptions) Run(ctx context.Context, stdout, stderr io.Writer) error {
	schema, az, err := o.engine(ctx, stderr)
	if err != nil {
		return err
	}
	eng, ok := az.(*engine.Engine)
	if !ok {
		return fmt.Errorf("internal error: the review engine is a %T", az)
	}
	note := stderr
	if o.output == "json" {
		note = io.Discard
	}
	req, err := o.request(schema, note)
	if err != nil {
		return &exitError{2, err}
	}
	ex, err := eng.Explain(ctx, req)
	if err != nil {
		return &exitError{2, err}
	}
	if o.output == "json" {
		return writeJSONRefusals(stdout, ex, o.pol.refused)
	}
	// String escapes every value it quotes; Lines is the last guard of
	// the whole text (nothing but its own newlines reaches the terminal).
	_, err = io.WriteString(stdout, safetext.Lines(ex.String()))
	return err
}

// request builds the request the arguments ask, resolving the resource as
// kcedar authorize does (what it resolved to is noted on errw).
func (o *whyOptions) request(schema *schemagen.Schema, errw io.Writer) (*entities.Request, error) {
	u, err := o.userInfo()
	if err != nil {
		return nil, err
	}
	spec := offline.RequestSpec{User: u.Name, Groups: u.Groups, UID: u.UID, Extra: u.Extra, Verb: o.args[0], Path: o.url}
	if o.url == "" {
		spec.Resource, spec.Namespace = o.args[1], o.namespace
		if len(o.args) == 3 {
			spec.Name = o.args[2]
		}
		if err := resolveRequestFlags(schema, &spec, errw); err != nil {
			return nil, err
		}
	}
	req, _, err := (&offline.TestCase{Request: &spec}).Build()
	return req, err
}
