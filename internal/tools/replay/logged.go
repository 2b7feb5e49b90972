package replay

import (
	"fmt"
	"strconv"
)

// What a decision is compared with, as Change.ComparedWith and the summary
// name it.
const (
	// ComparedWithAnnotation: the authorization.k8s.io/decision annotation,
	// the authorizer chain's answer (Kubernetes 1.11 and later).
	ComparedWithAnnotation = "decision annotation"
	// ComparedWithResponseCode: the response code, in logs without the
	// annotation. A hint only: a 2xx was authorized, but a 403 may come
	// from admission or impersonation rather than authorization.
	ComparedWithResponseCode = "response code (hint)"
)

// logged is what happened to a request, as far as its event tells.
type logged struct {
	allowed bool
	// basis is ComparedWithAnnotation or ComparedWithResponseCode.
	basis string
	// code is the response code (0 when the event has none).
	code int
}

// decision is the logged decision as Change.Was shows it: allow or forbid,
// with the response code where that is what it was read from.
func (l logged) decision() string {
	d := wasForbid
	if l.allowed {
		d = wasAllow
	}
	if l.basis == ComparedWithResponseCode {
		d += " (response code " + strconv.Itoa(l.code) + ")"
	}
	return d
}

// logged reads what happened to the event's request: the decision
// annotation where there is one, else the response code as a hint; or why
// neither tells (a skip reason, naming what the event holds).
func (ev *auditEvent) logged() (logged, string) {
	code := 0
	if ev.ResponseStatus != nil {
		code = ev.ResponseStatus.Code
	}
	switch d, ok := ev.Annotations[decisionAnnotation]; {
	case ok && d == wasAllow:
		return logged{allowed: true, basis: ComparedWithAnnotation, code: code}, ""
	case ok && d == wasForbid:
		return logged{basis: ComparedWithAnnotation, code: code}, ""
	case ok:
		return logged{}, "unknown authorization decision " + strconv.Quote(clip(d))
	}
	return fromResponseCode(code, ev.Stage)
}

// fromResponseCode reads a request's authorization from its response code
// where the event has no decision annotation (logs of Kubernetes before
// 1.11, or a request that never reached authorization). kube-apiserver
// authenticates, then applies priority and fairness, then authorizes, and
// only then serves: a code of the handler (2xx, 3xx, 101, and the 404, 409,
// 410 and 422 of a request served) means authorized; 403 is most often
// the authorizer's, but may be admission's or impersonation's.
func fromResponseCode(code int, stage string) (logged, string) {
	hint := logged{basis: ComparedWithResponseCode, code: code}
	switch {
	case code == 0:
		return logged{}, "no decision annotation and no response code (stage " + clip(stage) + ")"
	case code == 401:
		return logged{}, "no decision annotation, response code 401: authentication failed, never authorized"
	case code == 429:
		return logged{}, "no decision annotation, response code 429: rejected by priority and fairness before authorization"
	case code == 403:
		return hint, ""
	case code >= 100 && code < 400, code == 404, code == 409, code == 410, code == 422:
		hint.allowed = true
		return hint, ""
	}
	return logged{}, fmt.Sprintf("no decision annotation, response code %d: says nothing about authorization", code)
}
