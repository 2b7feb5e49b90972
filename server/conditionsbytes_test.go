package server

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/kcedar/kcedar/cedar"
	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/conditions"
	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/testing/embeddedschema"
	"github.com/kcedar/kcedar/internal/testing/testgen/zoo"
	"github.com/kcedar/kcedar/internal/upstream"
	"github.com/kcedar/kcedar/internal/wire"
	"github.com/kcedar/kcedar/residual"
)

// objectPolicies leave conditions on writes: allow and deny conditions on
// the object, on the old object, and on labels of a list.
const objectPolicies = `
@id("team-pods-on-n1") @reason("teams run pods on node-1")
permit (principal, action in [k8s::Action::"create", k8s::Action::"update"], resource is core::pods)
when { resource has object && resource.object has v1 && resource.object.v1 has spec &&
       resource.object.v1.spec has nodeName && resource.object.v1.spec.nodeName == "node-1" };
@id("no-host-network")
forbid (principal, action in [k8s::Action::"create", k8s::Action::"update", k8s::Action::"patch"], resource is core::pods)
when { resource has object && resource.object has v1 && resource.object.v1 has spec &&
       resource.object.v1.spec has hostNetwork && resource.object.v1.spec.hostNetwork };
@id("keep-protected") forbid (principal, action == k8s::Action::"delete", resource is core::configmaps)
when { resource has oldObject && resource.oldObject.metadata has labels && resource.oldObject.metadata.labels.hasTag("protected") };
@id("delete-configmaps") permit (principal, action == k8s::Action::"delete", resource is core::configmaps);
`

// The conditions go out exactly as the engine encodes them: a caller that
// takes conditions gets, in status.conditionalDecision, the bytes of
// engine.Encode's ConditionsMap for the request (the same ids, types,
// conditions and descriptions, in the same order), through
// cedar.Authorizer.ConditionsAwareAuthorize and k8s.io/apiserver's
// condition types. Compared over the zoo's policies and requests and
// writes that leave conditions, with one key on both sides.
func TestConditionsGoOutAsEncodeWritesThem(t *testing.T) {
	schema := embeddedschema.Schema(t)
	text := zoo.Policies(300, 5) + objectPolicies
	secret := bytes.Repeat([]byte{7}, conditions.MinKeyBytes)
	rk, err := residual.NewKeyring(residual.Key{ID: "k", Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	ek, err := conditions.NewKeyring(conditions.Key{ID: "k", Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	kc, err := cedar.New(cedar.StaticPolicies(cedar.PolicyFile{Name: "p.cedar", Text: []byte(text)}), publicSchema(schema), cedar.Options{Keys: rk})
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := cedarlang.ParsePolicies("p.cedar", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	set, err := cedarlang.NewPolicySet(parsed)
	if err != nil {
		t.Fatal(err)
	}
	codec := conditions.NewCodec(ek)
	e := conditions.New(engine.NewEngine(schema, set, engine.EngineOptions{EncodedOnly: codec}), codec)
	ctx := context.Background()
	conditional := 0
	for i, spec := range conditionsSpecs() {
		var attrs authorizer.AttributesRecord
		setAttributes(&attrs, new(user.DefaultInfo), &spec)
		req, err := upstream.Request(attrs)
		if err != nil {
			t.Fatal(err)
		}
		want := e.Encode(e.Authorize(ctx, req), conditions.RequestBinding(req))
		got := conditionsAnswer(kc.ConditionsAwareAuthorize(ctx, attrs))
		if want.Type != wire.DecisionTypeConditionsMap {
			if got.Status.ConditionalDecision != nil {
				t.Fatalf("#%d: conditions sent for a decision Encode keeps concrete (%s)", i, want.Type)
			}
			continue
		}
		conditional++
		wantJSON, _ := json.Marshal(want)
		gotJSON, _ := json.Marshal(got.Status.ConditionalDecision)
		if !bytes.Equal(gotJSON, wantJSON) {
			t.Fatalf("#%d: conditionalDecision\n  %s\nEncode wrote\n  %s", i, gotJSON, wantJSON)
		}
	}
	if conditional < 50 {
		t.Fatalf("only %d conditional decisions compared", conditional)
	}
}

// conditionsSpecs are the zoo's requests and writes of pods and
// configmaps, as SubjectAccessReview specs.
func conditionsSpecs() []authorizationv1.SubjectAccessReviewSpec {
	var out []authorizationv1.SubjectAccessReviewSpec
	for _, r := range zoo.Requests(300, 400, 9) {
		out = append(out, specOfRequest(r))
	}
	for i := range 200 {
		r := &entities.Request{User: entities.UserInfo{Name: "user-" + string(rune('a'+i%26)), Groups: []string{"team-1", "system:authenticated"}},
			ResourceRequest: true, APIVersion: "v1", Namespace: "ns-1"}
		switch i % 4 {
		case 0:
			r.Verb, r.Resource = "create", "pods"
		case 1:
			r.Verb, r.Resource, r.Name = "update", "pods", "web"
		case 2:
			r.Verb, r.Resource, r.Name = "delete", "configmaps", "settings"
		default:
			r.Verb, r.Resource, r.Name = "patch", "pods", "web"
		}
		out = append(out, specOfRequest(r))
	}
	return out
}

// specOfRequest is r as the review kube-apiserver would send.
func specOfRequest(r *entities.Request) authorizationv1.SubjectAccessReviewSpec {
	spec := authorizationv1.SubjectAccessReviewSpec{User: r.User.Name, UID: r.User.UID, Groups: r.User.Groups}
	for k, v := range r.User.Extra {
		if spec.Extra == nil {
			spec.Extra = map[string]authorizationv1.ExtraValue{}
		}
		spec.Extra[k] = v
	}
	if !r.ResourceRequest {
		spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: r.Path, Verb: r.Verb}
		return spec
	}
	spec.ResourceAttributes = &authorizationv1.ResourceAttributes{Verb: r.Verb, Group: r.APIGroup, Version: r.APIVersion,
		Resource: r.Resource, Subresource: r.Subresource, Namespace: r.Namespace, Name: r.Name}
	return spec
}
