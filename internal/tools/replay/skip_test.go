package replay

import (
	"testing"

	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
)

// Every skip names what the event held.
func TestSkipReasonsSayWhatTheySaw(t *testing.T) {
	noUser := event("n", "get", "/api/v1/namespaces/dev/pods/web", authnv1.UserInfo{}, "allow")
	oldAPI := event("o", "get", "/api/v1/namespaces/dev/pods/web", user("carol", "dev"), "allow")
	oldAPI.APIVersion = "audit.k8s.io/v1alpha1"
	oddStage := event("s", "get", "/api/v1/namespaces/dev/pods/web", user("carol", "dev"), "allow")
	oddStage.Stage = "Halfway"
	oddDecision := event("d", "get", "/api/v1/namespaces/dev/pods/web", user("carol", "dev"), "maybe")
	withCode := func(id string, code int32) *auditv1.Event {
		ev := event(id, "get", "/api/v1/namespaces/dev/pods/web", user("carol", "dev"), "")
		delete(ev.Annotations, decisionAnnotation)
		ev.ResponseStatus = &metav1.Status{Code: code}
		return ev
	}
	noStatus := withCode("z", 0)
	noStatus.ResponseStatus = nil
	s, _ := replay(t, testPolicies, Options{}, lines(t, noUser, oldAPI, oddStage, oddDecision, withCode("c1", 429), withCode("c2", 500), noStatus))
	for _, want := range []string{
		"no user: the event names no user.username (nor impersonatedUser.username)",
		"apiVersion audit.k8s.io/v1alpha1 not supported (audit.k8s.io/v1 and v1beta1 are)",
		`stage "Halfway" is not an audit stage`,
		`unknown authorization decision "maybe"`,
		"no decision annotation, response code 429: rejected by priority and fairness before authorization",
		"no decision annotation, response code 500: says nothing about authorization",
		"no decision annotation and no response code (stage ResponseComplete)",
	} {
		if s.Skipped[want] != 1 {
			t.Errorf("no skip %q in %v", want, s.Skipped)
		}
	}
	if s.Requests != 0 || s.Events != 7 {
		t.Errorf("%d requests of %d events", s.Requests, s.Events)
	}
}
