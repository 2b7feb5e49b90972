package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/tools/rbacconvert"
)

func init() { rootCmd.AddCommand(newRBACCmd()) }

func newRBACCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rbac",
		Short: "Migrate Kubernetes RBAC to Cedar",
		Long:  "Tools to move Kubernetes RBAC grants into Cedar policies. See docs/rbac-migration.md.",
	}
	cmd.AddCommand(newRBACConvertCmd())
	return cmd
}

// rbacConvertOptions are kcedar rbac convert's flags.
type rbacConvertOptions struct {
	src     schemaSource
	files   []string
	out     string
	output  string
	verbose bool
	noBoot  bool
}

const rbacConvertLong = `Convert RBAC (Roles, ClusterRoles, RoleBindings, ClusterRoleBindings) into
Cedar permits written against kcedar's schema, one per binding, subject, rule
and target type, with @id, @binding, @role, @rule and @subject annotations.

RBAC objects come from -f (files or directories of YAML or JSON, multi-document
and List kinds included; "-" is stdin), or, without -f, from the live cluster
of --kubeconfig / --live. The schema comes from the usual source flags (the
embedded Kubernetes v1.37 default without any; --kubeconfig and --live also
read the schema of that cluster).

The policies are validated against the schema before they are printed.
Warnings (bindings to missing roles, verbs the schema does not declare, rules
RBAC matches only for literal "*" subresources, ...) go to stderr.

Warnings on Kubernetes' bootstrap roles and bindings (the ones kube-apiserver
creates itself, labelled kubernetes.io/bootstrapping=rbac-defaults) are
expected on every cluster: those roles name resources this schema does not
type (*/finalizers, leasecandidates, resourceclaims/binding, pods in
metrics.k8s.io), and they convert exactly all the same. They are counted in
one line; -v lists them. Warnings on your own roles and bindings are listed
one by one. --skip-bootstrap-bindings leaves out the bootstrap bindings, and
with them those warnings.`

func newRBACConvertCmd() *cobra.Command {
	o := &rbacConvertOptions{}
	cmd := &cobra.Command{
		Use:   "convert",
		Short: "Convert Roles, ClusterRoles and their bindings into Cedar policies",
		Long:  rbacConvertLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Validate(cmd.ErrOrStderr()); err != nil {
				return &exitError{2, err}
			}
			return o.Run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

// AddFlags registers the flags on f.
func (o *rbacConvertOptions) AddFlags(f *pflag.FlagSet) {
	f.StringArrayVarP(&o.files, "filename", "f", nil, "RBAC objects: a YAML/JSON file or a directory (repeatable; - is stdin)")
	o.src.AddFlags(f)
	f.StringVarP(&o.output, "output", "o", "cedar", "output format: cedar")
	f.StringVar(&o.out, "file", "", "write the policies to this file instead of stdout")
	f.BoolVar(&o.noBoot, "skip-bootstrap-bindings", false, "leave out the bindings kube-apiserver creates itself (label kubernetes.io/bootstrapping=rbac-defaults); roles are kept")
	f.BoolVarP(&o.verbose, "verbose", "v", false, "print counts, timings and the warnings on Kubernetes' bootstrap roles to stderr")
}

// Validate checks the output format (notes go to stderr).
func (o *rbacConvertOptions) Validate(stderr io.Writer) error {
	_, err := outputFormat(stderr, o.output, []string{"cedar"}, &o.out, "--file")
	return err
}

// Run reads the RBAC objects, converts them, validates the policies against
// the schema and writes them.
func (o *rbacConvertOptions) Run(ctx context.Context, stdout, stderr io.Writer) error {
	start := time.Now()
	in, err := o.readInput(ctx)
	if err != nil {
		return err
	}
	s, err := o.src.Load(ctx)
	if err != nil {
		return err
	}
	res, err := rbacconvert.Convert(s, in)
	if err != nil {
		return err
	}
	if err := validateConverted(s, res.Parsed, stderr); err != nil {
		return err
	}
	if err := writeOutput(o.out, res.Policies, stdout); err != nil {
		return err
	}
	o.printWarnings(stderr, res)
	if o.verbose {
		fmt.Fprintf(stderr, "schema:   %s\n", o.src)
		fmt.Fprintf(stderr, "input:    %d ClusterRoles, %d Roles, %d ClusterRoleBindings, %d RoleBindings\n",
			len(in.ClusterRoles), len(in.Roles), len(in.ClusterRoleBindings), len(in.RoleBindings))
		fmt.Fprintf(stderr, "output:   %d policies from %d bindings, %d bytes, %d warnings\n", res.Count, res.Bindings, len(res.Policies), len(res.Warnings))
		fmt.Fprintf(stderr, "total:    %s\n", time.Since(start).Round(time.Millisecond))
	}
	return nil
}

// printWarnings lists the warnings on the user's roles and bindings, and
// counts those on Kubernetes' bootstrap roles in one line (listing them with
// -v).
func (o *rbacConvertOptions) printWarnings(stderr io.Writer, res *rbacconvert.Result) {
	for _, w := range res.UserWarnings() {
		fmt.Fprintln(stderr, "warning:", w)
	}
	if len(res.Bootstrap) == 0 {
		return
	}
	listed := "-v lists them; "
	if o.verbose {
		listed = ""
		for _, w := range res.Bootstrap {
			fmt.Fprintln(stderr, "warning (bootstrap role):", w)
		}
	}
	fmt.Fprintf(stderr, "note: %s on Kubernetes' bootstrap roles (expected: resources this schema does not type, converted exactly; %suse --skip-bootstrap-bindings to leave them out)\n",
		plural(len(res.Bootstrap), "warning"), listed)
}

// readInput reads the RBAC objects from -f, else from the live cluster.
func (o *rbacConvertOptions) readInput(ctx context.Context) (*rbacconvert.Input, error) {
	in := &rbacconvert.Input{}
	switch {
	case len(o.files) > 0:
		if err := in.ReadPaths(o.files); err != nil {
			return nil, err
		}
	case o.src.IsLive():
		cfg, err := o.src.RESTConfig()
		if err != nil {
			return nil, err
		}
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		if err := in.ReadCluster(ctx, cs); err != nil {
			return nil, err
		}
	default:
		return nil, errors.New("no RBAC input: give -f FILE|DIR or a live cluster (--kubeconfig, --live)")
	}
	if o.noBoot {
		in.DropBootstrapBindings()
	}
	return in, nil
}

// validateConverted checks the converted policies (parsed from the text
// written, and checked by Convert to be the ones built) against the
// schema; a failure is a converter bug, listed on stderr.
func validateConverted(s *schemagen.Schema, policies []*cedarlang.Policy, stderr io.Writer) error {
	v, err := cedarlang.NewSchemaValidator(s)
	if err != nil {
		return err
	}
	if errs := v.Validate(policies); len(errs) > 0 {
		for _, e := range errs {
			fmt.Fprintln(stderr, "error:", e)
		}
		return &exitError{code: 1, err: fmt.Errorf("%d converted policies fail validation against the schema (a bug)", len(errs))}
	}
	return nil
}
