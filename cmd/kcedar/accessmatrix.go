package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/tools/accessmatrix"
)

func init() { rootCmd.AddCommand(newAccessMatrixCmd()) }

// accessMatrixOptions are kcedar access-matrix's flags.
type accessMatrixOptions struct {
	reviewOptions
	chain     chainOptions
	resources []string
	verbs     []string
	keepEmpty bool
}

const accessMatrixLong = `Draw who can do what: subjects × resources × verbs, in one namespace (-n)
or in the cluster (every namespace, cluster-scoped resources too). Each cell
comes from the same access review as kcedar who-can VERB RESOURCE [-n NS]:
the subjects (users, groups, ServiceAccounts, nodes and selectors) its
entries name, marked allowed (✔), allowed under a condition (~), denied by
a forbid (✖), or with a forbid under a condition (!), with the ids of the
policies behind them.

-o text prints a table, a row per subject and resource; -o json the matrix
with every entry; -o html a self-contained page (no network needed to view
it) with filters by subject, resource, verb and state, and the policies and
conditions of each cell:

  kcedar access-matrix -n dev --policies policies/ -o html > dev-access.html

In the cluster's matrix (no -n) a grant or a forbid in some namespaces (a
RoleBinding, a condition on resource.namespace) is a row of its own,
scoped to those namespaces (the NAMESPACES column; * is every namespace),
not a condition.

Resources default to every resource of the schema (namespaced ones with -n)
that some policy mentions, and the subresources policies name
(pods/exec, pods/log); --resources names them as kubectl writes them
(pods,deployments.apps,pods/exec), --all-resources keeps the ones no policy
mentions. The policies come from files, policy objects or --cluster, as for
who-can, and the matrix is for kube-apiserver's chain as who-can's answers
are: kcedar, then RBAC (the cluster's with --cluster, or --rbac FILE), so
subjects RBAC alone grants have rows too; --kcedar-only draws kcedar's
alone.

Exit status: 0 when answered, 1 invalid policies, 2 usage or I/O error.`

func newAccessMatrixCmd() *cobra.Command {
	var o accessMatrixOptions
	cmd := &cobra.Command{
		Use:   "access-matrix (--policies DIR | --policy-objects FILE | --cluster)... [-n NAMESPACE] [--resources R,...] [--verbs V,...] [-o text|json|html]",
		Short: "Draw who can do what (subjects × resources × verbs) as a table or an HTML page",
		Long:  accessMatrixLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Complete()
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
func (o *accessMatrixOptions) AddFlags(f *pflag.FlagSet) {
	o.reviewOptions.AddFlags(f, "namespace to draw (empty: the cluster, every namespace)")
	o.chain.AddFlags(f, false)
	f.Lookup("output").Usage = "output format: text, json or html"
	f.StringSliceVar(&o.resources, "resources", nil, "resources to draw, as kubectl writes them (default: every resource some policy mentions)")
	f.StringSliceVar(&o.verbs, "verbs", nil, "verbs to draw (default: "+fmt.Sprint(accessmatrix.DefaultVerbs)+")")
	f.BoolVar(&o.keepEmpty, "all-resources", false, "keep resources no policy mentions")
}

// Validate checks --output and the policy sources.
func (o *accessMatrixOptions) Validate() error {
	switch o.output {
	case "text", "json", "html":
	default:
		return &exitError{2, fmt.Errorf("--output must be text, json or html, not %q", o.output)}
	}
	if err := o.chain.Validate(); err != nil {
		return err
	}
	return o.reviewOptions.Validate()
}

// Run builds the matrix and prints it.
func (o *accessMatrixOptions) Run(ctx context.Context, stdout, stderr io.Writer) error {
	schema, az, chain, err := o.chainEngine(ctx, stderr, &o.chain)
	if err != nil {
		return err
	}
	q := accessmatrix.Query{Namespace: o.namespace, Verbs: o.verbs, KeepEmpty: o.keepEmpty || len(o.resources) > 0,
		Subresources: accessmatrix.NamedSubresources(schema, az.Policies().Policies, o.namespace != "")}
	if q.Resources, err = resolveMatrixResources(schema, o.resources); err != nil {
		return err
	}
	m, err := accessmatrix.Build(ctx, az, schema, q)
	if err != nil {
		return &exitError{2, err}
	}
	m.Chain = chain
	switch o.output {
	case "json":
		return writeJSONRefusals(stdout, m, o.pol.refused)
	case "html":
		return accessmatrix.WriteHTML(stdout, m, time.Now())
	}
	return accessmatrix.Write(stdout, m)
}

// resolveMatrixResources resolves --resources as kubectl does; a resource
// named explicitly is drawn even when no policy mentions it.
func resolveMatrixResources(schema *schemagen.Schema, args []string) ([]*schemagen.Resource, error) {
	var out []*schemagen.Resource
	for _, arg := range args {
		r, err := schema.ResolveResource(arg, "")
		if err != nil {
			return nil, &exitError{2, fmt.Errorf("--resources: %w", err)}
		}
		if r.Subresource != r.Key.Subresource {
			return nil, &exitError{2, fmt.Errorf("--resources: %s: free-form subresources cannot be drawn", arg)}
		}
		out = append(out, r.Resource)
	}
	return out, nil
}
