package replay

import (
	"bytes"
	"encoding/json"

	authenticationv1 "k8s.io/api/authentication/v1"
)

// The audit Event fields replay reads, and their values. audit.k8s.io/v1beta1
// (before Kubernetes 1.12's v1) has every field replay reads under the same
// JSON name and meaning as v1; it adds only metadata and timestamp, which
// replay does not read. Some exporters drop apiVersion and keep kind.
const (
	eventAPIVersion        = "audit.k8s.io/v1"
	eventAPIVersionV1beta1 = "audit.k8s.io/v1beta1"
	eventKind              = "Event"

	stageRequestReceived  = "RequestReceived"
	stageResponseStarted  = "ResponseStarted"
	stageResponseComplete = "ResponseComplete"
	stagePanic            = "Panic"

	levelRequest         = "Request"
	levelRequestResponse = "RequestResponse"

	// decisionAnnotation is the whole authorizer chain's answer, as the API
	// server records it: "allow" or "forbid".
	decisionAnnotation = "authorization.k8s.io/decision"
	wasAllow           = "allow"
	wasForbid          = "forbid"
)

// auditEvent is the part of an audit.k8s.io/v1 Event (k8s.io/apiserver's
// pkg/apis/audit/v1.Event) that replay needs; decoding only these fields
// keeps long logs fast. The JSON names are the Event type's. The last three
// fields are not an Event's: they tell the records of other formats apart
// (see foreign.go).
type auditEvent struct {
	Kind             string                     `json:"kind"`
	APIVersion       string                     `json:"apiVersion"`
	Level            string                     `json:"level"`
	AuditID          string                     `json:"auditID"`
	Stage            string                     `json:"stage"`
	RequestURI       string                     `json:"requestURI"`
	Verb             string                     `json:"verb"`
	User             authenticationv1.UserInfo  `json:"user"`
	ImpersonatedUser *authenticationv1.UserInfo `json:"impersonatedUser,omitempty"`
	RequestObject    json.RawMessage            `json:"requestObject,omitempty"`
	Annotations      map[string]string          `json:"annotations,omitempty"`
	ResponseStatus   *struct {
		Code int `json:"code"`
	} `json:"responseStatus,omitempty"`

	ProtoPayload json.RawMessage `json:"protoPayload,omitempty"`
	Category     string          `json:"category,omitempty"`
	Properties   *struct {
		Log json.RawMessage `json:"log"`
	} `json:"properties,omitempty"`
}

// decodeEvent decodes one line of an audit log.
func decodeEvent(line []byte) (*auditEvent, error) {
	ev := &auditEvent{}
	if err := json.Unmarshal(line, ev); err != nil {
		return nil, err
	}
	return ev, nil
}

// effectiveUser is the user the request was authorized as: the impersonated
// user where there is one, else the authenticated user.
func (ev *auditEvent) effectiveUser() authenticationv1.UserInfo {
	if ev.ImpersonatedUser != nil {
		return *ev.ImpersonatedUser
	}
	return ev.User
}

// fullObject is the request's object as admission would see it on a
// create, or nil when the log does not hold it: only a create's body
// (logged at Request level or above) is the whole object; a patch or an
// update's body is not what admission evaluates.
func (ev *auditEvent) fullObject(verb, subresource string) []byte {
	if verb != "create" || subresource != "" {
		return nil
	}
	if ev.Level != levelRequest && ev.Level != levelRequestResponse {
		return nil
	}
	if len(ev.RequestObject) == 0 || string(ev.RequestObject) == "null" {
		return nil
	}
	return ev.RequestObject
}

// otherStage reports whether line is, without decoding it, an event of a
// stage that is not a request's decision, and which stage. It looks only
// where kube-apiserver writes the stage: after kind, apiVersion, level and
// auditID, all plain strings; a line laid out otherwise is decoded. Half
// the lines of a log with every stage are skipped this way, at the cost of
// a validity check rather than a decoding.
func otherStage(data []byte) (string, bool) {
	const key = `"stage":"`
	i := bytes.Index(data, []byte(key))
	// i == 0: the line does not open with "{", and data[1:i] would panic.
	if i < 1 || bytes.ContainsAny(data[1:i], "{[") ||
		!bytes.Contains(data[:i], []byte(`"kind":"Event"`)) || !bytes.Contains(data[:i], []byte(`"apiVersion":"audit.k8s.io/v1"`)) {
		return "", false
	}
	rest := data[i+len(key):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return "", false
	}
	switch stage := rest[:j]; string(stage) {
	case stageResponseComplete, stagePanic, stageResponseStarted:
		return "", false
	default:
		return string(stage), json.Valid(data)
	}
}
