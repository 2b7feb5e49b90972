package policyobjects

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kcedar/kcedar/internal/cedarlang"
)

// maxAdmissionBody bounds an AdmissionReview: the largest spec.content,
// twice (object and oldObject), with room for the rest.
const maxAdmissionBody = 3 * MaxContentBytes

// AdmissionHandler is the validating admission webhook for kcedar's own
// kinds (POST /v1/validate-policy): it refuses an object whose policies are
// invalid, with the positioned errors `kcedar validate` prints, a
// CedarPolicy that takes a policy id another object or file already uses,
// and (with Escalation) a create, update or delete that gives access the
// writer does not hold.
type AdmissionHandler struct {
	// Checker checks against the schema kcedar started with; SetChecker
	// replaces it when the cluster's schema changes.
	Checker *Checker
	// Current, if set, is the policy set serving, for the duplicate id check.
	Current func() *cedarlang.PolicySet
	Logger  *slog.Logger
	// Escalation, if set, refuses writes that give access the writer does
	// not hold (escalation.go).
	Escalation *EscalationCheck
	// OnRefused, if set, is told of every refused write (the decision log).
	OnRefused func(RefusedWrite)

	replaced    atomic.Pointer[Checker]
	metricsOnce sync.Once
	refusals    *prometheus.CounterVec
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
	resp := h.Review(r.Context(), review.Request)
	resp.UID = review.Request.UID
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Response: resp,
	})
}

// Review decides one admission request. Anything but a create, update or
// delete of kcedar's kinds is allowed (the webhook configuration only sends
// those).
func (h *AdmissionHandler) Review(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if req.Kind.Group != Group || req.SubResource != "" { // status: written by kcedar itself
		return &admissionv1.AdmissionResponse{Allowed: true}
	}
	kind := req.Kind.Kind
	if kind != KindCluster && kind != KindNamespaced {
		return &admissionv1.AdmissionResponse{Allowed: true}
	}
	ns := ""
	if kind == KindNamespaced {
		ns = req.Namespace
	}
	var resp *admissionv1.AdmissionResponse
	var reason string
	switch req.Operation {
	case admissionv1.Create, admissionv1.Update:
		resp, reason = h.reviewWrite(ctx, req, kind, ns)
	case admissionv1.Delete:
		resp, reason = h.reviewDelete(ctx, req, kind, ns)
	default:
		return &admissionv1.AdmissionResponse{Allowed: true}
	}
	if !resp.Allowed {
		h.refused(reason, resp.Result.Message, req, SourceName(kind, ns, req.Name))
	}
	traceReview(ctx, req, resp.Allowed, reason, SourceName(kind, ns, req.Name))
	return resp
}

// policyObject is what the webhook reads of a policy object.
type policyObject struct {
	Metadata metav1.ObjectMeta `json:"metadata"`
	Spec     PolicySpec        `json:"spec"`
}

// reviewWrite checks a create or update: the content validates, its ids
// are its own, and it gives nothing the writer does not hold.
func (h *AdmissionHandler) reviewWrite(ctx context.Context, req *admissionv1.AdmissionRequest, kind, ns string) (*admissionv1.AdmissionResponse, string) {
	var obj policyObject
	if err := json.Unmarshal(req.Object.Raw, &obj); err != nil {
		return deny(fmt.Sprintf("decoding the %s: %v", kind, err)), "invalid"
	}
	name := obj.Metadata.Name
	if name == "" {
		name = req.Name
	}
	v := h.checker().Check(kind, ns, name, obj.Spec.Content)
	if !v.Valid {
		return deny(fmt.Sprintf("%s has invalid Cedar policies:\n%s", SourceName(kind, ns, name), v.Message())), "invalid"
	}
	tracePolicyIDs(ctx, v.IDs)
	if msg := h.duplicateIDs(kind, ns, name, v.IDs); msg != "" {
		return deny(msg), "duplicate-id"
	}
	allow := &admissionv1.AdmissionResponse{Allowed: true, Warnings: relayWarnings(v.Warnings)}
	var old *policyObject
	if req.Operation == admissionv1.Update {
		old = &policyObject{}
		if err := json.Unmarshal(req.OldObject.Raw, old); err != nil {
			return deny(fmt.Sprintf("decoding the stored %s: %v", kind, err)), "invalid"
		}
	}
	newPolicies := parseContent(kind, ns, name, obj.Spec.Content)
	if owners := addedOwners(old, &obj); len(owners) > 0 {
		// The garbage collector deletes an object whose owners are gone,
		// under its own identity: adding an owner needs what deleting the
		// object needs, checked now for the writer.
		if r := h.deletion(ctx, req, write{kind: kind, namespace: ns, name: name, old: newPolicies}, owners); r != nil {
			return deny(r.Message), r.Reason
		}
	}
	if old != nil && old.Spec.Content == obj.Spec.Content {
		return allow, "" // labels, annotations: access is unchanged
	}
	w := write{kind: kind, namespace: ns, name: name, new: newPolicies}
	if old != nil {
		w.old = parseContent(kind, ns, name, old.Spec.Content)
	}
	if r := h.escalation(ctx, req, w); r != nil {
		return deny(r.Message), r.Reason
	}
	return allow, ""
}

// addedOwners lists the owner references obj has that old (nil for a
// create) does not: each one lets the garbage collector delete obj once
// that owner is gone (or at once, if it never existed).
func addedOwners(old, obj *policyObject) []string {
	had := map[string]bool{}
	if old != nil {
		for _, o := range old.Metadata.OwnerReferences {
			had[ownerKey(o)] = true
		}
	}
	var out []string
	for _, o := range obj.Metadata.OwnerReferences {
		if !had[ownerKey(o)] {
			out = append(out, fmt.Sprintf("%s %s", o.Kind, o.Name))
		}
	}
	return out
}

func ownerKey(o metav1.OwnerReference) string {
	return strings.Join([]string{o.APIVersion, o.Kind, o.Name, string(o.UID)}, "\x00")
}

// deletion checks a write that can lead to the object's deletion (owners,
// named for the message) as its delete would be checked: the writer needs
// delete on the object and, for each enforced forbid it holds, what that
// forbid blocks.
func (h *AdmissionHandler) deletion(ctx context.Context, req *admissionv1.AdmissionRequest, w write, owners []string) *WriteRefusal {
	if h.Escalation == nil {
		return nil
	}
	r := h.Escalation.CheckDeletion(ctx, req.UserInfo, w, h.checker().lint.Schema)
	if r == nil {
		return nil
	}
	r.Message = fmt.Sprintf("adding the owner reference to %s lets the garbage collector delete %s, so it needs what deleting it needs: %s",
		strings.Join(owners, ", "), w.source(), r.Message)
	return r
}

// reviewDelete checks a delete: removing a forbid gives back what it
// blocked.
func (h *AdmissionHandler) reviewDelete(ctx context.Context, req *admissionv1.AdmissionRequest, kind, ns string) (*admissionv1.AdmissionResponse, string) {
	var old policyObject
	if len(req.OldObject.Raw) > 0 {
		if err := json.Unmarshal(req.OldObject.Raw, &old); err != nil {
			return deny(fmt.Sprintf("decoding the stored %s: %v", kind, err)), "invalid"
		}
	}
	w := write{kind: kind, namespace: ns, name: req.Name, old: parseContent(kind, ns, req.Name, old.Spec.Content)}
	if r := h.escalation(ctx, req, w); r != nil {
		return deny(r.Message), r.Reason
	}
	return &admissionv1.AdmissionResponse{Allowed: true}, ""
}

func (h *AdmissionHandler) escalation(ctx context.Context, req *admissionv1.AdmissionRequest, w write) *WriteRefusal {
	if h.Escalation == nil {
		return nil
	}
	return h.Escalation.Check(ctx, req.UserInfo, w, h.checker().lint.Schema)
}

// parseContent parses an object's policies for the escalation check; an
// object whose content does not parse serves nothing, so it has none.
func parseContent(kind, ns, name, content string) []*cedarlang.Policy {
	ps, err := cedarlang.ParsePolicies(SourceName(kind, ns, name), []byte(content))
	if err != nil {
		return nil
	}
	return ps
}

// duplicateIDs says which of ids another object or file already serves.
func (h *AdmissionHandler) duplicateIDs(kind, ns, name string, ids []string) string {
	if h.Current == nil {
		return ""
	}
	set := h.Current()
	if set == nil {
		return ""
	}
	own := SourceName(kind, ns, name) + ":"
	var dups []string
	for _, id := range ids {
		if p, ok := set.Get(id); ok && !strings.HasPrefix(p.Source, own) {
			dups = append(dups, fmt.Sprintf("policy id %q is already used at %s", id, p.Source))
		}
	}
	if len(dups) == 0 {
		return ""
	}
	return fmt.Sprintf("%s: %s; policy ids must be unique across every policy object and file", SourceName(kind, ns, name), strings.Join(dups, "; "))
}

// relayWarnings shortens lint warnings to one line each: the API server
// relays them as headers.
func relayWarnings(ws []string) []string {
	var out []string
	for _, w := range ws {
		w = strings.ReplaceAll(w, "\n    ", " ")
		if len(w) > 250 {
			w = w[:250] + "..."
		}
		out = append(out, w)
	}
	return out
}

// RefusedWrite is a write of a policy object the webhook refused.
type RefusedWrite struct {
	Operation       string // CREATE, UPDATE or DELETE
	Resource        string // cedarpolicies or namespacedcedarpolicies
	Namespace, Name string
	User            authenticationv1.UserInfo
	Reason, Message string // reason: invalid, duplicate-id, escalation, too-many-checks, check-failed
}

// refused counts and logs a refused write.
func (h *AdmissionHandler) refused(reason, message string, req *admissionv1.AdmissionRequest, object string) {
	h.metrics().WithLabelValues(string(req.Operation), reason).Inc()
	if h.Logger != nil {
		h.Logger.Info("policy object write refused", "reason", reason, "operation", req.Operation, "object", object, "user", req.UserInfo.Username)
	}
	if h.OnRefused != nil {
		h.OnRefused(RefusedWrite{Operation: string(req.Operation), Resource: req.Resource.Resource, Namespace: req.Namespace, Name: req.Name,
			User: req.UserInfo, Reason: reason, Message: message})
	}
}

// refusalReasons are the reasons a write is refused for: the values of
// kcedar_policy_write_refusals_total's reason label.
var refusalReasons = []string{"invalid", "duplicate-id", "escalation", "too-many-checks", "check-failed"}

// metrics is kcedar_policy_write_refusals_total{operation, reason}, with
// every operation and reason at 0 from the start: a series that first
// appears at 1 has no increase() until its second count, so an alert would
// miss the first refusal.
func (h *AdmissionHandler) metrics() *prometheus.CounterVec {
	h.metricsOnce.Do(func() {
		h.refusals = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kcedar_policy_write_refusals_total",
			Help: "Writes of CedarPolicy and NamespacedCedarPolicy objects the admission webhook refused, by operation and reason (invalid, duplicate-id, escalation, too-many-checks, check-failed).",
		}, []string{"operation", "reason"})
		for _, op := range []admissionv1.Operation{admissionv1.Create, admissionv1.Update, admissionv1.Delete} {
			for _, reason := range refusalReasons {
				h.refusals.WithLabelValues(string(op), reason)
			}
		}
	})
	return h.refusals
}

// RegisterMetrics adds the webhook's metrics to reg.
func (h *AdmissionHandler) RegisterMetrics(reg prometheus.Registerer) error {
	return reg.Register(h.metrics())
}

func deny(msg string) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{Allowed: false, Result: &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusUnprocessableEntity, Reason: metav1.StatusReasonInvalid, Message: msg}}
}
