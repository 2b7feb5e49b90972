package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kcedar/kcedar/internal/conditions"
	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/lib/safetext"
	"github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/upstream"
)

func init() { rootCmd.AddCommand(newWhyCmd()) }

// whyOptions are kcedar why's flags and arguments.
type whyOptions struct {
	reviewOptions
	identityFlags
	chain chainOptions
	url   string
	args  []string // VERB [RESOURCE [NAME]]
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

The decision is explained for kube-apiserver's authorizer chain as kcedar
manifests writes it: kcedar first, then, on kcedar's NoOpinion, RBAC (read
from the cluster with --cluster, from RBAC objects with --rbac FILE; the
RBAC permits that allow are listed with their bindings). --kcedar-only
explains kcedar alone. What kcedar answers the API server depends on how
kcedar serve runs (--mode): none folds a conditional decision (Deny if a
deny condition remains, else NoOpinion), admission-enforcement (Kubernetes
1.37) answers Allow for a conditional allow on a write and checks the
conditions in admission, conditions-review (Kubernetes 1.38) sends the
conditions; by default it is found from the cluster (kcedar's
ValidatingWebhookConfiguration), else none.

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
	o.chain.AddFlags(f, true)
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
	if err := o.chain.Validate(); err != nil {
		return err
	}
	return o.reviewOptions.Validate()
}

// whyAnswer is why's answer: kcedar's explanation, what kcedar serve
// answers in its mode, and the chain's decision with RBAC's part.
type whyAnswer struct {
	// Chain names the chain explained; Mode is kcedar serve's mode and
	// ModeFrom where it was taken from.
	Chain    string `json:"chain"`
	Mode     string `json:"mode"`
	ModeFrom string `json:"modeFrom"`
	engine.Explanation
	// RBAC is RBAC's decision and the permits that decide it, when the
	// chain asked RBAC.
	RBAC *rbacPart `json:"rbac,omitempty"`
	// ChainDecision is the chain's answer at authorization time (Allow,
	// Deny, NoOpinion, or Conditional: left to admission), and DecidedBy the
	// authorizer whose answer it is.
	ChainDecision string `json:"chainDecision"`
	DecidedBy     string `json:"decidedBy,omitempty"`
}

// rbacPart is RBAC's decision in the chain and the permits that allow.
type rbacPart struct {
	Decision string               `json:"decision"`
	Deciding []engine.PolicyTrace `json:"deciding"`
}

// Run explains the decision on stdout: kcedar's, then the chain's.
func (o *whyOptions) Run(ctx context.Context, stdout, stderr io.Writer) error {
	schema, az, err := o.engine(ctx, stderr)
	if err != nil {
		return err
	}
	eng, ok := az.(*conditions.Engine)
	if !ok {
		return fmt.Errorf("internal error: the review engine is a %T", az)
	}
	req, err := o.request(schema, stderr)
	if err != nil {
		return &exitError{2, err}
	}
	ex, err := eng.Explain(ctx, req)
	if err != nil {
		return &exitError{2, err}
	}
	ans, err := o.chainAnswer(ctx, stderr, schema, eng, req, ex)
	if err != nil {
		return err
	}
	if o.output == "json" {
		return writeJSONRefusals(stdout, ans, o.pol.refused)
	}
	// String escapes every value it quotes; Lines is the last guard of
	// the whole text (nothing but its own newlines reaches the terminal).
	_, err = io.WriteString(stdout, safetext.Lines(ans.String()))
	return err
}

// chainAnswer puts kcedar's explanation in the chain: what kcedar serve
// answers in its mode, and RBAC's part when the chain asks RBAC.
func (o *whyOptions) chainAnswer(ctx context.Context, stderr io.Writer, schema *schemagen.Schema, eng *conditions.Engine, req *entities.Request, ex engine.Explanation) (*whyAnswer, error) {
	rb, err := o.chain.rbac(ctx, stderr, schema, &o.pol)
	if err != nil {
		return nil, err
	}
	rbacE, err := rbacEngine(schema, rb)
	if err != nil {
		return nil, err
	}
	mode, from, err := o.chain.serveMode(ctx, &o.pol)
	if err != nil {
		return nil, err
	}
	c := &upstream.Chain{Kcedar: eng, Mode: mode, RBAC: rbacE}
	a := c.Authorize(ctx, req)
	ex.ServedAs = servedAs(a.Kcedar)
	ans := &whyAnswer{Chain: describeChain(rb, o.chain.kcedarOnly), Mode: string(mode), ModeFrom: from, Explanation: ex,
		ChainDecision: a.Type().String(), DecidedBy: a.By}
	if a.RBAC != nil {
		rex, err := conditions.New(rbacE, conditions.NewCodec(conditions.RandomKeyring())).Explain(ctx, req)
		if err != nil {
			return nil, &exitError{2, err}
		}
		ans.RBAC = &rbacPart{Decision: a.RBAC.Type().String(), Deciding: rex.Deciding}
	}
	return ans, nil
}

// servedAs is what kcedar serve answers the API server, in words.
func servedAs(s upstream.Served) string {
	t := s.Type()
	switch {
	case s.Enforced:
		return "Allow, under --admission-enforcement: kcedar's admission webhook then checks the conditions below on the object and rejects the request unless they allow it"
	case t == engine.DecisionConditional:
		return "the conditions below (status.conditionalDecision), under conditional authorization: the API server calls kcedar back in admission to evaluate them"
	case s.Decision.IsConditional():
		return t.String() + ", the conditions folded: " + s.Mode.Describe()
	}
	return t.String()
}

// String renders the answer for people: the chain and the mode, kcedar's
// explanation, RBAC's part, and the chain's decision. Every value it
// quotes is escaped for a terminal (safetext.Fprintf).
func (a *whyAnswer) String() string {
	var b strings.Builder
	safetext.Fprintf(&b, "chain: %s\nmode: %s: %s (%s)\n", a.Chain, a.Mode, upstream.ServeMode(a.Mode).Describe(), a.ModeFrom)
	b.WriteString(a.Explanation.String())
	if a.RBAC != nil {
		safetext.Fprintf(&b, "RBAC (asked on kcedar's NoOpinion): %s\n", a.RBAC.Decision)
		for _, t := range a.RBAC.Deciding {
			safetext.Fprintf(&b, "  permit %s (%s)\n", t.ID, t.Source)
		}
	}
	by := ""
	if a.DecidedBy != "" {
		by = " (by " + a.DecidedBy + ")"
	}
	safetext.Fprintf(&b, "decision of the chain: %s%s\n", a.ChainDecision, by)
	return b.String()
}

// request builds the request the arguments ask, resolving the resource as
// kcedar authorize does; only an ambiguous resource is noted on errw.
func (o *whyOptions) request(schema *schemagen.Schema, errw io.Writer) (*entities.Request, error) {
	u, err := o.userInfo()
	if err != nil {
		return nil, err
	}
	return oneRequest(schema, u, o.args, o.url, o.namespace, errw)
}
