package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kcedar/kcedar/internal/accessreview"
	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/lib/safetext"
)

func init() { rootCmd.AddCommand(newCanICmd()) }

// canIOptions are kcedar can-i's flags.
type canIOptions struct {
	reviewOptions
	list bool
	identityFlags
}

func newCanICmd() *cobra.Command {
	var o canIOptions
	cmd := &cobra.Command{
		Use:   "can-i --list --as USER [--as-group G]... [-n NAMESPACE] (--policies DIR | --policy-objects FILE | --cluster)... [-o json]",
		Short: "List what a user may do, with conditions (like kubectl auth can-i --list)",
		Long: `List the verbs and resources a user may use, offline, from the policies:
every verb of the schema is asked for every resource of the schema (and for
every group and resource, "*", and the non-resource URLs the policies name),
with the name left open. Rules that hold for some names only list them
(RESOURCE NAMES); rules that depend on anything else print their conditions.
Unlike kubectl auth can-i --list in front of a webhook, the list is complete
for kcedar's policies (incomplete: false). The forbids that apply to the user
follow as DENIED rows (status.denied in JSON): what they deny for every
name, or when their conditions hold, whatever the rules above allow.

The policies come from files (--policies), policy objects (--policy-objects
FILE, as kubectl get -o yaml prints them, or --cluster) or both, composed as
kcedar serve composes them; objects serve would refuse are reported on
stderr (and in refusedPolicyObjects with -o json) and not used.

-o json prints the SubjectRulesReview that POST /v1/rulesreview returns.
For one request, use kcedar authorize.

Exit status: 0 when answered, 1 invalid policies, 2 usage or I/O error.`,
		Args: cobra.NoArgs,
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
func (o *canIOptions) AddFlags(f *pflag.FlagSet) {
	o.reviewOptions.AddFlags(f, "namespace (empty: every namespace)")
	f.BoolVar(&o.list, "list", false, "list every rule the user may use")
	o.identityFlags.AddFlags(f, false)
}

// Complete completes the shared options.
func (o *canIOptions) Complete() {
	o.reviewOptions.Complete()
}

// Validate checks --output, --list, the subject and its extra, and the
// policy sources; errors are usage errors (exit 2).
func (o *canIOptions) Validate() error {
	if err := checkOutputFormat(o.output); err != nil {
		return err
	}
	if !o.list {
		return &exitError{2, fmt.Errorf("only --list is supported; to decide one request use kcedar authorize")}
	}
	if !o.given() {
		return &exitError{2, errNoSubject}
	}
	if _, err := o.userInfo(); err != nil {
		return &exitError{2, err}
	}
	return o.reviewOptions.Validate()
}

// Run lists the user's rules from the policies on stdout (policy objects
// not used on stderr).
func (o *canIOptions) Run(ctx context.Context, stdout, stderr io.Writer) error {
	u, err := o.userInfo()
	if err != nil {
		return &exitError{2, err}
	}
	srr := &accessreview.SubjectRulesReview{APIVersion: accessreview.APIVersion, Kind: "SubjectRulesReview",
		Spec: accessreview.SubjectRulesReviewSpec{User: u.Name, Groups: u.Groups, UID: u.UID, Namespace: o.namespace, Extra: u.Extra}}
	_, az, err := o.engine(ctx, stderr)
	if err != nil {
		return err
	}
	resp, err := accessreview.WhatCan(ctx, az, srr)
	if err != nil {
		return &exitError{2, err}
	}
	if o.output == "json" {
		return writeJSONRefusals(stdout, resp, o.pol.refused)
	}
	printRules(stdout, resp.Status)
	return nil
}

// printRules prints a table like kubectl auth can-i --list's, with the
// conditions and the policies, then what the user's forbids deny. Every
// cell comes from the policies: escaped for the terminal (safetext.Fprintf).
func printRules(w io.Writer, rv *engine.RulesReview) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RESOURCES\tNON-RESOURCE URLS\tRESOURCE NAMES\tVERBS\tCONDITIONS\tVIA")
	for _, r := range rv.ResourceRules {
		safetext.Fprintf(tw, "%s\t[]\t[%s]\t[%s]\t%s\t%s\n", ruleResources(r.APIGroups, r.Resources), strings.Join(r.ResourceNames, " "), strings.Join(r.Verbs, " "), ruleConditions(r.Conditions), strings.Join(r.Policies, ","))
	}
	for _, r := range rv.NonResourceRules {
		safetext.Fprintf(tw, "\t[%s]\t[]\t[%s]\t%s\t%s\n", strings.Join(r.NonResourceURLs, " "), strings.Join(r.Verbs, " "), ruleConditions(r.Conditions), strings.Join(r.Policies, ","))
	}
	for _, r := range rv.Denied {
		cond := "DENIED"
		if len(r.When) > 0 {
			when := make([]string, len(r.When))
			for i, c := range r.When {
				when[i] = oneLine(c)
			}
			cond += " when " + strings.Join(when, " || ")
		}
		urls := ""
		if len(r.NonResourceURLs) > 0 {
			urls = "[" + strings.Join(r.NonResourceURLs, " ") + "]"
		}
		safetext.Fprintf(tw, "%s\t%s\t[]\t[%s]\t%s\t%s\n", ruleResources(r.APIGroups, r.Resources), urls, strings.Join(r.Verbs, " "), cond, strings.Join(r.Policies, ","))
	}
	tw.Flush()
	if len(rv.Denied) > 0 {
		fmt.Fprintln(w, "DENIED rows: the user's forbids deny these requests (when their conditions hold), whatever the rules above allow")
	}
	if rv.EvaluationError != "" {
		safetext.Fprintf(w, "evaluation errors: %s\n", rv.EvaluationError)
	}
}

// ruleResources writes a rule's resources as kubectl does: pods,
// deployments.apps, deployments.apps/scale.
func ruleResources(groups, resources []string) string {
	res := make([]string, len(resources))
	for i, name := range resources {
		res[i] = name
		if len(groups) > 0 && groups[0] != "" {
			base, sub, hasSub := strings.Cut(name, "/")
			res[i] = base + "." + groups[0]
			if hasSub {
				res[i] += "/" + sub
			}
		}
	}
	return strings.Join(res, ",")
}

func ruleConditions(c *engine.RuleConditions) string {
	if c == nil {
		return "-"
	}
	var parts []string
	for _, d := range c.Deny {
		parts = append(parts, "unless "+oneLine(d))
	}
	if len(c.Allow) > 0 {
		allow := make([]string, len(c.Allow))
		for i, a := range c.Allow {
			allow[i] = oneLine(a)
		}
		parts = append([]string{"when " + strings.Join(allow, " || ")}, parts...)
	}
	return strings.Join(parts, "; ")
}
