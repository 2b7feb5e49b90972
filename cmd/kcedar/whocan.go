package main

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kcedar/kcedar/internal/accessreview"
	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/lib/safetext"
	"github.com/kcedar/kcedar/internal/schemagen"
)

func init() { rootCmd.AddCommand(newWhoCanCmd()) }

// whoCanOptions are kcedar who-can's flags and arguments.
type whoCanOptions struct {
	reviewOptions
	chain chainOptions
	url   string
	// args are VERB [RESOURCE [NAME]], set by Complete.
	args []string
}

// whoCanLong is who-can's help text.
const whoCanLong = `Answer "who can VERB RESOURCE" from the policies, offline, by partial
evaluation with the principal unknown: every policy that may apply becomes an
entry naming its subjects (users, groups, ServiceAccounts, nodes, or selectors
such as every ServiceAccount of a namespace, a principal type or a username
pattern), the condition that remains (on the user's extra, the object, the
name...), and the policy ids.

RESOURCE is written as kubectl writes it: pods, deployments.apps, pods/exec,
certificatesigningrequests.certificates.k8s.io. Without -n and NAME the
namespace and the name are open ("in every namespace", "every name"): a
subject whose condition depends on them is not allowed for the whole request.
--url asks about a non-resource URL instead.

A subject is allowed when an allowed or conditional entry selects it (and its
condition holds) and no denied entry does. -o json prints the
ResourceAccessReviewResponse that POST /v1/resourceaccessreview returns.

The policies come from files (--policies), policy objects (--policy-objects
FILE, as kubectl get -o yaml prints them, or --cluster) or both, composed as
kcedar serve composes them: a NamespacedCedarPolicy only grants in its
namespace. Objects serve would refuse are reported on stderr (and in
refusedPolicyObjects with -o json) and not used.

The answer is for kube-apiserver's authorizer chain as kcedar manifests
writes it: kcedar first (its Allow or Deny is final), then RBAC on its
NoOpinion. With --cluster the cluster's RBAC is read and converted (as
kcedar rbac convert does); --rbac FILE takes RBAC objects instead; RBAC's
entries name their policies rbac/KIND/NAMESPACE/NAME/ROLE/RULE.
--kcedar-only answers for kcedar alone. The output says which chain
answered (chain in JSON).

Exit status: 0 when answered, 1 invalid policies, 2 usage or I/O error.`

func newWhoCanCmd() *cobra.Command {
	var o whoCanOptions
	cmd := &cobra.Command{
		Use:   "who-can VERB (RESOURCE [NAME] | --url PATH) (--policies DIR | --policy-objects FILE | --cluster)... [-n NAMESPACE] [-o json]",
		Short: "List the subjects the policies allow (or deny) to make a request",
		Long:  whoCanLong,
		Args:  cobra.RangeArgs(1, 3),
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
func (o *whoCanOptions) AddFlags(f *pflag.FlagSet) {
	o.reviewOptions.AddFlags(f, "namespace of the request (empty: every namespace)")
	o.chain.AddFlags(f, false)
	f.StringVar(&o.url, "url", "", "a non-resource URL (/healthz, /metrics) instead of a resource")
}

// Complete keeps the arguments and completes the shared options.
func (o *whoCanOptions) Complete(args []string) {
	o.args = args
	o.reviewOptions.Complete()
}

// Validate checks --output, that the arguments fit --url (or its absence)
// and the policy sources; errors are usage errors (exit 2).
func (o *whoCanOptions) Validate() error {
	if err := checkOutputFormat(o.output); err != nil {
		return err
	}
	if o.url != "" && len(o.args) != 1 {
		return &exitError{2, fmt.Errorf("with --url give only the verb")}
	}
	if o.url == "" && len(o.args) < 2 {
		return &exitError{2, fmt.Errorf("give VERB RESOURCE [NAME], or VERB --url PATH")}
	}
	if err := o.chain.Validate(); err != nil {
		return err
	}
	return o.reviewOptions.Validate()
}

// Run answers the question from the policies and prints the answer on
// stdout (warnings and policy objects not used on stderr).
func (o *whoCanOptions) Run(ctx context.Context, stdout, stderr io.Writer) error {
	schema, az, chain, err := o.chainEngine(ctx, stderr, &o.chain)
	if err != nil {
		return err
	}
	rar, err := o.review(schema, stderr)
	if err != nil {
		return err
	}
	resp, err := accessreview.WhoCan(ctx, az, rar)
	if err != nil {
		return &exitError{2, err}
	}
	if o.output == "json" {
		doc := struct {
			*accessreview.ResourceAccessReviewResponse
			Chain string `json:"chain"`
		}{resp, chain}
		return writeJSONRefusals(stdout, doc, o.pol.refused)
	}
	safetext.Fprintf(stdout, "chain: %s\n", chain)
	printAccessReview(stdout, &resp.AccessReview)
	return nil
}

// review builds the ResourceAccessReview the arguments ask, warning on errw
// of a resource the schema does not know.
func (o *whoCanOptions) review(schema *schemagen.Schema, errw io.Writer) (*accessreview.ResourceAccessReview, error) {
	rar := &accessreview.ResourceAccessReview{APIVersion: accessreview.APIVersion, Kind: "ResourceAccessReview"}
	attrs := &rar.AuthorizationAttributes
	attrs.Verb = o.args[0]
	if o.url != "" {
		attrs.Path = o.url
		return rar, nil
	}
	group, resource, sub, err := parseKubectlResource(schema, o.args[1])
	if err != nil {
		return nil, &exitError{2, err}
	}
	if _, ok := schema.Lookup(group, resource, sub); !ok && group != "*" && resource != "*" {
		safetext.Fprintf(errw, "warning: the schema has no resource %q; the question is about k8s::Resource\n", o.args[1])
	}
	attrs.ResourceGroup, attrs.Resource, attrs.Subresource = group, resource, sub
	attrs.Namespace = o.namespace
	if len(o.args) == 3 {
		attrs.ResourceName = o.args[2]
	}
	if o.namespace != "" {
		rar.Kind = "LocalResourceAccessReview"
	}
	return rar, nil
}

var versionLabel = regexp.MustCompile(`^v[0-9]+((alpha|beta)[0-9]+)?$`)

// parseKubectlResource reads a resource as kubectl writes it:
// RESOURCE[.VERSION][.GROUP][/SUBRESOURCE]. The core group is "".
func parseKubectlResource(s *schemagen.Schema, arg string) (group, resource, sub string, err error) {
	if arg == "" {
		return "", "", "", fmt.Errorf("the resource is empty")
	}
	rg, sub, _ := strings.Cut(arg, "/")
	resource, group, _ = strings.Cut(rg, ".")
	if resource == "" {
		return "", "", "", fmt.Errorf("resource %q has no resource name", arg)
	}
	if v, rest, ok := strings.Cut(group, "."); ok && versionLabel.MatchString(v) {
		if _, known := s.Lookup(group, resource, sub); !known {
			group = rest // deployments.v1.apps
		}
	} else if versionLabel.MatchString(group) {
		if _, known := s.Lookup(group, resource, sub); !known {
			group = "" // pods.v1
		}
	}
	return group, resource, sub, nil
}

// printAccessReview prints a table like kubectl-who-can's. Every cell
// comes from the policies: escaped for the terminal (safetext.Fprintf).
func printAccessReview(w io.Writer, rv *engine.AccessReview) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SUBJECT\tKIND\tNAMESPACE\tVIA\tCONDITION")
	row := func(a engine.SubjectAccess, cond string) {
		kind := string(a.Kind)
		if a.PrincipalType != "" {
			kind += " (" + strings.TrimPrefix(a.PrincipalType, "k8s::") + ")"
		}
		ns := a.Namespace
		if ns == "" {
			ns = "-"
		}
		if a.Case != "" {
			cond = "[" + a.Case + "] " + cond
		}
		safetext.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", a.Subject, kind, ns, strings.Join(a.Policies, ","), oneLine(cond))
	}
	for _, a := range rv.Allowed {
		row(a, "-")
	}
	for _, a := range rv.Conditional {
		row(a, "when "+a.Condition)
	}
	for _, a := range rv.Denied {
		cond := "DENIED"
		if a.Condition != "" {
			cond += " when " + a.Condition
		}
		row(a, cond)
	}
	tw.Flush()
	if len(rv.Allowed)+len(rv.Conditional)+len(rv.Denied) == 0 {
		fmt.Fprintln(w, "no policy allows or denies anyone this request")
	}
	for _, e := range rv.Errors {
		safetext.Fprintf(w, "error: %s\n", e)
	}
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
