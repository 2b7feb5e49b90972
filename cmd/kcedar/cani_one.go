package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kcedar/kcedar/internal/conditions"
	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/lib/safetext"
	"github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/tools/offline"
	"github.com/kcedar/kcedar/internal/upstream"
	"github.com/kcedar/kcedar/internal/wire"
)

// can-i VERB RESOURCE [NAME]: one request, answered as a Kubernetes 1.38
// SubjectAccessReview that takes conditions answers it (the chain's
// conditionalDecision), and said as "yes", "no" or "yes, if: ...".

// Verdicts of one request.
const (
	verdictYes   = "yes"
	verdictNo    = "no"
	verdictYesIf = "yes, if"
)

// canIAnswer is -o json's document: the SubjectAccessReview with
// conditions, as kube-apiserver returns it, and the chain that answered.
type canIAnswer struct {
	wire.SubjectAccessReview
	// Answer is yes, no or "yes, if".
	Answer string `json:"answer"`
	Chain  string `json:"chain"`
	Mode   string `json:"mode"`
}

// runOne answers one request for the chain.
func (o *canIOptions) runOne(ctx context.Context, stdout, stderr io.Writer) error {
	schema, az, err := o.engine(ctx, stderr)
	if err != nil {
		return err
	}
	eng, ok := az.(*conditions.Engine)
	if !ok {
		return fmt.Errorf("internal error: the review engine is a %T", az)
	}
	u, err := o.userInfo()
	if err != nil {
		return &exitError{2, err}
	}
	req, err := oneRequest(schema, u, o.args, o.url, o.namespace, stderr)
	if err != nil {
		return &exitError{2, err}
	}
	rb, err := o.chain.rbac(ctx, stderr, schema, &o.pol)
	if err != nil {
		return err
	}
	rbacE, err := rbacEngine(schema, rb)
	if err != nil {
		return err
	}
	mode, _, err := o.chain.serveMode(ctx, &o.pol)
	if err != nil {
		return err
	}
	c := &upstream.Chain{Kcedar: eng, Mode: mode, RBAC: rbacE}
	a := c.Authorize(ctx, req)
	verdict, conditions := verdictOf(eng, req, a)
	doc := canIAnswer{SubjectAccessReview: reviewOf(req, a), Answer: verdict, Chain: describeChain(rb, o.chain.kcedarOnly), Mode: string(mode)}
	if o.output == "json" {
		err = writeJSONRefusals(stdout, doc, o.pol.refused)
	} else {
		writeVerdict(stdout, doc, conditions)
	}
	if err != nil {
		return err
	}
	return verdictExit(verdict)
}

// verdictExit is the exit status of a verdict: 0 yes, 3 no, 4 yes if.
func verdictExit(verdict string) error {
	switch verdict {
	case verdictNo:
		return &exitError{3, errors.New("no: the chain does not allow the request")}
	case verdictYesIf:
		return &exitError{4, errors.New("yes, if the conditions hold")}
	}
	return nil
}

// verdictOf reads the chain's answer: yes (an Allow admission does not
// check), no, or yes if the conditions (as lines, in the order they are
// evaluated) hold: those the API server evaluates in admission, or those
// kcedar's admission webhook checks under admission enforcement.
func verdictOf(eng *conditions.Engine, req *entities.Request, a upstream.ChainAnswer) (string, []string) {
	switch t := a.Type(); {
	case t == engine.DecisionAllow && a.By == upstream.ChainKcedar && a.Kcedar.Enforced:
		enc := eng.Encode(a.Kcedar.Decision, conditions.RequestBinding(req))
		lines := conditionLines(upstream.ChainKcedar, enc.ConditionsMap)
		return verdictYesIf, append(lines, "(kcedar's admission webhook checks them; otherwise the request is rejected)")
	case t == engine.DecisionAllow:
		return verdictYes, nil
	case t == engine.DecisionConditional:
		return verdictYesIf, unionLines(a.Answer)
	}
	return verdictNo, nil
}

// unionLines are the lines of a conditional chain answer: each
// authorizer's conditions or answer in the order the API server evaluates
// them, the first Allow or Deny deciding.
func unionLines(d wire.ConditionsAwareDecision) []string {
	members := d.Union
	if d.Type == wire.DecisionTypeConditionsMap {
		members = []wire.UnionMember{{AuthorizerName: upstream.ChainKcedar, Decision: d}}
	}
	var lines []string
	for _, m := range members {
		switch m.Decision.Type {
		case wire.DecisionTypeConditionsMap:
			lines = append(lines, conditionLines(m.AuthorizerName, m.Decision.ConditionsMap)...)
		case wire.DecisionTypeAllow:
			return append(lines, "otherwise "+m.AuthorizerName+" allows")
		case wire.DecisionTypeDeny:
			return append(lines, "otherwise "+m.AuthorizerName+" denies")
		}
	}
	return append(lines, "otherwise no authorizer allows")
}

// conditionLines are a ConditionsMap's conditions, readable: denies,
// then no-opinion, then allows, each with its expression and its policy.
func conditionLines(authorizer string, m *wire.ConditionsMap) []string {
	if m == nil {
		return nil
	}
	var lines []string
	for _, g := range []struct {
		verb  string
		conds []wire.Condition
	}{{"denies", m.DenyConditions}, {"has no opinion", m.NoOpinionConditions}, {"allows", m.AllowConditions}} {
		for _, c := range g.conds {
			lines = append(lines, fmt.Sprintf("%s %s if %s  (%s)", authorizer, g.verb, conditionExpression(c), c.Description))
		}
	}
	return lines
}

// conditionExpression is the Cedar expression of a condition kcedar wrote
// (a group's as its policies' expressions joined by `||`), else the
// condition as it is.
func conditionExpression(c wire.Condition) string {
	return oneLine(conditions.Readable(c))
}

// writeVerdict prints the verdict, the conditions of a "yes, if" and the
// chain. Every condition and name is escaped for the terminal.
func writeVerdict(w io.Writer, doc canIAnswer, conditions []string) {
	if doc.Answer != verdictYesIf {
		safetext.Fprintf(w, "%s\n", doc.Answer)
	} else {
		safetext.Fprintf(w, "%s:\n", doc.Answer)
		for _, c := range conditions {
			safetext.Fprintf(w, "  %s\n", c)
		}
	}
	safetext.Fprintf(w, "chain: %s; kcedar serve mode: %s\n", doc.Chain, doc.Mode)
}

// reviewOf is the SubjectAccessReview a caller that takes conditions
// (spec.authorizationOptions) gets for req from the chain's answer a.
func reviewOf(req *entities.Request, a upstream.ChainAnswer) wire.SubjectAccessReview {
	spec := authorizationv1.SubjectAccessReviewSpec{User: req.User.Name, Groups: req.User.Groups, UID: req.User.UID}
	if len(req.User.Extra) > 0 {
		spec.Extra = map[string]authorizationv1.ExtraValue{}
		for k, v := range req.User.Extra {
			spec.Extra[k] = v
		}
	}
	if req.ResourceRequest {
		spec.ResourceAttributes = &authorizationv1.ResourceAttributes{Namespace: req.Namespace, Verb: req.Verb, Group: req.APIGroup,
			Version: req.APIVersion, Resource: req.Resource, Subresource: req.Subresource, Name: req.Name}
	} else {
		spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: req.Path, Verb: req.Verb}
	}
	sar := wire.SubjectAccessReview{TypeMeta: metav1.TypeMeta{APIVersion: "authorization.k8s.io/v1", Kind: "SubjectAccessReview"}}
	sar.Spec = wire.SubjectAccessReviewSpec{SubjectAccessReviewSpec: spec, AuthorizationOptions: &wire.AuthorizationOptions{HandledDecisionTypes: []wire.DecisionType{
		wire.DecisionTypeAllow, wire.DecisionTypeDeny, wire.DecisionTypeNoOpinion, wire.DecisionTypeConditionsMap, wire.DecisionTypeUnion}}}
	t, details := conditions.WireDetails(a.Answer)
	st := &sar.Status
	st.Allowed, st.Denied = t == engine.DecisionAllow, t == engine.DecisionDeny
	if details != nil {
		st.Reason, st.EvaluationError = details.Reason, details.EvaluationError
	}
	if t == engine.DecisionConditional {
		answer := a.Answer
		st.ConditionalDecision = &answer
	}
	return sar
}

// oneRequest is the request VERB RESOURCE [NAME] (or VERB --url PATH) of
// user u in namespace, the resource resolved as kcedar authorize resolves
// it; an ambiguous resource is noted on errw.
func oneRequest(schema *schemagen.Schema, u entities.UserInfo, args []string, url, namespace string, errw io.Writer) (*entities.Request, error) {
	spec := offline.RequestSpec{User: u.Name, Groups: u.Groups, UID: u.UID, Extra: u.Extra, Verb: args[0], Path: url}
	if url == "" {
		spec.Resource, spec.Namespace = args[1], namespace
		if len(args) == 3 {
			spec.Name = args[2]
		}
		res, err := spec.Resolve(schema)
		if err != nil {
			return nil, err
		}
		if res != nil && len(res.Others) > 0 {
			// Only an ambiguous resource is worth a word on stderr.
			var others []string
			for _, k := range res.Others {
				others = append(others, k.Resource+"."+k.Group)
			}
			safetext.Fprintf(errw, "warning: %s is %s; it is also %s: qualify the resource to pick another\n", args[1], res.GroupVersionResource(), strings.Join(others, ", "))
		}
	}
	req, _, err := (&offline.TestCase{Request: &spec}).Build()
	return req, err
}
