package server

import (
	"errors"
	"net/http"

	"github.com/kcedar/kcedar/internal/accessreview"
)

// Access reviews reveal the policies: serve them only to trusted clients
// (--require-client-cert applies to them as to /v1/authorize).

// registerReviews adds the review endpoints.
func (s *Server) registerReviews(webhook func(string, http.HandlerFunc) http.Handler) {
	s.mux.Handle("POST /v1/resourceaccessreview", webhook("resourceaccessreview", s.handleResourceAccessReview))
	s.mux.Handle("POST /v1/rulesreview", webhook("rulesreview", s.handleRulesReview))
}

func (s *Server) handleResourceAccessReview(w http.ResponseWriter, r *http.Request) {
	const endpoint = "resourceaccessreview"
	var rar accessreview.ResourceAccessReview
	if !s.decodeWebhook(w, r, endpoint, &rar, func() error { return asBadRequest(rar.Check()) }) {
		return
	}
	e := s.engineOr503(w)
	if e == nil {
		return
	}
	resp, err := accessreview.WhoCan(r.Context(), e, &rar)
	s.writeReview(w, endpoint, rar.Kind, resp, err)
}

func (s *Server) handleRulesReview(w http.ResponseWriter, r *http.Request) {
	const endpoint = "rulesreview"
	var srr accessreview.SubjectRulesReview
	if !s.decodeWebhook(w, r, endpoint, &srr, func() error {
		return checkType(typeMeta{APIVersion: srr.APIVersion, Kind: srr.Kind}, typeMeta{APIVersion: accessreview.APIVersion, Kind: "SubjectRulesReview"})
	}) {
		return
	}
	e := s.engineOr503(w)
	if e == nil {
		return
	}
	resp, err := accessreview.WhatCan(r.Context(), e, &srr)
	s.writeReview(w, endpoint, "SubjectRulesReview", resp, err)
}

// writeReview writes a review's answer, or its error: 400 for an invalid
// review, 503 when the request was cancelled or timed out.
func (s *Server) writeReview(w http.ResponseWriter, endpoint, kind string, resp any, err error) {
	var reqErr *accessreview.RequestError
	switch {
	case errors.As(err, &reqErr):
		s.writeError(w, endpoint, badRequest("invalid %s: %v", kind, reqErr.Err))
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
