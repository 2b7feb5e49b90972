package conditions

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/testing/policytest"
	"github.com/kcedar/kcedar/internal/testing/schematest"
	"github.com/kcedar/kcedar/internal/wire"
)

// versionFixture is an engine whose one policy leaves a condition on the
// node a pod is created on, the condition it signed (in the allow list) and
// admission data of a pod that meets it.
type versionFixture struct {
	az   *Engine
	req  *entities.Request
	cond wire.Condition
	data *AdmissionData
}

func newVersionFixture(t *testing.T) versionFixture {
	t.Helper()
	ps := policytest.Set(t, `
@id("bob-n1") permit(principal == k8s::User::"bob", action == k8s::Action::"create", resource is core::pods)
when { resource has object && resource.object has v1 && resource.object.v1 has spec && resource.object.v1.spec has nodeName && resource.object.v1.spec.nodeName == "n1" };
`)
	az := newEngine(schematest.Schema(), ps, engine.EngineOptions{})
	req := policytest.ResourceRequest("bob", nil, "create", "", "pods", "", "a", "")
	d := az.Authorize(context.Background(), req)
	if !d.IsConditional() {
		t.Fatalf("want a conditional decision, got %v", d.Type())
	}
	user := entities.UserInfo{Name: "bob"}
	data := &AdmissionData{Operation: "CREATE", Resource: "pods", APIVersion: "v1", Namespace: "a", Name: "p", User: &user,
		Object: []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"a"},"spec":{"nodeName":"n1"}}`)}
	return versionFixture{az: az, req: req, cond: az.Encode(d, RequestBinding(req)).ConditionsMap.AllowConditions[0], data: data}
}

// evaluate evaluates c in the allow list (deny false) or the deny list.
func (f versionFixture) evaluate(c wire.Condition, deny bool) engine.Decision {
	m := &wire.ConditionsMap{AllowConditions: []wire.Condition{c}}
	if deny {
		m = &wire.ConditionsMap{DenyConditions: []wire.Condition{c}}
	}
	return f.az.EvaluateConditions(context.Background(), &wire.ConditionsAwareDecision{Type: wire.DecisionTypeConditionsMap, ConditionsMap: m}, f.data)
}

// resign signs the body of f.cond again as format tag (kc1: as kcedar did
// before the format was versioned; kc2: as kcedar did before conditions were
// bound to their request), with type typ and effect, the way formats kc1 and
// kc2 were signed.
func (f versionFixture) resign(tag, typ string, effect engine.DecisionType) wire.Condition {
	key := f.az.Codec().Keys.signing()
	parts := strings.SplitN(f.cond.Condition, ";", 5)
	body := parts[3] + ";" + parts[4]
	// The MAC of formats kc1 and kc2, written out here so the test does not
	// depend on how the current code signs.
	h := hmac.New(sha256.New, key.Secret)
	for _, part := range []string{tag, effect.String(), f.cond.ID, typ, body} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	sum := base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:16])
	c := f.cond
	c.Type = typ
	c.Condition = strings.Join([]string{tag, key.ID, sum, body}, ";")
	return c
}

// resignBound is f's condition signed again, by hand, under tag and typ as
// formats kc3 and kc4 sign: the tag first, every part length-prefixed, then
// the binding (upstream shape: user, groups, extra, resource, namespace,
// verb) of the fixture's request.
func (f versionFixture) resignBound(tag, typ string, effect engine.DecisionType) wire.Condition {
	key := f.az.Codec().Keys.signing()
	parts := strings.SplitN(f.cond.Condition, ";", 5)
	body := parts[3] + ";" + parts[4]
	h := hmac.New(sha256.New, key.Secret)
	for _, part := range []string{tag, effect.String(), f.cond.ID, typ, body,
		"upstream", "bob", "", "0", "0", "", "pods", "", "a", "create"} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write([]byte(part))
	}
	c := f.cond
	c.Type = typ
	c.Condition = strings.Join([]string{tag, key.ID, base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:16]), body}, ";")
	return c
}

// A condition kcedar writes now is of format kc4 and round-trips: it decodes
// and evaluates.
func TestConditionVersionCurrentRoundTrips(t *testing.T) {
	f := newVersionFixture(t)
	if f.cond.Type != "kcedar.dev/cedar-residual-v4" || !strings.HasPrefix(f.cond.Condition, "kc4;") {
		t.Fatalf("condition not of format kc4: type %q, condition %q", f.cond.Type, f.cond.Condition)
	}
	if _, _, err := f.az.Codec().Decode(f.cond, engine.DecisionAllow, RequestBinding(f.req)); err != nil {
		t.Fatalf("decode: %v", err)
	}
	if v := f.evaluate(f.cond, false); !v.IsAllowed() {
		t.Fatalf("kc4 condition: %v %s %s", v.Type(), v.Reason(), v.EvaluationError())
	}
	// The same signature, re-created by hand, is the one kcedar wrote.
	if again := f.resignBound("kc4", ConditionType, engine.DecisionAllow); again.Condition != f.cond.Condition {
		t.Fatalf("re-signed kc4 condition differs: %s, kcedar wrote %s", again.Condition, f.cond.Condition)
	}
}

// A condition of format kc3 (signed and bound as kc4 is, by a kcedar whose
// group conditions read their `like` patterns literally, with a key this one
// still holds) is refused with a reason that names the format.
func TestConditionVersionKC3Refused(t *testing.T) {
	f := newVersionFixture(t)
	const want = "condition format kc3 was written by an older kcedar; it is refused (fail closed): retry the request so it is authorized again"
	for _, typ := range []string{"kcedar.dev/cedar-residual-v3", "kcedar.dev/cedar-residual-group-v3"} {
		old := f.resignBound("kc3", typ, engine.DecisionAllow)
		_, _, err := f.az.Codec().Decode(old, engine.DecisionAllow, RequestBinding(f.req))
		if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, ErrConditionVersion) {
			t.Fatalf("decode of a kc3 condition of type %s: %v, want %q", typ, err, want)
		}
		if v := f.evaluate(old, false); v.IsAllowed() || !strings.Contains(v.EvaluationError(), want) {
			t.Fatalf("kc3 allow condition: %v %s %s", v.Type(), v.Reason(), v.EvaluationError())
		}
	}
}

// A condition signed in format kc2 (by a kcedar before conditions were bound
// to their request, with a key this one still holds) is refused with a
// reason that names the format; it neither allows nor escapes a deny.
func TestConditionVersionKC2Refused(t *testing.T) {
	f := newVersionFixture(t)
	const want = "condition format kc2 was written by an older kcedar; it is refused (fail closed): retry the request so it is authorized again"
	old := f.resign("kc2", "kcedar.dev/cedar-residual-v2", engine.DecisionAllow)
	_, _, err := f.az.Codec().Decode(old, engine.DecisionAllow, RequestBinding(f.req))
	if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, ErrConditionVersion) {
		t.Fatalf("decode of a kc2 condition: %v, want %q", err, want)
	}
	if v := f.evaluate(old, false); v.IsAllowed() || !strings.Contains(v.EvaluationError(), want) {
		t.Fatalf("kc2 allow condition: %v %s %s", v.Type(), v.Reason(), v.EvaluationError())
	}
	oldDeny := f.resign("kc2", "kcedar.dev/cedar-residual-v2", engine.DecisionDeny)
	if v := f.evaluate(oldDeny, true); v.Type() != engine.DecisionDeny || !strings.Contains(v.EvaluationError(), want) {
		t.Fatalf("kc2 deny condition: %v %s %s", v.Type(), v.Reason(), v.EvaluationError())
	}
}

// A condition signed in format kc1 (by a kcedar before the format was
// versioned, with a key this one still holds) is refused with a reason that
// says so; it neither allows nor escapes a deny.
func TestConditionVersionOlderRefused(t *testing.T) {
	f := newVersionFixture(t)
	old := f.resign("kc1", "kcedar.dev/cedar-residual-v1", engine.DecisionAllow)
	const want = "condition format kc1 was written by an older kcedar; it is refused (fail closed): retry the request so it is authorized again"
	_, _, err := f.az.Codec().Decode(old, engine.DecisionAllow, RequestBinding(f.req))
	if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, ErrConditionVersion) {
		t.Fatalf("decode of a kc1 condition: %v, want %q", err, want)
	}
	v := f.evaluate(old, false)
	if v.IsAllowed() || !strings.Contains(v.EvaluationError(), want) {
		t.Fatalf("kc1 allow condition: %v %s %s", v.Type(), v.Reason(), v.EvaluationError())
	}
	oldDeny := f.resign("kc1", "kcedar.dev/cedar-residual-v1", engine.DecisionDeny)
	if v := f.evaluate(oldDeny, true); v.Type() != engine.DecisionDeny || !strings.Contains(v.EvaluationError(), want) {
		t.Fatalf("kc1 deny condition: %v %s %s", v.Type(), v.Reason(), v.EvaluationError())
	}
}

// A condition of a version this kcedar does not know (a newer one, during a
// rollback) is refused too.
func TestConditionVersionNewerRefused(t *testing.T) {
	f := newVersionFixture(t)
	newer := f.resign("kc10", "kcedar.dev/cedar-residual-v10", engine.DecisionAllow)
	_, _, err := f.az.Codec().Decode(newer, engine.DecisionAllow, RequestBinding(f.req))
	if !errors.Is(err, ErrConditionVersion) || !strings.Contains(err.Error(), "condition format kc10 is unknown to this kcedar") {
		t.Fatalf("decode of a kc10 condition: %v", err)
	}
	if v := f.evaluate(newer, false); v.IsAllowed() {
		t.Fatalf("kc10 condition allowed")
	}
}

// A condition whose version was edited (the tag, the type, or both, with or
// without signing again under the edited version's rules) fails: the MAC
// covers the version, so a condition cannot be relabeled across versions.
func TestConditionVersionEditedFails(t *testing.T) {
	f := newVersionFixture(t)
	retag := func(c wire.Condition, tag, typ string) wire.Condition {
		_, rest, _ := strings.Cut(c.Condition, ";")
		c.Condition, c.Type = tag+";"+rest, typ
		return c
	}
	old := f.resign("kc1", "kcedar.dev/cedar-residual-v1", engine.DecisionAllow)
	cases := map[string]struct {
		cond wire.Condition
		want error
	}{
		"kc4 tag edited to kc3":          {retag(f.cond, "kc3", ConditionType), ErrForeignCondition},
		"kc4 type edited to v3":          {retag(f.cond, "kc4", "kcedar.dev/cedar-residual-v3"), ErrForeignCondition},
		"kc4 relabeled as kc3":           {retag(f.cond, "kc3", "kcedar.dev/cedar-residual-v3"), ErrConditionVersion},
		"kc1 relabeled as kc4":           {retag(old, "kc4", ConditionType), ErrForeignCondition},
		"kc3 relabeled as kc4":           {retag(f.resignBound("kc3", "kcedar.dev/cedar-residual-v3", engine.DecisionAllow), "kc4", ConditionType), ErrForeignCondition},
		"kc4 tag edited to kc04":         {retag(f.cond, "kc04", ConditionType), ErrForeignCondition},
		"kc4 tag edited to no tag":       {retag(f.cond, "", ConditionType), ErrForeignCondition},
		"kc4 signed as kc2 was, unbound": {f.resign("kc4", ConditionType, engine.DecisionAllow), ErrForeignCondition},
	}
	for name, tc := range cases {
		_, _, err := f.az.Codec().Decode(tc.cond, engine.DecisionAllow, RequestBinding(f.req))
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: decode: %v, want %v", name, err, tc.want)
		}
		if v := f.evaluate(tc.cond, false); v.IsAllowed() {
			t.Errorf("%s: allowed", name)
		}
	}
}
