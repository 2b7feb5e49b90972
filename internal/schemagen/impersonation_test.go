package schemagen

import (
	"slices"
	"testing"

	"github.com/cedar-policy/cedar-go/types"
)

func TestActionHierarchy(t *testing.T) {
	for _, tc := range []struct {
		verb    string
		parents []string
		in      []string // groups verb is in
		notIn   []string
	}{
		{verb: "*"},
		{verb: "get", parents: []string{"*"}, in: []string{"*", "get"}, notIn: []string{"impersonate-on:user-info:*"}},
		{verb: "impersonate", parents: []string{"*"}, in: []string{"*"}, notIn: []string{"impersonate:user-info", "impersonate-on:user-info:*"}},
		{verb: "impersonate:user-info", parents: []string{"*"}, in: []string{"*"}, notIn: []string{"impersonate", "impersonate-on:user-info:*"}},
		{verb: "impersonate-on:user-info:*", parents: []string{"*"}, in: []string{"*"}, notIn: []string{"impersonate"}},
		{verb: "impersonate-on:user-info:get", parents: []string{"impersonate-on:user-info:*"}, in: []string{"*", "impersonate-on:user-info:*"},
			notIn: []string{"get", "impersonate", "impersonate:user-info", "impersonate-on:serviceaccount:*"}},
		// A custom verb is in its mode's group too; a malformed one only in "*".
		{verb: "impersonate-on:associated-node:frobnicate", parents: []string{"impersonate-on:associated-node:*"}, in: []string{"*"}},
		{verb: "impersonate-on:user-info", parents: []string{"*"}, in: []string{"*"}},
	} {
		if got := ActionParents(tc.verb); !slices.Equal(got, tc.parents) {
			t.Errorf("ActionParents(%q) = %v, want %v", tc.verb, got, tc.parents)
		}
		for _, g := range tc.in {
			if !ActionIn(tc.verb, g) {
				t.Errorf("%q is not in %q", tc.verb, g)
			}
		}
		for _, g := range tc.notIn {
			if ActionIn(tc.verb, g) {
				t.Errorf("%q is in %q", tc.verb, g)
			}
		}
	}
	if !IsActionGroup("impersonate-on:serviceaccount:*") || IsActionGroup("impersonate-on:serviceaccount:get") || IsActionGroup("impersonate") {
		t.Error("IsActionGroup")
	}
}

// TestImpersonationActions checks the generated default schema against what
// the API server's impersonation filter asks (k8s.io/apiserver v0.37,
// endpoints/filters/impersonation/mode.go).
func TestImpersonationActions(t *testing.T) {
	s := defaultSchema(t)
	_, _, rs, _ := resolveBoth(t, s)
	authn := func(r string) types.EntityType { return ResourceEntityType(AuthenticationGroup, r, "") }
	wantIdentities := map[string][]types.EntityType{
		ModeAssociatedNode: {authn("nodes")},
		ModeArbitraryNode:  {authn("nodes")},
		ModeServiceAccount: {authn("serviceaccounts")},
		ModeUserInfo:       {authn("groups"), authn("uids"), authn("userextras"), authn("users")},
	}
	for _, m := range ImpersonationModes {
		a, ok := rs.Actions[ActionUID(ImpersonateVerb(m))]
		if !ok {
			t.Fatalf("no action %s", ImpersonateVerb(m))
		}
		want := append(slices.Clone(wantIdentities[m]), ResourceType)
		slices.Sort(want)
		if !slices.Equal(a.AppliesTo.Resources, want) {
			t.Errorf("%s applies to %v, want %v", ImpersonateVerb(m), a.AppliesTo.Resources, want)
		}
		g, ok := rs.Actions[ActionUID(ImpersonateOnGroup(m))]
		if !ok || g.AppliesTo != nil || !g.Entity.Parents.Contains(AllVerbsAction) {
			t.Errorf("action group %s: %v %+v", ImpersonateOnGroup(m), ok, g)
		}
		if slices.Contains(s.Verbs, ImpersonateOnGroup(m)) {
			t.Errorf("%s is listed as a verb", ImpersonateOnGroup(m))
		}
	}
	// associated-node: only ServiceAccounts ask.
	for _, v := range []string{"impersonate:associated-node", "impersonate-on:associated-node:get"} {
		if p := rs.Actions[ActionUID(v)].AppliesTo.Principals; !slices.Equal(p, []types.EntityType{ServiceAccountType}) {
			t.Errorf("%s principals %v", v, p)
		}
	}
	// impersonate-on:<mode>:<verb> applies where <verb> does, virtual
	// resources (no request reaches them) aside.
	pods, _ := s.Lookup("", "pods", "")
	if !slices.Contains(pods.Verbs, "impersonate-on:user-info:get") || slices.Contains(pods.Verbs, "impersonate-on:user-info:post") {
		t.Errorf("pods verbs %v", pods.Verbs)
	}
	users, _ := s.Lookup("", "users", "")
	if !slices.Equal(users.Verbs, []string{"impersonate"}) {
		t.Errorf("core users verbs %v", users.Verbs)
	}
	sa, _ := s.Lookup(AuthenticationGroup, "serviceaccounts", "")
	if !sa.Namespaced || !sa.Virtual {
		t.Errorf("authentication.k8s.io serviceaccounts %+v", sa)
	}
	extras, _ := s.Lookup(AuthenticationGroup, "userextras", "scopes")
	if !slices.Equal(extras.Verbs, []string{"impersonate", "impersonate:user-info"}) {
		t.Errorf("userextras verbs %v", extras.Verbs)
	}
	post := rs.Actions[ActionUID("impersonate-on:serviceaccount:post")].AppliesTo.Resources
	if !slices.Equal(post, []types.EntityType{NonResourceURLType, ResourceType}) {
		t.Errorf("impersonate-on:serviceaccount:post applies to %v", post)
	}
	if err := s.CheckVerb("impersonate:associated-node", &Resource{Verbs: []string{}}); err != nil {
		t.Error(err)
	}
	if err := s.CheckVerb("impersonate-on:user-info:get", pods); err != nil {
		t.Error(err)
	}
}

func TestAddImpersonationHandBuilt(t *testing.T) {
	s := &Schema{Resources: map[ResourceKey]*Resource{
		{Resource: "pods"}: {Key: ResourceKey{Resource: "pods"}, EntityType: "core::pods", Namespaced: true, Verbs: []string{"get", "list"}, Versions: map[string]*ObjectVersion{}},
	}, Verbs: []string{"get", "list"}, ObjectMeta: &RecordType{Attributes: map[string]*Attribute{}}}
	s.AddImpersonation()
	if !slices.Contains(s.Verbs, "impersonate-on:arbitrary-node:list") || !slices.Contains(s.Verbs, "impersonate:serviceaccount") {
		t.Errorf("verbs %v", s.Verbs)
	}
	if _, ok := s.Lookup(AuthenticationGroup, "nodes", ""); !ok {
		t.Error("no authentication.k8s.io nodes")
	}
	text, err := s.MarshalCedar()
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseSchema(text)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(back.Verbs, s.Verbs) {
		t.Errorf("verbs after a round trip %v, want %v", back.Verbs, s.Verbs)
	}
	if !slices.Equal(back.Resources[ResourceKey{Resource: "pods"}].Verbs, s.Resources[ResourceKey{Resource: "pods"}].Verbs) {
		t.Errorf("pods verbs after a round trip")
	}
}
