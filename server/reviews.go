package server

import (
	"errors"
	"net/http"

	"github.com/kcedar/kcedar/cedar"
	"github.com/kcedar/kcedar/internal/accessreview"
)

// Access reviews reveal the policies: serve them only to trusted clients
// (Options.RequireClientCert applies to them as to /v1/authorize).

// reviewHandlers are the review endpoints, answered by rv.
func (e *endpoint) reviewHandlers(rv Reviewer) (resourceAccessReview, subjectRulesReview http.Handler) {
	e.metrics.countBadRequestsOf("resourceaccessreview", "rulesreview")
	return e.webhook("resourceaccessreview", func(w http.ResponseWriter, r *http.Request) { e.serveResourceAccessReview(w, r, rv) }),
		e.webhook("rulesreview", func(w http.ResponseWriter, r *http.Request) { e.serveRulesReview(w, r, rv) })
}

func (e *endpoint) serveResourceAccessReview(w http.ResponseWriter, r *http.Request, rv Reviewer) {
	const endpoint = "resourceaccessreview"
	var rar cedar.ResourceAccessReview
	if !e.decodeWebhook(w, r, endpoint, &rar, func() error { return asBadRequest(rar.Check()) }) {
		return
	}
	resp, err := rv.ResourceAccessReview(r.Context(), &rar)
	e.writeReview(w, endpoint, rar.Kind, resp, err)
}

func (e *endpoint) serveRulesReview(w http.ResponseWriter, r *http.Request, rv Reviewer) {
	const endpoint = "rulesreview"
	var srr cedar.SubjectRulesReview
	if !e.decodeWebhook(w, r, endpoint, &srr, func() error {
		return checkType(typeMeta{APIVersion: srr.APIVersion, Kind: srr.Kind}, typeMeta{APIVersion: accessreview.APIVersion, Kind: "SubjectRulesReview"})
	}) {
		return
	}
	resp, err := rv.SubjectRulesReview(r.Context(), &srr)
	e.writeReview(w, endpoint, "SubjectRulesReview", resp, err)
}

// writeReview writes a review's answer, or its error: 400 for an invalid
// review, 503 before a policy set is loaded, or when the request was
// cancelled or timed out.
func (e *endpoint) writeReview(w http.ResponseWriter, endpoint, kind string, resp any, err error) {
	var reqErr *cedar.ReviewError
	switch {
	case errors.As(err, &reqErr):
		e.writeError(w, endpoint, badRequest("invalid %s: %v", kind, reqErr.Err))
	case errors.Is(err, cedar.ErrNotLoaded):
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
	case err != nil:
		http.Error(w, "review not finished: "+err.Error(), http.StatusServiceUnavailable)
	default:
		writeJSON(w, resp)
	}
}

// asBadRequest is err as a 400, nil for nil.
func asBadRequest(err error) error {
	if err == nil {
		return nil
	}
	return badRequest("%v", err)
}
