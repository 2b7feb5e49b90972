// Package server serves kcedar over HTTPS: SubjectAccessReview decisions, the
// conditions callback, the admission webhook, health, readiness and metrics.
package server
