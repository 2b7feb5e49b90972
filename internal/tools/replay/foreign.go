package replay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Azure's diagnostic-log categories that hold kube-apiserver audit events,
// one event (as a JSON string) in properties.log.
const (
	azureCategoryAudit      = "kube-audit"
	azureCategoryAuditAdmin = "kube-audit-admin"
)

// readEvent decodes one line into the audit event it holds: an
// audit.k8s.io/v1 or v1beta1 Event, a kind-only Event, or the event an
// Azure diagnostic record wraps. Otherwise the result says what the line
// is: malformed (not JSON), a foreign record (JSON, not an audit event; its
// source named), or an audit Event of an unsupported apiVersion.
func readEvent(line []byte) (*auditEvent, *result) {
	ev, err := decodeEvent(line)
	if err != nil {
		if !json.Valid(line) {
			return nil, &result{kind: kindMalformed, detail: err.Error()}
		}
		return nil, &result{kind: kindForeign, reason: notAnEvent(line)}
	}
	if ev.isAuditEvent() {
		if ev.APIVersion != "" && ev.APIVersion != eventAPIVersion && ev.APIVersion != eventAPIVersionV1beta1 {
			return nil, &result{kind: kindSkipped, reason: "apiVersion " + clip(ev.APIVersion) + " not supported (audit.k8s.io/v1 and v1beta1 are)"}
		}
		return ev, nil
	}
	switch {
	case ev.Kind == "" && len(ev.ProtoPayload) > 0:
		return nil, &result{kind: kindForeign, reason: "GKE Cloud Audit Log record (protoPayload: no requestURI to rebuild the request from)"}
	case ev.Category != "" && ev.Properties != nil && len(ev.Properties.Log) > 0:
		return unwrapAzure(ev)
	case ev.Category != "":
		return nil, &result{kind: kindForeign, reason: "Azure diagnostic record of category " + strconv.Quote(clip(ev.Category)) + " (not an audit event)"}
	}
	return nil, &result{kind: kindForeign, reason: notAnEvent(line)}
}

// isAuditEvent reports whether ev is an audit Event: kind Event, and an
// audit apiVersion, or none and the fields only an audit event has (a
// core/v1 Event, kind Event too, has none of them).
func (ev *auditEvent) isAuditEvent() bool {
	if ev.Kind != eventKind {
		return false
	}
	if strings.HasPrefix(ev.APIVersion, "audit.k8s.io/") {
		return true
	}
	return ev.APIVersion == "" && ev.Stage != "" && (ev.AuditID != "" || ev.RequestURI != "")
}

// unwrapAzure is the audit event an Azure diagnostic record of the
// kube-audit categories holds in properties.log (a JSON string, or the
// object itself).
func unwrapAzure(ev *auditEvent) (*auditEvent, *result) {
	if ev.Category != azureCategoryAudit && ev.Category != azureCategoryAuditAdmin {
		return nil, &result{kind: kindForeign, reason: "Azure diagnostic record of category " + strconv.Quote(clip(ev.Category)) + " (not an audit event)"}
	}
	inner := []byte(ev.Properties.Log)
	var s string
	if json.Unmarshal(inner, &s) == nil {
		inner = []byte(s)
	}
	wrapped, err := decodeEvent(inner)
	if err != nil || !wrapped.isAuditEvent() {
		return nil, &result{kind: kindForeign, reason: "Azure diagnostic record of category " + ev.Category + " whose properties.log is not an audit event"}
	}
	if wrapped.APIVersion != "" && wrapped.APIVersion != eventAPIVersion && wrapped.APIVersion != eventAPIVersionV1beta1 {
		return nil, &result{kind: kindSkipped, reason: "apiVersion " + clip(wrapped.APIVersion) + " not supported (audit.k8s.io/v1 and v1beta1 are; in an Azure diagnostic record)"}
	}
	return wrapped, nil
}

// maxKeysShown bounds the keys a reason lists.
const maxKeysShown = 6

// notAnEvent says what a JSON line that is not an audit event is: its
// type, or an object's keys (sorted, the first few).
func notAnEvent(line []byte) string {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(line, &obj); err != nil {
		return "not an audit event: JSON " + jsonType(line)
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, clip(k))
	}
	slices.Sort(keys)
	if len(keys) > maxKeysShown {
		keys = append(keys[:maxKeysShown], fmt.Sprintf("... (%d keys)", len(obj)))
	}
	if kind, ok := obj["kind"]; ok {
		return "not an audit event: JSON object of kind " + clip(string(kind)) + " with keys " + strings.Join(keys, ", ")
	}
	return "not an audit event: JSON object with keys " + strings.Join(keys, ", ")
}

// jsonType names the type of a valid JSON value that is not an object.
func jsonType(data []byte) string {
	switch b := bytes.TrimSpace(data); {
	case len(b) == 0:
		return "value"
	case b[0] == '[':
		return "array"
	case b[0] == '"':
		return "string"
	case b[0] == 't' || b[0] == 'f':
		return "boolean"
	case b[0] == 'n':
		return "null"
	case b[0] == '{':
		return "object that does not decode as an audit event"
	}
	return "number"
}

// maxReasonPart bounds what of a line a reason quotes.
const maxReasonPart = 64

// clip shortens a string taken from a line for a reason.
func clip(s string) string {
	if len(s) <= maxReasonPart {
		return s
	}
	return strings.ToValidUTF8(s[:maxReasonPart], "") + "..."
}
