package server

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	admissionv1 "k8s.io/api/admission/v1"

	"github.com/kcedar/kcedar/cedar"
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
func (e *endpoint) traced(endpoint string, h http.Handler) http.Handler {
	if e.tracer == nil {
		return h
	}
	name := tracing.SpanName(endpoint)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, span := e.tracer.Start(tracing.Extract(r.Context(), r.Header), name, trace.WithSpanKind(trace.SpanKindServer))
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
func (e *endpoint) recordingSpan(ctx context.Context) trace.Span {
	if e.tracer == nil {
		return nil
	}
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		return span
	}
	return nil
}

// requestAttributes are what lets an operator find an authorize span: the
// user, the number of groups, and what was asked.
func requestAttributes(spec *wire.SubjectAccessReviewSpec) []attribute.KeyValue {
	attrs := []attribute.KeyValue{tracing.UserName.String(spec.User), tracing.GroupsCount.Int(len(spec.Groups))}
	if na := spec.NonResourceAttributes; na != nil {
		return append(attrs, tracing.Verb.String(na.Verb), tracing.Path.String(na.Path))
	}
	ra := spec.ResourceAttributes
	namespace, name := decidedName(ra)
	return append(attrs, tracing.Verb.String(ra.Verb), tracing.APIGroup.String(ra.Group), tracing.Resource.String(ra.Resource),
		tracing.Subresource.String(ra.Subresource), tracing.Namespace.String(namespace), tracing.Name.String(name))
}

// decisionAttributes are an answer's label, the ids of the policies that
// decided and the number of errors.
func decisionAttributes(label string, details *cedar.Details) []attribute.KeyValue {
	return []attribute.KeyValue{tracing.Decision.String(label), tracing.PolicyIDs.StringSlice(details.Policies), tracing.Errors.Int(len(details.Errors))}
}

// traceAuthorize records a SubjectAccessReview's request and answer on span
// (nil: not recording), and what the authorizer's Details say of the
// decision (the cache, the candidates and the generation only when kcedar
// decided).
func traceAuthorize(span trace.Span, spec *wire.SubjectAccessReviewSpec, answer sarAnswer, details *cedar.Details) {
	if span == nil {
		return
	}
	span.SetAttributes(requestAttributes(spec)...)
	span.SetAttributes(decisionAttributes(answer.Label, details)...)
	span.SetAttributes(tracing.Conditions.Int(conditionsSent(answer.Status)))
	if details.Cache != "" {
		span.SetAttributes(tracing.Cache.String(details.Cache), tracing.Candidates.Int(details.Candidates), tracing.Generation.Int64(int64(details.Generation)))
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
func traceConditions(span trace.Span, req *wire.AuthorizationConditionsRequest, label string, details *cedar.Details) {
	if span == nil {
		return
	}
	n := conditionsIn(req.Decision)
	span.SetAttributes(decisionAttributes(label, details)...)
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
func traceAdmit(span trace.Span, a *admissionv1.AdmissionRequest, label string, details *cedar.Details) {
	if span == nil {
		return
	}
	span.SetAttributes(admissionAttributes(a)...)
	span.SetAttributes(decisionAttributes(label, details)...)
}
