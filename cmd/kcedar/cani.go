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
	chain chainOptions
	url   string
	// args are VERB [RESOURCE [NAME]] of one request.
	args []string
}

// canILong is can-i's help text.
const canILong = `Answer whether a user may make a request, or list what a user may do,
offline, from the policies, for kube-apiserver's authorizer chain.

can-i VERB RESOURCE [NAME] (or VERB --url PATH) answers one request as a
Kubernetes 1.38 SubjectAccessReview that takes conditions answers it:
"yes", "no", or "yes, if:" with the conditions that remain, readable (the
conditions kcedar returns, then what the authorizers after it answer).
kubectl auth can-i does not ask for conditions, so it says "no" where the
answer is "yes, if". -o json prints the SubjectAccessReview with
spec.authorizationOptions and status.conditionalDecision as kube-apiserver
returns them. Exit status: 0 yes, 3 no, 4 yes if the conditions hold.

The chain is kcedar first, then RBAC on kcedar's NoOpinion (read from the
cluster with --cluster, from RBAC objects with --rbac FILE; --kcedar-only
asks kcedar alone). What kcedar answers depends on how kcedar serve runs
(--mode): none folds a decision left to admission (Deny if a deny
condition remains, else NoOpinion), admission-enforcement (Kubernetes
1.37) answers Allow for a conditional allow on a write and checks the
conditions in admission ("yes, if"), conditions-review (Kubernetes 1.38)
returns them; by default it is found from the cluster (kcedar's
ValidatingWebhookConfiguration), else none.

can-i --list lists the verbs and resources a user may use: every verb of
the schema is asked for every resource of the schema (and for every group
and resource, "*", and the non-resource URLs the policies name), with the
name left open. Rules that hold for some names only list them (RESOURCE
NAMES); rules that depend on anything else print their conditions. Unlike
kubectl auth can-i --list in front of a webhook, the list is complete for
the policies (incomplete: false), RBAC's permits (rbac/...) included. The
forbids that apply to the user follow as DENIED rows (status.denied in
JSON): what they deny for every name, or when their conditions hold,
whatever the rules above allow. -o json prints the SubjectRulesReview that
POST /v1/rulesreview returns.

The policies come from files (--policies), policy objects (--policy-objects
FILE, as kubectl get -o yaml prints them, or --cluster) or both, composed as
kcedar serve composes them; objects serve would refuse are reported on
stderr (and in refusedPolicyObjects with -o json) and not used.

Exit status (--list): 0 when answered, 1 invalid policies, 2 usage or I/O
error.`

func newCanICmd() *cobra.Command {
	var o canIOptions
	cmd := &cobra.Command{
		Use:   "can-i (VERB RESOURCE [NAME] | VERB --url PATH | --list) --as USER [--as-group G]... [-n NAMESPACE] (--policies DIR | --policy-objects FILE | --cluster)... [-o json]",
		Short: "Answer whether a user may make a request (yes, no, or yes if), or list what a user may do",
		Long:  canILong,
		Args:  cobra.RangeArgs(0, 3),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.args = args
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
	f.StringVar(&o.url, "url", "", "a non-resource URL (/healthz, /metrics) instead of a resource")
	o.identityFlags.AddFlags(f, false)
	o.chain.AddFlags(f, true)
}

// Complete completes the shared options.
func (o *canIOptions) Complete() {
	o.reviewOptions.Complete()
}

// Validate checks --output, the question (--list, or one request), the
// subject and its extra, and the policy sources; errors are usage errors
// (exit 2).
func (o *canIOptions) Validate() error {
	if err := checkOutputFormat(o.output); err != nil {
		return err
	}
	switch {
	case o.list && (len(o.args) > 0 || o.url != ""):
		return &exitError{2, fmt.Errorf("give --list or one request (VERB RESOURCE [NAME]), not both")}
	case o.list:
	case o.url != "" && len(o.args) != 1:
		return &exitError{2, fmt.Errorf("with --url give only the verb")}
	case o.url == "" && len(o.args) < 2:
		return &exitError{2, fmt.Errorf("give VERB RESOURCE [NAME], VERB --url PATH, or --list")}
	}
	if !o.given() {
		return &exitError{2, errNoSubject}
	}
	if _, err := o.userInfo(); err != nil {
		return &exitError{2, err}
	}
	if err := o.chain.Validate(); err != nil {
		return err
	}
	return o.reviewOptions.Validate()
}

// Run answers the question on stdout (policy objects not used on
// stderr).
func (o *canIOptions) Run(ctx context.Context, stdout, stderr io.Writer) error {
	if !o.list {
		return o.runOne(ctx, stdout, stderr)
	}
	u, err := o.userInfo()
	if err != nil {
		return &exitError{2, err}
	}
	srr := &accessreview.SubjectRulesReview{APIVersion: accessreview.APIVersion, Kind: "SubjectRulesReview",
		Spec: accessreview.SubjectRulesReviewSpec{User: u.Name, Groups: u.Groups, UID: u.UID, Namespace: o.namespace, Extra: u.Extra}}
	_, az, chain, err := o.chainEngine(ctx, stderr, &o.chain)
	if err != nil {
		return err
	}
	resp, err := accessreview.WhatCan(ctx, az, srr)
	if err != nil {
		return &exitError{2, err}
	}
	if o.output == "json" {
		doc := struct {
			*accessreview.SubjectRulesReview
			Chain string `json:"chain"`
		}{resp, chain}
		return writeJSONRefusals(stdout, doc, o.pol.refused)
	}
	safetext.Fprintf(stdout, "chain: %s\n", chain)
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
