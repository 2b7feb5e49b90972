package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/rbacconvert"
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

func newRBACConvertCmd() *cobra.Command {
	var (
		src     schemaSource
		files   []string
		out     string
		output  string
		verbose bool
		noBoot  bool
	)
	cmd := &cobra.Command{
		Use:   "convert",
		Short: "Convert Roles, ClusterRoles and their bindings into Cedar policies",
		Long: `Convert RBAC (Roles, ClusterRoles, RoleBindings, ClusterRoleBindings) into
Cedar permits written against kcedar's schema, one per binding, subject, rule
and target type, with @id, @binding, @role, @rule and @subject annotations.

RBAC objects come from -f (files or directories of YAML or JSON, multi-document
and List kinds included; "-" is stdin), or, without -f, from the live cluster
of --kubeconfig / --live. The schema comes from the usual source flags (the
embedded Kubernetes v1.37 default without any; --kubeconfig and --live also
read the schema of that cluster).

The policies are validated against the schema before they are printed.
Warnings (bindings to missing roles, verbs the schema does not declare, rules
RBAC matches only for literal "*" subresources, ...) go to stderr.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := outputFormat(cmd.ErrOrStderr(), output, []string{"cedar"}, &out, "--file"); err != nil {
				return &exitError{2, err}
			}
			ctx := cmd.Context()
			start := time.Now()
			in := &rbacconvert.Input{}
			switch {
			case len(files) > 0:
				if err := in.ReadPaths(files); err != nil {
					return err
				}
			case src.IsLive():
				cfg, err := src.RESTConfig()
				if err != nil {
					return err
				}
				cs, err := kubernetes.NewForConfig(cfg)
				if err != nil {
					return err
				}
				if err := in.ReadCluster(ctx, cs); err != nil {
					return err
				}
			default:
				return errors.New("no RBAC input: give -f FILE|DIR or a live cluster (--kubeconfig, --live)")
			}
			if noBoot {
				in.DropBootstrapBindings()
			}
			s, err := src.Load(ctx)
			if err != nil {
				return err
			}
			res, err := rbacconvert.Convert(s, in)
			if err != nil {
				return err
			}
			policies, err := cedarlang.ParsePolicies("rbac.cedar", res.Policies)
			if err != nil {
				return fmt.Errorf("the converted policies do not parse (a bug): %w", err)
			}
			v, err := cedarlang.NewSchemaValidator(s)
			if err != nil {
				return err
			}
			if errs := v.Validate(policies); len(errs) > 0 {
				for _, e := range errs {
					fmt.Fprintln(cmd.ErrOrStderr(), "error:", e)
				}
				return &exitError{code: 1, err: fmt.Errorf("%d converted policies fail validation against the schema (a bug)", len(errs))}
			}
			if err := writeOutput(out, res.Policies, cmd.OutOrStdout()); err != nil {
				return err
			}
			stderr := cmd.ErrOrStderr()
			for _, w := range res.Warnings {
				fmt.Fprintln(stderr, "warning:", w)
			}
			if verbose {
				fmt.Fprintf(stderr, "schema:   %s\n", src)
				fmt.Fprintf(stderr, "input:    %d ClusterRoles, %d Roles, %d ClusterRoleBindings, %d RoleBindings\n",
					len(in.ClusterRoles), len(in.Roles), len(in.ClusterRoleBindings), len(in.RoleBindings))
				fmt.Fprintf(stderr, "output:   %d policies from %d bindings, %d bytes, %d warnings\n", res.Count, res.Bindings, len(res.Policies), len(res.Warnings))
				fmt.Fprintf(stderr, "total:    %s\n", time.Since(start).Round(time.Millisecond))
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "RBAC objects: a YAML/JSON file or a directory (repeatable; - is stdin)")
	src.AddFlags(cmd.Flags())
	cmd.Flags().StringVarP(&output, "output", "o", "cedar", "output format: cedar")
	cmd.Flags().StringVar(&out, "file", "", "write the policies to this file instead of stdout")
	cmd.Flags().BoolVar(&noBoot, "skip-bootstrap-bindings", false, "leave out the bindings kube-apiserver creates itself (label kubernetes.io/bootstrapping=rbac-defaults); roles are kept")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "print counts and timings to stderr")
	return cmd
}
