package policyobjects

import (
	"context"

	"go.opentelemetry.io/otel/trace"
	admissionv1 "k8s.io/api/admission/v1"

	"github.com/kcedar/kcedar/internal/lib/tracing"
)

// traceReview records a reviewed write on the span of ctx (the server's
// kcedar.validate_policy span), when it records: who wrote what, and the
// answer (Allow, or Deny and the refusal's reason).
func traceReview(ctx context.Context, req *admissionv1.AdmissionRequest, allowed bool, refusal, object string) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	decision := "Allow"
	if !allowed {
		decision = "Deny"
	}
	span.SetAttributes(tracing.Decision.String(decision), tracing.PolicyObject.String(object), tracing.Operation.String(string(req.Operation)),
		tracing.UserName.String(req.UserInfo.Username), tracing.GroupsCount.Int(len(req.UserInfo.Groups)), tracing.Namespace.String(req.Namespace))
	if !allowed {
		span.SetAttributes(tracing.Refusal.String(refusal))
	}
}

// tracePolicyIDs records the ids of the policies a written object holds.
func tracePolicyIDs(ctx context.Context, ids []string) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(tracing.PolicyIDs.StringSlice(ids))
	}
}
