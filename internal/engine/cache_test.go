package engine

import (
	"testing"

	"github.com/kcedar/kcedar/internal/entities"
)

// Requests that decide differently never share a decision-cache key: the
// flags (a name from a field selector, a caller that counts only
// unconditional rights) are not confused with a label selector whose
// requirements spell the same bytes.
func TestRequestKeyFlagsAreNotLabelRequirements(t *testing.T) {
	base := func() *entities.Request {
		return &entities.Request{User: entities.UserInfo{Name: "alice"}, ResourceRequest: true, Verb: "list", Resource: "pods", APIVersion: "v1", Namespace: "team-a", Name: "web"}
	}
	flagged := base()
	flagged.NameFromSelector, flagged.UnconditionalOnly = true, true
	flagged.LabelSelector = []entities.LabelRequirement{{Key: "In", Op: "In", Values: []string{"x"}}}
	spelled := base()
	spelled.LabelSelector = []entities.LabelRequirement{{Key: "s", Op: "In", Values: []string{"In", "x"}}}
	onlyU := base()
	onlyU.UnconditionalOnly = true
	onlyS := base()
	onlyS.NameFromSelector = true
	keys := map[string]string{}
	for name, r := range map[string]*entities.Request{"flagged": flagged, "spelled": spelled, "plain": base(), "unconditional": onlyU, "fromSelector": onlyS} {
		k := requestKey(r)
		if other, ok := keys[k]; ok {
			t.Errorf("%s and %s share the key %q", name, other, k)
		}
		keys[k] = name
	}
}
