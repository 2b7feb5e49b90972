package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"sync"
	"sync/atomic"

	authorizationv1 "k8s.io/api/authorization/v1"

	"github.com/kcedar/kcedar/internal/wire"
)

// An answer without conditions is one of few: Allow, Deny or NoOpinion with
// the reason of the policies that decided it. Its bytes are rendered once
// by encoding/json, as writeJSON renders every answer, and written from
// then on as they are.

// renderedAnswersMax bounds the rendered answers kept; when full, they are
// all dropped and rendered again as they come (policy sets change, and with
// them the reasons).
const renderedAnswersMax = 4096

// renderedAnswers holds the bytes of answers without conditions, keyed by
// their status.
type renderedAnswers struct {
	byStatus sync.Map // authorizationv1.SubjectAccessReviewStatus -> []byte
	n        atomic.Int64
}

// plainAnswers are the server's rendered answers.
var plainAnswers renderedAnswers

// writeSARResponse writes the SubjectAccessReview answer of status.
func writeSARResponse(w http.ResponseWriter, status wire.SubjectAccessReviewStatus) {
	if status.ConditionalDecision != nil {
		writeJSON(w, sarResponse{APIVersion: sarType.APIVersion, Kind: sarType.Kind, Status: status})
		return
	}
	b := plainAnswers.get(status.SubjectAccessReviewStatus)
	w.Header()["Content-Type"] = jsonContentType
	_, _ = w.Write(b)
}

// get returns the bytes of the answer of status, rendered now if they are
// not kept yet.
func (r *renderedAnswers) get(status authorizationv1.SubjectAccessReviewStatus) []byte {
	if b, ok := r.byStatus.Load(status); ok {
		return b.([]byte)
	}
	var buf bytes.Buffer
	// As writeJSON writes it: an Encoder (HTML-safe escaping, a newline).
	_ = json.NewEncoder(&buf).Encode(sarResponse{APIVersion: sarType.APIVersion, Kind: sarType.Kind, Status: wire.SubjectAccessReviewStatus{SubjectAccessReviewStatus: status}})
	b := buf.Bytes()
	if r.n.Add(1) > renderedAnswersMax {
		r.byStatus.Clear()
		r.n.Store(1)
	}
	if _, loaded := r.byStatus.LoadOrStore(status, b); loaded {
		r.n.Add(-1)
	}
	return b
}
