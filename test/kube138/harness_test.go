package kube138

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	authorizationcel "k8s.io/apiserver/pkg/authorization/cel"
	"k8s.io/apiserver/pkg/endpoints/filters"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/tools/offline"
	"github.com/kcedar/kcedar/residual"
)

// kcedarWebhookName is the webhook authorizer `kcedar manifests` configures.
const kcedarWebhookName = "kcedar"

// harness is `kcedar serve` on one policy set and kube-apiserver 1.38's
// authorization in front of it, built from `kcedar manifests
// --conditions-review`: the webhook authorizer, the union around it, the
// conditions-aware authorization filter and the conditions enforcer; and the
// oracle, deciding the same policies offline.
type harness struct {
	kcedar   *kcedarServer
	webhook  authorizer.Authorizer
	matcher  *authorizationcel.CELMatcher
	union    authorizer.Authorizer
	enforcer admission.ValidationInterface
	wire     *wireLog
	counts   wireCounts
	oracle   *oracle
	stats    map[string]int
	// errors are the bodies of the requests the filter or admission
	// answered 500 (an authorizer's error with a decision other than
	// Allow), which the tests log.
	errors []string
	// inProcess is set when webhook is kcedar's in-process authorizer.
	// Neither it nor the webhook gives an evaluation error to a caller of
	// conditional authorization: a policy's error is part of the decision
	// (in its reason), not the authorizer's, which upstream answers 500.
	inProcess bool
}

// newHarness serves the policies at paths with kcedar and builds the API
// server's side from its manifests, written with manifestFlags besides
// --conditions-review. The AuthorizationConfiguration must pass upstream's
// validation.
func newHarness(t *testing.T, paths []string, manifestFlags ...string) *harness {
	t.Helper()
	h := &harness{kcedar: startKcedar(t, paths), wire: &wireLog{}, oracle: newOracle(t, paths), stats: map[string]int{}}
	configPath, _ := h.kcedar.manifests(t, manifestFlags...)
	cfg, problems := loadAuthorizationConfiguration(t, configPath)
	if len(problems) > 0 {
		t.Fatalf("kcedar manifests %v: kube-apiserver 1.38 refuses the AuthorizationConfiguration:\n  %s", manifestFlags, strings.Join(problems, "\n  "))
	}
	for _, a := range cfg.Authorizers {
		if a.Type == "Webhook" && a.Name == kcedarWebhookName {
			h.webhook, h.matcher = webhookFromConfiguration(t, a, h.wire)
		}
	}
	if h.webhook == nil {
		t.Fatalf("no webhook authorizer %q in %s", kcedarWebhookName, configPath)
	}
	h.union = unionOf(t, cfg, kcedarWebhookName, h.webhook)
	h.enforcer = newConditionsEnforcer(t)
	return h
}

// withDefaultAdmission gives a request the conditions-aware filter
// classifies, and that has no admission data, the operation its verb
// arrives as with no objects: admission always runs for it.
func withDefaultAdmission(c requestCase) requestCase {
	a := c.attributes()
	if c.admission == nil && conditionalRequestClassifier(a) {
		c.admission = &admissionData{operation: admission.Operation(offline.DefaultOperation(a.Verb, a.Subresource))}
	}
	return c
}

// check decides c through upstream's code and compares every answer with
// the oracle's: the webhook authorizer's conditions-aware and plain
// decisions, its callback's evaluation of the conditions, the request's
// fate through the union, the filter and the enforcer, the library's
// expectations, and upstream's validation of every answer on the wire. It
// returns what differed.
func (h *harness) check(ctx context.Context, c requestCase) []string {
	c = withDefaultAdmission(c)
	report, err := h.oracle.decide(&c)
	if err != nil {
		return []string{fmt.Sprintf("the oracle cannot read the case: %v", err)}
	}
	h.wire.take()
	attrs := c.attributes()
	matched := true
	if h.matcher != nil {
		if matched, err = h.matcher.Eval(ctx, &authorizationv1.SubjectAccessReview{Spec: c.spec}); err != nil {
			return []string{fmt.Sprintf("match conditions: %v", err)}
		}
	}
	want := report
	if !matched { // the match conditions skip kcedar: NoOpinion, nothing sent
		want = engine.Report{Decision: "NoOpinion", WithoutConditions: "NoOpinion", Outcome: "NoOpinion"}
	}
	// Evaluation errors are part of the decision (in its reason), never an
	// authorizer error, in process and over the wire.
	want.EvaluationError, want.OutcomeError = "", ""
	var problems []string
	cad := h.webhook.ConditionsAwareAuthorize(ctx, attrs)
	h.stats["decision "+caName(cad)]++
	if carriesGroup(cad) {
		h.stats["group condition"]++
	}
	problems = append(problems, compareConditionsAware(cad, want)...)
	d, reason, err := h.webhook.Authorize(ctx, attrs)
	if decisionName(d) != want.WithoutConditions || err != nil {
		problems = append(problems, fmt.Sprintf("Authorize (a caller without conditions): %s %q, error %v; kcedar authorize: %s", decisionName(d), reason, err, want.WithoutConditions))
	}
	ev := h.evaluate(ctx, &c, cad)
	if ev.ok {
		h.stats["callback on "+string(c.admission.operation)]++
		h.stats["callback for "+attrs.Verb]++
	}
	problems = append(problems, h.checkCallback(ev, want)...)
	problems = append(problems, h.checkRequest(ctx, &c, want, matched)...)
	problems = append(problems, checkExpectations(&c, cad, d, ev)...)
	return append(problems, h.counts.check(ctx, h.wire.take())...)
}

// compareConditionsAware compares the webhook authorizer's conditions-aware
// decision with kcedar authorize's.
func compareConditionsAware(cad authorizer.ConditionsAwareDecision, want engine.Report) []string {
	got := caName(cad)
	if got == "ConditionsMap" || got == "Union" {
		got = "Conditional"
	}
	switch {
	case got != want.Decision:
		return []string{fmt.Sprintf("ConditionsAwareAuthorize: %s; kcedar authorize: %s (%q%s)", cad, want.Decision, want.Reason, errorNote(want.EvaluationError))}
	case cad.IsUnconditional() && (cad.Error() != nil) != (want.EvaluationError != ""):
		return []string{fmt.Sprintf("ConditionsAwareAuthorize: %s; kcedar authorize: %s%s", cad, want.Decision, errorNote(want.EvaluationError))}
	case cad.Reason() == "failed closed":
		return []string{fmt.Sprintf("ConditionsAwareAuthorize failed closed: %s", cad)}
	}
	return nil
}

func errorNote(evalErr string) string {
	if evalErr == "" {
		return ""
	}
	return ", evaluation error " + evalErr
}

// evaluate is the webhook authorizer's EvaluateConditions of cad with c's
// admission data, as the conditions enforcer calls it; ok is false when
// there is nothing to evaluate.
func (h *harness) evaluate(ctx context.Context, c *requestCase, cad authorizer.ConditionsAwareDecision) evaluation {
	attrs := c.admissionAttributes(h.oracle.schema)
	if cad.IsUnconditional() || attrs == nil {
		return evaluation{}
	}
	versioned, err := admission.NewVersionedAttributes(attrs, attrs.GetKind(), objectInterfaces)
	if err != nil {
		return evaluation{ok: true, decision: authorizer.DecisionDeny, err: err}
	}
	d, reason, err := h.webhook.EvaluateConditions(ctx, cad, versioned)
	return evaluation{ok: true, decision: d, reason: reason, err: err}
}

// evaluation is an EvaluateConditions result.
type evaluation struct {
	ok       bool
	decision authorizer.Decision
	reason   string
	err      error
}

// checkCallback compares the callback's evaluation of a conditional
// decision with the oracle's outcome.
func (h *harness) checkCallback(ev evaluation, want engine.Report) []string {
	if !ev.ok {
		return nil
	}
	h.stats["callback "+decisionName(ev.decision)]++
	if decisionName(ev.decision) != want.Outcome || ev.reason == "failed closed" || (ev.err != nil) != (want.OutcomeError != "") {
		return []string{fmt.Sprintf("EvaluateConditions (the callback): %s %q, error %v; kcedar authorize's outcome: %s %q%s",
			decisionName(ev.decision), ev.reason, ev.err, want.Outcome, want.OutcomeReason, errorNote(want.OutcomeError))}
	}
	return nil
}

// checkRequest sends c through kube-apiserver's conditions-aware
// authorization filter (the union) and, where admission sees it, the
// conditions enforcer, and compares its fate with what the union should
// make of the oracle's answers.
func (h *harness) checkRequest(ctx context.Context, c *requestCase, want engine.Report, matched bool) []string {
	code, body := h.serve(ctx, c)
	wantAllowed, chain := expectedAllowed(c, want, matched)
	h.stats[fmt.Sprintf("HTTP %d", code)]++
	if code == http.StatusInternalServerError {
		h.errors = append(h.errors, fmt.Sprintf("%s: %s", c.name, strings.TrimSpace(body)))
	}
	if (code == http.StatusOK) != wantAllowed || (code != http.StatusOK && code != http.StatusForbidden) {
		return []string{fmt.Sprintf("through the filter and admission: HTTP %d %s; want allowed=%v (%s)", code, strings.TrimSpace(body), wantAllowed, chain)}
	}
	return nil
}

// serve is the request c through upstream's WithConditionsAwareAuthorization
// filter around a handler that runs the AuthorizationConditionsEnforcer on
// c's admission data: the HTTP status and body.
func (h *harness) serve(ctx context.Context, c *requestCase) (int, string) {
	attrs := c.attributes()
	info := &request.RequestInfo{IsResourceRequest: attrs.ResourceRequest, Path: attrs.Path, Verb: attrs.Verb, APIGroup: attrs.APIGroup,
		APIVersion: attrs.APIVersion, Namespace: attrs.Namespace, Resource: attrs.Resource, Subresource: attrs.Subresource, Name: attrs.Name,
		LabelSelector: labelSelectorString(attrs)}
	info.FieldSelector = fieldSelectorString(attrs)
	ctx = request.WithUser(request.WithRequestInfo(ctx, info), attrs.User)
	admitted := c.admissionAttributes(h.oracle.schema)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if admitted != nil {
			if err := h.enforcer.Validate(r.Context(), admitted, objectInterfaces); err != nil {
				code := http.StatusInternalServerError
				if s := apierrors.APIStatus(nil); errors.As(err, &s) {
					code = int(s.Status().Code)
				}
				http.Error(w, err.Error(), code)
				return
			}
		}
		w.WriteHeader(http.StatusOK)
	})
	filter, err := filters.WithConditionsAwareAuthorization(handler, h.union, scheme.Codecs, conditionalRequestClassifier)
	if err != nil {
		return 0, err.Error()
	}
	rec := httptest.NewRecorder()
	filter.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/kube138", nil).WithContext(ctx))
	return rec.Code, rec.Body.String()
}

// labelSelectorString is the label selector of attrs as the request's query
// carries it (the filter parses it back).
func labelSelectorString(attrs authorizer.AttributesRecord) string {
	if len(attrs.LabelSelectorRequirements) == 0 {
		return ""
	}
	return labels.NewSelector().Add(attrs.LabelSelectorRequirements...).String()
}

// fieldSelectorString is the field selector of attrs as the request's query
// carries it.
func fieldSelectorString(attrs authorizer.AttributesRecord) string {
	var terms []fields.Selector
	for _, r := range attrs.FieldSelectorRequirements {
		if r.Operator == selection.NotEquals {
			terms = append(terms, fields.OneTermNotEqualSelector(r.Field, r.Value))
		} else {
			terms = append(terms, fields.OneTermEqualSelector(r.Field, r.Value))
		}
	}
	if len(terms) == 0 {
		return ""
	}
	return fields.AndSelectors(terms...).String()
}

// expectedAllowed is the union's verdict on c given kcedar's answers (want)
// and the other authorizers': the first decision that is not NoOpinion, in
// the order system:masters, freeze, kcedar, RBAC (Node has no opinion).
// Conditions are evaluated on the admission data where the filter asks for
// them; elsewhere they are folded. It also says which authorizer decided.
func expectedAllowed(c *requestCase, want engine.Report, matched bool) (bool, string) {
	attrs := c.attributes()
	if slices.Contains(attrs.User.GetGroups(), user.SystemPrivilegedGroup) {
		return true, "system:masters"
	}
	classified := conditionalRequestClassifier(attrs)
	if freezeApplies(attrs) {
		d := authorizer.DecisionDeny // folded
		if classified {
			d = freezeOutcome(c.admission.object, c.admission.oldObject)
		}
		if d != authorizer.DecisionNoOpinion {
			return d == authorizer.DecisionAllow, "freeze: " + decisionName(d)
		}
	}
	kcedar := want.WithoutConditions
	if classified {
		kcedar = want.Outcome
	}
	if matched && kcedar != "NoOpinion" {
		return kcedar == "Allow", "kcedar: " + kcedar
	}
	d := rbacDecision(attrs)
	return d == authorizer.DecisionAllow, "rbac: " + decisionName(d)
}

// checkExpectations compares the webhook authorizer's answers with what a
// library test file expects (its decision, outcome and answer without
// conditions), where the file gives them and they do not depend on
// Namespace objects (which kcedar serve, without a cluster, cannot know).
func checkExpectations(c *requestCase, cad authorizer.ConditionsAwareDecision, plain authorizer.Decision, ev evaluation) []string {
	tc := c.expect
	if tc == nil {
		return nil
	}
	var problems []string
	got := caName(cad)
	if got == "ConditionsMap" || got == "Union" {
		got = "Conditional"
	}
	if got != tc.Expect {
		problems = append(problems, fmt.Sprintf("the test file expects %s; over the webhook: %s", tc.Expect, cad))
	}
	outcome := got
	if ev.ok {
		outcome = decisionName(ev.decision)
	}
	if tc.Outcome != "" && outcome != tc.Outcome {
		problems = append(problems, fmt.Sprintf("the test file expects the outcome %s; over the webhook: %s %q %v", tc.Outcome, outcome, ev.reason, ev.err))
	}
	if tc.WithoutConditions != "" && decisionName(plain) != tc.WithoutConditions {
		problems = append(problems, fmt.Sprintf("the test file expects %s without conditions; over the webhook: %s", tc.WithoutConditions, decisionName(plain)))
	}
	return problems
}

// caName is the type of a conditions-aware decision.
// carriesGroup reports whether a ConditionsMap carries one of kcedar's
// group conditions (several policies of one form).
func carriesGroup(d authorizer.ConditionsAwareDecision) bool {
	if !d.IsConditionsMap() {
		return false
	}
	m := d.ConditionsMap()
	for _, list := range []iter.Seq[authorizer.Condition]{m.DenyConditions(), m.AllowConditions()} {
		for c := range list {
			if c.GetType() == residual.GroupConditionType {
				return true
			}
		}
	}
	return false
}

func caName(d authorizer.ConditionsAwareDecision) string {
	switch {
	case d.IsAllow():
		return "Allow"
	case d.IsNoOpinion():
		return "NoOpinion"
	case d.IsConditionsMap():
		return "ConditionsMap"
	case d.IsUnion():
		return "Union"
	}
	return "Deny"
}

func decisionName(d authorizer.Decision) string { return d.String() }
