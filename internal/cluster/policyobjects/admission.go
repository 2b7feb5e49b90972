package policyobjects

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kcedar/kcedar/internal/cedarlang"
)

// maxAdmissionBody bounds an AdmissionReview: the largest spec.content,
// twice (object and oldObject), with room for the rest.
const maxAdmissionBody = 3 * MaxContentBytes

// AdmissionHandler is the validating admission webhook for kcedar's own
// kinds (POST /v1/validate-policy): it refuses an object whose policies are
// invalid, with the positioned errors `kcedar validate` prints, and a
// CedarPolicy that takes a policy id another object or file already uses.
type AdmissionHandler struct {
	// Checker checks against the schema kcedar started with; SetChecker
	// replaces it when the cluster's schema changes.
	Checker *Checker
	// Current, if set, is the policy set serving, for the duplicate id check.
	Current func() *cedarlang.PolicySet
	Logger  *slog.Logger

	replaced atomic.Pointer[Checker]
}

// SetChecker makes writes checked against another schema from now on: the
// cluster's latest, so a write is refused if it does not validate against
// the API the cluster serves now. Safe while requests are served.
func (h *AdmissionHandler) SetChecker(c *Checker) { h.replaced.Store(c) }

func (h *AdmissionHandler) checker() *Checker {
	if c := h.replaced.Load(); c != nil {
		return c
	}
	return h.Checker
}

func (h *AdmissionHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		http.Error(w, "content type "+ct+" is not supported; send application/json", http.StatusUnsupportedMediaType)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxAdmissionBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			http.Error(w, fmt.Sprintf("body is larger than %d bytes", maxAdmissionBody), http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "reading body: "+err.Error(), http.StatusBadRequest)
		return
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil {
		http.Error(w, "decoding AdmissionReview: "+err.Error(), http.StatusBadRequest)
		return
	}
	if review.APIVersion != "admission.k8s.io/v1" || review.Kind != "AdmissionReview" || review.Request == nil {
		http.Error(w, fmt.Sprintf("apiVersion %q kind %q is not accepted here; send admission.k8s.io/v1 AdmissionReview with a request", review.APIVersion, review.Kind), http.StatusBadRequest)
		return
	}
	resp := h.Review(review.Request)
	resp.UID = review.Request.UID
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Response: resp,
	})
}

// Review decides one admission request. Anything but a create or update of
// kcedar's kinds is allowed (the webhook configuration only sends those).
func (h *AdmissionHandler) Review(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	allow := &admissionv1.AdmissionResponse{Allowed: true}
	if req.Kind.Group != Group || (req.Operation != admissionv1.Create && req.Operation != admissionv1.Update) {
		return allow
	}
	if req.SubResource != "" {
		return allow // status: written by kcedar itself
	}
	kind := req.Kind.Kind
	if kind != KindCluster && kind != KindNamespaced {
		return allow
	}
	var obj struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
		Spec     PolicySpec        `json:"spec"`
	}
	if err := json.Unmarshal(req.Object.Raw, &obj); err != nil {
		return deny(fmt.Sprintf("decoding the %s: %v", kind, err))
	}
	name := obj.Metadata.Name
	if name == "" {
		name = req.Name
	}
	ns := ""
	if kind == KindNamespaced {
		ns = req.Namespace
	}
	v := h.checker().Check(kind, ns, name, obj.Spec.Content)
	if !v.Valid {
		return deny(fmt.Sprintf("%s has invalid Cedar policies:\n%s", SourceName(kind, ns, name), v.Message()))
	}
	if h.Current != nil {
		if set := h.Current(); set != nil {
			own := SourceName(kind, ns, name) + ":"
			var dups []string
			for _, id := range v.IDs {
				if p, ok := set.Get(id); ok && !strings.HasPrefix(p.Source, own) {
					dups = append(dups, fmt.Sprintf("policy id %q is already used at %s", id, p.Source))
				}
			}
			if len(dups) > 0 {
				return deny(fmt.Sprintf("%s: %s; policy ids must be unique across every policy object and file", SourceName(kind, ns, name), strings.Join(dups, "; ")))
			}
		}
	}
	for _, w := range v.Warnings {
		// One line each, and short: the API server relays them as headers.
		w = strings.ReplaceAll(w, "\n    ", " ")
		if len(w) > 250 {
			w = w[:250] + "..."
		}
		allow.Warnings = append(allow.Warnings, w)
	}
	return allow
}

func deny(msg string) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{Allowed: false, Result: &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusUnprocessableEntity, Reason: metav1.StatusReasonInvalid, Message: msg}}
}
