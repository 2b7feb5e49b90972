package kube138

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	authorizationv1 "k8s.io/api/authorization/v1"
	authorizationv1alpha1 "k8s.io/api/authorization/v1alpha1"
	"k8s.io/apimachinery/pkg/util/sets"
	apiserverauthorizationv1 "k8s.io/apiserver/pkg/apis/authorization/v1"
	authorizationvalidation "k8s.io/apiserver/pkg/apis/authorization/validation"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/kubernetes/scheme"
)

// exchange is one call of the webhook authorizer to kcedar: the path, what
// it sent and what came back.
type exchange struct {
	path              string
	status            int
	request, response []byte
	err               error
}

// wireLog records the exchanges of the webhook authorizer's clients (a
// transport wrapper; the clients are otherwise as upstream builds them).
type wireLog struct {
	mu        sync.Mutex
	exchanges []exchange
}

func (w *wireLog) wrap(rt http.RoundTripper) http.RoundTripper {
	return recordingTransport{next: rt, log: w}
}

// take returns the exchanges recorded since the last take.
func (w *wireLog) take() []exchange {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.exchanges
	w.exchanges = nil
	return out
}

type recordingTransport struct {
	next http.RoundTripper
	log  *wireLog
}

func (r recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var sent []byte
	if req.Body != nil {
		var err error
		if sent, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		req.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(sent))
	}
	resp, err := r.next.RoundTrip(req)
	ex := exchange{path: req.URL.Path, request: sent, err: err}
	if resp != nil {
		data, readErr := io.ReadAll(resp.Body)
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(data))
		ex.status, ex.response = resp.StatusCode, data
		if readErr != nil && ex.err == nil {
			ex.err = readErr
		}
	}
	r.log.mu.Lock()
	r.log.exchanges = append(r.log.exchanges, ex)
	r.log.mu.Unlock()
	return resp, err
}

// wireCounts counts the answers checked.
type wireCounts struct{ reviews, conditionalReviews, callbacks int }

// check validates the answers of exs as the webhook authorizer does, with
// upstream's validation (handwritten and declarative), and checks what
// upstream requires besides: a callback's uid is the request's, its
// decision one the conditions could evaluate to; no condition id or type in
// the domains the API reserves for Kubernetes. It returns what is wrong,
// each naming the exchange.
func (n *wireCounts) check(ctx context.Context, exs []exchange) []string {
	var problems []string
	for _, ex := range exs {
		var p []string
		switch {
		case ex.err != nil:
			p = []string{fmt.Sprintf("transport error %v", ex.err)}
		case ex.status != http.StatusOK:
			p = []string{fmt.Sprintf("HTTP %d", ex.status)}
		case strings.HasSuffix(ex.path, "/v1/authorize"):
			n.reviews++
			p = n.checkReview(ctx, ex)
		case strings.HasSuffix(ex.path, "/v1/conditions"):
			n.callbacks++
			p = checkCallback(ctx, ex)
		default:
			p = []string{"unexpected path"}
		}
		for _, msg := range p {
			problems = append(problems, fmt.Sprintf("POST %s: %s\n    sent:     %s\n    answered: %s", ex.path, msg, ex.request, ex.response))
		}
	}
	return problems
}

func (n *wireCounts) checkReview(ctx context.Context, ex exchange) []string {
	var sent, answered authorizationv1.SubjectAccessReview
	if err := json.Unmarshal(ex.request, &sent); err != nil {
		return []string{fmt.Sprintf("the request does not decode: %v", err)}
	}
	if _, _, err := scheme.Codecs.UniversalDeserializer().Decode(ex.response, nil, &answered); err != nil {
		return []string{fmt.Sprintf("the answer does not decode as the webhook authorizer decodes it: %v", err)}
	}
	if answered.Status.ConditionalDecision != nil {
		n.conditionalReviews++
	}
	// As ConditionsAwareAuthorize validates it: its own request with the
	// answer's status.
	review := sent.DeepCopy()
	review.Status = answered.Status
	var problems []string
	for _, e := range authorizationvalidation.CombinedValidateSubjectAccessReviewCreate(ctx, review) {
		problems = append(problems, "upstream validation: "+e.Error())
	}
	if d := answered.Status.ConditionalDecision; d != nil {
		problems = append(problems, reservedNames(*d)...)
	}
	return problems
}

func checkCallback(ctx context.Context, ex exchange) []string {
	var sent, answered authorizationv1alpha1.AuthorizationConditionsReview
	if err := json.Unmarshal(ex.request, &sent); err != nil || sent.Request == nil || sent.Request.AdmissionRequest == nil {
		return []string{fmt.Sprintf("the request does not decode: %v", err)}
	}
	if _, _, err := scheme.Codecs.UniversalDeserializer().Decode(ex.response, nil, &answered); err != nil {
		return []string{fmt.Sprintf("the answer does not decode as the webhook authorizer decodes it: %v", err)}
	}
	if answered.Response == nil {
		return []string{"no response"}
	}
	var problems []string
	for _, e := range authorizationvalidation.CombinedValidateAuthorizationConditionsReviewCreate(ctx, &answered) {
		problems = append(problems, "upstream validation: "+e.Error())
	}
	if got, want := answered.Response.UID, sent.Request.AdmissionRequest.UID; got != want {
		problems = append(problems, fmt.Sprintf("response uid %q, the request's %q", got, want))
	}
	asked := apiserverauthorizationv1.ToAuthorizerConditionsAwareDecision(sent.Request.Decision, func(err error) authorizer.ConditionsAwareDecision {
		return authorizer.ConditionsAwareDecisionDeny("", err)
	})
	if got := decisionOfType(answered.Response.Decision.Type); !asked.PossibleDecisions().Has(got) {
		problems = append(problems, fmt.Sprintf("answered %s, but the decision could only evaluate to %v", answered.Response.Decision.Type, sets.List(asked.PossibleDecisions())))
	}
	return problems
}

// decisionOfType is the concrete decision of a decision type (Deny for any
// other, as upstream fails closed).
func decisionOfType(t authorizationv1.ConditionsAwareDecisionType) authorizer.Decision {
	switch t {
	case authorizationv1.ConditionsAwareDecisionTypeAllow:
		return authorizer.DecisionAllow
	case authorizationv1.ConditionsAwareDecisionTypeNoOpinion:
		return authorizer.DecisionNoOpinion
	}
	return authorizer.DecisionDeny
}

// reservedNames reports condition ids and types in the domains the API
// reserves for Kubernetes (*.k8s.io, *.kubernetes.io; k8s.io/api's
// authorization/v1 Condition), which upstream's validation does not check.
func reservedNames(d authorizationv1.ConditionsAwareDecision) []string {
	var problems []string
	if m := d.ConditionsMap; m != nil {
		for _, list := range [][]authorizationv1.Condition{m.DenyConditions, m.NoOpinionConditions, m.AllowConditions} {
			for _, c := range list {
				for _, name := range []string{c.ID, c.Type} {
					if isReserved(name) {
						problems = append(problems, fmt.Sprintf("condition %q: %q is in a domain reserved for Kubernetes", c.ID, name))
					}
				}
			}
		}
	}
	for _, u := range d.Union {
		problems = append(problems, reservedNames(u.Decision)...)
	}
	return problems
}

func isReserved(labelKey string) bool {
	domain, _, ok := strings.Cut(labelKey, "/")
	if !ok {
		return false
	}
	for _, r := range []string{"k8s.io", "kubernetes.io"} {
		if domain == r || strings.HasSuffix(domain, "."+r) {
			return true
		}
	}
	return false
}
