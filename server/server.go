package server

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// MaxBodyBytes bounds every request body.
const MaxBodyBytes = 1 << 20

// Options configure a Server and its handlers. Each handler reads the
// fields that concern it.
type Options struct {
	// Logger gets the handlers' log lines; nil: slog.Default().
	Logger *slog.Logger
	// Registerer, if set, gets the handlers' metrics (serve them with the
	// registry's own handler); nil: no metrics.
	Registerer prometheus.Registerer
	// TracerProvider, if set, traces every webhook call: a span per call
	// (kcedar.authorize, kcedar.conditions, kcedar.admit,
	// kcedar.validate_policy, ...), the child of the caller's span when the
	// request carries W3C trace context, with the decision, the deciding
	// policies and the authorizer's cedar.Details as attributes. nil: no
	// tracing, at no cost.
	TracerProvider trace.TracerProvider
	// DecisionLog, if set, gets a line per authorization decision.
	DecisionLog *DecisionLog
	// RequireClientCert: the webhook endpoints serve only clients with a
	// verified certificate (TLSOptions.ClientCAFile).
	RequireClientCert bool

	// ConditionsEvaluator evaluates the conditions callback; nil: the
	// authorizer itself.
	ConditionsEvaluator ConditionsEvaluator
	// AdmissionEnforcer, if set, turns admission enforcement on, for
	// clusters without conditional authorization: a SubjectAccessReview it
	// decides as enforced is answered Allow (its admission webhook, an
	// Admitter, checks the conditions), for a user AdmissionWebhookSees and
	// a group version AggregatedAPI leaves to the API server itself.
	AdmissionEnforcer AdmissionEnforcer
	// AdmissionWebhookSees reports whether the admission webhook that
	// enforces conditional allows is verified in place and sees the writes
	// of the user of username in groups (its matchConditions leave some
	// identities out). nil: never.
	AdmissionWebhookSees func(username string, groups []string) bool
	// AggregatedAPI reports whether a group and version may be served by
	// an aggregated API server (its APIService names a service) rather
	// than by the API server itself, which then proxies the requests past
	// its admission webhooks: a conditional allow on them is never
	// answered Allow. version "" or "*" is any version of the group, group
	// "*" any group. nil: every group version may be.
	AggregatedAPI func(group, version string) bool
	// Admitter, if set, serves POST /v1/admit, the admission webhook that
	// enforces the conditions.
	Admitter Admitter
	// Reviewer, if set, serves POST /v1/resourceaccessreview and
	// /v1/rulesreview.
	Reviewer Reviewer
	// PolicyAdmission, if set, serves POST /v1/validate-policy: the
	// validating webhook for kcedar's own policy objects
	// (cedar.FileSource.PolicyWebhook).
	PolicyAdmission http.Handler

	// Ready, if set, must return nil for /readyz to report ready.
	Ready func() error
	// Status, if set, says what serves, in /readyz's answer ("serving 12
	// policies ...", cedar.SourceStatus.String).
	Status func() string
	// Degraded, if set, describes a problem that leaves the server ready
	// but needs an operator: /readyz reports it as "degraded". "" when
	// there is none.
	Degraded func() string
}

// Server answers kube-apiserver's webhook calls: the handlers of the
// endpoints Options gives it pieces for, on one mux, with health and
// readiness.
type Server struct {
	mux      *http.ServeMux
	logger   *slog.Logger
	ready    func() error
	status   func() string
	degraded func() string
	// draining: shutting down; /readyz answers 503 so load balancers and
	// kube-apiserver's endpoints stop sending new requests.
	draining atomic.Bool
}

// New returns a server deciding SubjectAccessReviews with authz
// (POST /v1/authorize) and the conditions callback with
// Options.ConditionsEvaluator, else authz (POST /v1/conditions); the
// admission and access review endpoints are served when Options gives
// their Admitter and Reviewer; GET /healthz, /livez and /readyz always.
func New(authz authorizer.Authorizer, opts Options) (*Server, error) {
	if authz == nil {
		return nil, errors.New("server.New: no authorizer")
	}
	e, err := newEndpoint(opts)
	if err != nil {
		return nil, err
	}
	s := &Server{mux: http.NewServeMux(), logger: e.logger, ready: opts.Ready, status: opts.Status, degraded: opts.Degraded}
	s.mux.Handle("POST /v1/authorize", e.sarHandler(authz, opts))
	ev := opts.ConditionsEvaluator
	if ev == nil {
		ev = authz
	}
	s.mux.Handle("POST /v1/conditions", e.conditionsHandler(ev))
	if opts.Admitter != nil {
		s.mux.Handle("POST /v1/admit", e.admissionHandler(opts.Admitter))
	}
	if opts.Reviewer != nil {
		rar, srr := e.reviewHandlers(opts.Reviewer)
		s.mux.Handle("POST /v1/resourceaccessreview", rar)
		s.mux.Handle("POST /v1/rulesreview", srr)
	}
	if opts.PolicyAdmission != nil {
		s.mux.Handle("POST /v1/validate-policy", e.webhook("validate-policy", opts.PolicyAdmission.ServeHTTP))
	}
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	s.mux.HandleFunc("GET /livez", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	s.mux.HandleFunc("GET /readyz", s.handleReadyz)
	return s, nil
}

// NewSubjectAccessReviewHandler is the handler of kube-apiserver's
// authorization webhook (SubjectAccessReview), deciding with authz: with
// its conditions for a caller that takes them (KEP-5681), else without
// them (Deny if a deny condition remains, else NoOpinion), or
// with Options.AdmissionEnforcer for a cluster that enforces them in
// admission.
func NewSubjectAccessReviewHandler(authz authorizer.Authorizer, opts Options) (http.Handler, error) {
	if authz == nil {
		return nil, errors.New("server.NewSubjectAccessReviewHandler: no authorizer")
	}
	e, err := newEndpoint(opts)
	if err != nil {
		return nil, err
	}
	return e.sarHandler(authz, opts), nil
}

// NewConditionsReviewHandler is the handler of the conditions callback
// (AuthorizationConditionsReview), evaluating with ev.
func NewConditionsReviewHandler(ev ConditionsEvaluator, opts Options) (http.Handler, error) {
	if ev == nil {
		return nil, errors.New("server.NewConditionsReviewHandler: no evaluator")
	}
	e, err := newEndpoint(opts)
	if err != nil {
		return nil, err
	}
	return e.conditionsHandler(ev), nil
}

// NewAdmissionHandler is the handler of the validating admission webhook
// (AdmissionReview) that enforces conditions with a.
func NewAdmissionHandler(a Admitter, opts Options) (http.Handler, error) {
	if a == nil {
		return nil, errors.New("server.NewAdmissionHandler: no admitter")
	}
	e, err := newEndpoint(opts)
	if err != nil {
		return nil, err
	}
	return e.admissionHandler(a), nil
}

// NewAccessReviewHandlers are the handlers of the access reviews, answered
// by r: ResourceAccessReview (who can) and SubjectRulesReview (what can).
func NewAccessReviewHandlers(r Reviewer, opts Options) (resourceAccessReview, subjectRulesReview http.Handler, err error) {
	if r == nil {
		return nil, nil, errors.New("server.NewAccessReviewHandlers: no reviewer")
	}
	e, err := newEndpoint(opts)
	if err != nil {
		return nil, nil, err
	}
	resourceAccessReview, subjectRulesReview = e.reviewHandlers(r)
	return resourceAccessReview, subjectRulesReview, nil
}

// Drain makes /readyz answer 503 from now on: the first step of a graceful
// shutdown, before the listener closes.
func (s *Server) Drain() { s.draining.Store(true) }

// ServeHTTP implements http.Handler; no panic escapes it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		if v := recover(); v != nil {
			s.logger.Error("panic while serving", "path", r.URL.Path, "panic", v, "stack", string(debug.Stack()))
			http.Error(w, "internal error", http.StatusInternalServerError)
		}
	}()
	s.mux.ServeHTTP(w, r)
}

// handleReadyz: 503 while shutting down or while Ready says not ready;
// 200 otherwise, "degraded" with what Degraded reports.
func (s *Server) handleReadyz(w http.ResponseWriter, _ *http.Request) {
	if s.draining.Load() {
		http.Error(w, "not ready: shutting down", http.StatusServiceUnavailable)
		return
	}
	if s.ready != nil {
		if err := s.ready(); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
	}
	status := ""
	if s.status != nil {
		status = s.status()
	}
	if s.degraded != nil {
		if d := s.degraded(); d != "" {
			fmt.Fprintf(w, "degraded: %s; %s\n", status, d)
			return
		}
	}
	if status == "" {
		io.WriteString(w, "ok\n")
		return
	}
	fmt.Fprintf(w, "ok: %s\n", status)
}
