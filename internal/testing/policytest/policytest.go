// Package policytest builds the policy sets and requests that the engine's,
// the conditions' and the server's tests write by hand.
package policytest

import (
	"testing"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/entities"
)

// Set is the policy set of the Cedar text src; a parse or set error fails
// the test (a parse error with the text).
func Set(t testing.TB, src string) *cedarlang.PolicySet {
	t.Helper()
	ps, err := cedarlang.ParsePolicies("test.cedar", []byte(src))
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, src)
	}
	set, err := cedarlang.NewPolicySet(ps)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// ResourceRequest is a resource request of user in groups.
func ResourceRequest(user string, groups []string, verb, group, resource, sub, ns, name string) *entities.Request {
	return &entities.Request{User: entities.UserInfo{Name: user, Groups: groups}, Verb: verb, ResourceRequest: true,
		APIGroup: group, Resource: resource, Subresource: sub, Namespace: ns, Name: name}
}
