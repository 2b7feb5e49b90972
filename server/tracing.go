package server

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	admissionv1 "k8s.io/api/admission/v1"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/lib/tracing"
	"github.com/kcedar/kcedar/internal/wire"
)

// This file records the server's spans. With no TracerProvider (tracing
// off, the default) none of it runs: traced returns the handler itself and
// recordingSpan is nil, so a request costs no more than without tracing.

// tracerName is the instrumentation scope of the server's spans.
const tracerName = "github.com/kcedar/kcedar/server"

// traced wraps h, a webhook endpoint, in a server span named for endpoint
// (tracing.SpanName), the child of the caller's span when the request
// carries W3C trace context (kube-apiserver sends it to admission
// webhooks, not to the authorization webhook). Without a tracer it is h.
func (s *Server) traced(endpoint string, h http.Handler) http.Handler {
	if s.tracer == nil {
		return h
	}
	name := tracing.SpanName(endpoint)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, span := s.tracer.Start(tracing.Extract(r.Context(), r.Header), name, trace.WithSpanKind(trace.SpanKindServer))
		defer span.End()
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		h.ServeHTTP(rec, r.WithContext(ctx))
		if span.IsRecording() {
			span.SetAttributes(tracing.StatusCode.Int(rec.code))
			if rec.code >= http.StatusInternalServerError {
				span.SetStatus(codes.Error, http.StatusText(rec.code))
			}
		}
	})
}

// recordingSpan is the span of ctx when it records (tracing on and the
// request sampled); nil otherwise, and then nothing is recorded.
func (s *Server) recordingSpan(ctx context.Context) trace.Span {
	if s.tracer == nil {
		return nil
	}
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		return span
	}
	return nil
}

// requestAttributes are what lets an operator find an authorize span: the
// user, the number of groups, and what was asked.
func requestAttributes(req *entities.Request) []attribute.KeyValue {
	attrs := []attribute.KeyValue{tracing.UserName.String(req.User.Name), tracing.GroupsCount.Int(len(req.User.Groups)), tracing.Verb.String(req.Verb)}
	if !req.ResourceRequest {
		return append(attrs, tracing.Path.String(req.Path))
	}
	return append(attrs, tracing.APIGroup.String(req.APIGroup), tracing.Resource.String(req.Resource), tracing.Subresource.String(req.Subresource),
		tracing.Namespace.String(req.Namespace), tracing.Name.String(req.Name))
}

// decisionAttributes are d's answer (label), the ids of the policies that
// decided and the number of errors.
func decisionAttributes(label string, policies []*cedarlang.Policy, errs int) []attribute.KeyValue {
	ids := make([]string, len(policies))
	for i, p := range policies {
		ids[i] = p.ID
	}
	return []attribute.KeyValue{tracing.Decision.String(label), tracing.PolicyIDs.StringSlice(ids), tracing.Errors.Int(errs)}
}

// traceAuthorize records a SubjectAccessReview's request and answer on span
// (nil: not recording); st is what the engine reported (nil for another
// authorizer than kcedar's).
func traceAuthorize(span trace.Span, req *entities.Request, answer sarAnswer, st *engine.Stats, generation uint64) {
	if span == nil {
		return
	}
	span.SetAttributes(requestAttributes(req)...)
	d := answer.Decision
	span.SetAttributes(decisionAttributes(answer.Label, d.Policies(), len(d.Errors()))...)
	span.SetAttributes(tracing.Conditions.Int(conditionsSent(answer.Status)))
	if st != nil {
		span.SetAttributes(tracing.Cache.String(st.Cache.String()), tracing.Candidates.Int(st.Candidates), tracing.Generation.Int64(int64(generation)))
	}
}

// conditionsSent counts the conditions an answer carries.
func conditionsSent(status wire.SubjectAccessReviewStatus) int {
	return conditionsIn(status.ConditionalDecision)
}

// conditionsIn counts the conditions of a decision, its union's included.
func conditionsIn(d *wire.ConditionsAwareDecision) int {
	if d == nil {
		return 0
	}
	n := 0
	if m := d.ConditionsMap; m != nil {
		n = len(m.DenyConditions) + len(m.NoOpinionConditions) + len(m.AllowConditions)
	}
	for i := range d.Union {
		n += conditionsIn(&d.Union[i].Decision)
	}
	return n
}

// traceConditions records the callback's request and decision on span.
func traceConditions(span trace.Span, req *wire.AuthorizationConditionsRequest, v engine.Decision) {
	if span == nil {
		return
	}
	n := conditionsIn(req.Decision)
	span.SetAttributes(decisionAttributes(label(v), v.Policies(), len(v.Errors()))...)
	span.SetAttributes(tracing.Conditions.Int(n))
	if a := req.AdmissionRequest; a != nil {
		span.SetAttributes(admissionAttributes(a)...)
	}
}

// admissionAttributes are what an AdmissionRequest is about.
func admissionAttributes(a *admissionv1.AdmissionRequest) []attribute.KeyValue {
	return []attribute.KeyValue{tracing.UserName.String(a.UserInfo.Username), tracing.GroupsCount.Int(len(a.UserInfo.Groups)),
		tracing.Operation.String(string(a.Operation)), tracing.APIGroup.String(a.Resource.Group), tracing.Resource.String(a.Resource.Resource),
		tracing.Subresource.String(a.SubResource), tracing.Namespace.String(a.Namespace), tracing.Name.String(a.Name)}
}

// traceAdmit records an admission review's request and decision on span.
func traceAdmit(span trace.Span, a *admissionv1.AdmissionRequest, v engine.Decision) {
	if span == nil {
		return
	}
	span.SetAttributes(admissionAttributes(a)...)
	span.SetAttributes(decisionAttributes(label(v), v.Policies(), len(v.Errors()))...)
}
