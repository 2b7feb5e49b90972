package conditions

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/testing/policytest"
	"github.com/kcedar/kcedar/internal/testing/schematest"
	"github.com/kcedar/kcedar/internal/wire"
)

// bindingPolicies leave a condition on the node a pod is created or updated
// on, for bob (in group dev), and a forbid on node n9 for everyone.
const bindingPolicies = `
@id("bob-n1") permit(principal == k8s::User::"bob", action in [k8s::Action::"create", k8s::Action::"update"], resource is core::pods)
when { resource has object && resource.object has v1 && resource.object.v1 has spec && resource.object.v1.spec has nodeName && resource.object.v1.spec.nodeName == "n1" };
@id("not-n9") forbid(principal, action, resource is core::pods)
when { resource has object && resource.object has v1 && resource.object.v1 has spec && resource.object.v1.spec has nodeName && resource.object.v1.spec.nodeName == "n9" };
`

// bindingCase is a request authorized on the binding policies: its
// conditions, signed for it.
type bindingCase struct {
	az   *Engine
	req  *entities.Request
	dec  wire.ConditionsAwareDecision
	user entities.UserInfo
}

func newBindingCase(t *testing.T, verb string) bindingCase {
	t.Helper()
	az := newEngine(schematest.Schema(), policytest.Set(t, bindingPolicies), engine.EngineOptions{})
	req := policytest.ResourceRequest("bob", []string{"dev", "system:authenticated"}, verb, "", "pods", "", "a", "")
	req.User.UID = "uid-bob"
	req.User.Extra = map[string][]string{"scopes": {"x", "y"}}
	d := az.Authorize(context.Background(), req)
	if !d.IsConditional() || len(d.DenyConditions()) != 1 || len(d.AllowConditions()) != 1 {
		t.Fatalf("want one deny and one allow condition, got %v", d)
	}
	dec := az.Encode(d, RequestBinding(req))
	if dec.Type != wire.DecisionTypeConditionsMap {
		t.Fatalf("not a ConditionsMap: %+v", dec)
	}
	return bindingCase{az: az, req: req, dec: dec, user: req.User}
}

// data is the admission data of the request c was authorized for: a pod on
// node in namespace a, created by bob.
func (c bindingCase) data(node string) *AdmissionData {
	user := c.user
	return &AdmissionData{Operation: "CREATE", Resource: "pods", APIVersion: "v1", Namespace: "a", Name: "p", User: &user,
		Object: []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"a"},"spec":{"nodeName":"` + node + `"}}`)}
}

func (c bindingCase) upstream(data *AdmissionData) engine.Decision {
	return c.az.EvaluateConditions(context.Background(), &c.dec, data)
}

// refused checks that a condition failed verification: never Allow, the
// MAC's error in the evaluation error.
func refused(t *testing.T, name string, v engine.Decision) {
	t.Helper()
	if v.IsAllowed() || !strings.Contains(v.EvaluationError(), "not written by kcedar for this request") {
		t.Errorf("%s: %v (%s; %s), want refused as not written for this request", name, v.Type(), v.Reason(), v.EvaluationError())
	}
}

// A condition issued for bob creating a pod in namespace a verifies for
// exactly that request (groups and extra values in any order) and for no
// other user, namespace, resource or operation.
func TestConditionBinding(t *testing.T) {
	c := newBindingCase(t, "create")
	if v := c.upstream(c.data("n1")); !v.IsAllowed() {
		t.Fatalf("the request it was issued for: %v %s %s", v.Type(), v.Reason(), v.EvaluationError())
	}
	reordered := c.data("n1")
	reordered.User.Groups = []string{"system:authenticated", "dev"}
	reordered.User.Extra = map[string][]string{"scopes": {"y", "x"}}
	if v := c.upstream(reordered); !v.IsAllowed() {
		t.Fatalf("groups reordered: %v %s %s", v.Type(), v.Reason(), v.EvaluationError())
	}
	for name, edit := range map[string]func(*AdmissionData){
		"another user": func(d *AdmissionData) {
			d.User = &entities.UserInfo{Name: "alice", UID: "uid-bob", Groups: d.User.Groups, Extra: d.User.Extra}
		},
		"another uid":          func(d *AdmissionData) { d.User.UID = "uid-other" },
		"fewer groups":         func(d *AdmissionData) { d.User.Groups = []string{"dev"} },
		"other extra":          func(d *AdmissionData) { d.User.Extra = map[string][]string{"scopes": {"x"}} },
		"no user":              func(d *AdmissionData) { d.User = nil },
		"another namespace":    func(d *AdmissionData) { d.Namespace = "b" },
		"no namespace":         func(d *AdmissionData) { d.Namespace = "" },
		"another resource":     func(d *AdmissionData) { d.Resource = "configmaps" },
		"no resource":          func(d *AdmissionData) { d.Resource = "" },
		"another group":        func(d *AdmissionData) { d.APIGroup = "apps" },
		"a subresource":        func(d *AdmissionData) { d.Subresource = "status" },
		"operation UPDATE":     func(d *AdmissionData) { d.Operation, d.OldObject = "UPDATE", d.Object },
		"operation DELETE":     func(d *AdmissionData) { d.Operation, d.OldObject = "DELETE", d.Object },
		"CONNECT to exec":      func(d *AdmissionData) { d.Operation, d.Subresource = "CONNECT", "exec" },
		"no operation":         func(d *AdmissionData) { d.Operation = "" },
		"an unknown operation": func(d *AdmissionData) { d.Operation = "create" },
	} {
		data := c.data("n1")
		edit(data)
		refused(t, name, c.upstream(data))
		// The deny condition fails verification too: that denies.
		if v := c.upstream(c.edited("n9", edit)); v.Type() != engine.DecisionDeny {
			t.Errorf("%s: deny condition: %v, want Deny", name, v.Type())
		}
	}
	other := *c.req
	other.Namespace = "b"
	if _, _, err := c.az.Codec().Decode(c.dec.ConditionsMap.AllowConditions[0], engine.DecisionAllow, RequestBinding(&other)); !errors.Is(err, ErrForeignCondition) {
		t.Errorf("condition decoded for another namespace: %v", err)
	}
}

func (c bindingCase) edited(node string, edit func(*AdmissionData)) *AdmissionData {
	d := c.data(node)
	edit(d)
	return d
}

// The verb is bound as authorized: an update's condition verifies for an
// UPDATE and for an update that creates (CREATE), a create's only for a
// CREATE, and neither for a DELETE.
func TestConditionBindingVerb(t *testing.T) {
	update := newBindingCase(t, "update")
	asUpdate := update.data("n1")
	asUpdate.Operation, asUpdate.OldObject = "UPDATE", asUpdate.Object
	for name, v := range map[string]engine.Decision{"UPDATE": update.upstream(asUpdate), "CREATE": update.upstream(update.data("n1"))} {
		if !v.IsAllowed() {
			t.Errorf("update's condition in a %s: %v %s %s", name, v.Type(), v.Reason(), v.EvaluationError())
		}
	}
	asDelete := update.data("n1")
	asDelete.Operation = "DELETE"
	refused(t, "update's condition in a DELETE", update.upstream(asDelete))
	create := newBindingCase(t, "create")
	refused(t, "create's condition in an UPDATE", create.upstream(asUpdate))
}

// A signer reused for the conditions of one answer gives each the MAC of
// its own fresh HMAC over the condition and the binding: reset between
// conditions, the binding written out once.
func TestSignerMACsAsAFreshHMAC(t *testing.T) {
	key := RandomKeyring().signing()
	b := Binding{User: &entities.UserInfo{Name: "alice", UID: "u-1", Groups: []string{"dev", "ops"}, Extra: map[string][]string{"b": {"2", "1"}, "a": {"x"}}},
		APIGroup: "apps", Resource: "deployments", Namespace: "team-a", Verb: "create"}
	fresh := func(effect engine.DecisionType, id, typ, body string) string {
		h := hmac.New(sha256.New, key.Secret)
		for _, part := range []string{conditionPrefix, effect.String(), id, typ, body} {
			writePart(h, part)
		}
		b.write(h)
		return base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:macBytes])
	}
	s := newSigner(key, b)
	for i := range 6 {
		effect := engine.DecisionAllow
		if i%3 == 0 {
			effect = engine.DecisionDeny
		}
		id, body := fmt.Sprintf("p%d", i), fmt.Sprintf("k8s::Resource;resource.name == \"n%d\"", i)
		if got, want := s.mac(effect, id, "cedar", body), fresh(effect, id, "cedar", body); got != want {
			t.Errorf("condition %d: the reused signer's MAC %s, a fresh HMAC's %s", i, got, want)
		}
	}
}
