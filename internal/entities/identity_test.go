package entities

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/cedar-policy/cedar-go/types"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/kcedar/kcedar/internal/schemagen"
)

var nodes = []string{user.NodesGroup, user.AllAuthenticated}

func TestIdentityOf(t *testing.T) {
	for _, tc := range []struct {
		user   string
		groups []string
		typ    types.EntityType
		ns     string
		name   string
	}{
		{"alice", nil, schemagen.UserType, "", ""},
		{"alice@example.com", nodes, schemagen.UserType, "", ""},
		{"system:anonymous", nil, schemagen.UserType, "", ""},
		{"", nil, schemagen.UserType, "", ""},
		{"system:serviceaccount:kube-system:default", nil, schemagen.ServiceAccountType, "kube-system", "default"},
		{"system:serviceaccount:team-a:builder.v2", nil, schemagen.ServiceAccountType, "team-a", "builder.v2"},
		// Shaped like a ServiceAccount, but not one kube-apiserver accepts:
		// a User (SplitUsername: a DNS-1123 label namespace, a DNS-1123
		// subdomain name).
		{"system:serviceaccount:kube-system:X", nil, schemagen.UserType, "", ""},
		{"system:serviceaccount:Kube-System:x", nil, schemagen.UserType, "", ""},
		{"system:serviceaccount:kube-system:x ", nil, schemagen.UserType, "", ""},
		{"system:serviceaccount:kube-system:x\n", nil, schemagen.UserType, "", ""},
		{"system:serviceaccount:kube.system:x", nil, schemagen.UserType, "", ""},
		{"system:serviceaccount:ns", nil, schemagen.UserType, "", ""},
		{"system:serviceaccount:ns:", nil, schemagen.UserType, "", ""},
		{"system:serviceaccount::x", nil, schemagen.UserType, "", ""},
		{"system:serviceaccount:ns:a:b", nil, schemagen.UserType, "", ""},
		{"system:serviceaccount:", nil, schemagen.UserType, "", ""},
		{"system:serviceaccounts:ns:x", nil, schemagen.UserType, "", ""},
		{"system:serviceaccount:" + strings.Repeat("a", 64) + ":x", nil, schemagen.UserType, "", ""},
		// A node only in system:nodes (kube-apiserver's node identifier).
		{"system:node:worker-1", nodes, schemagen.NodeType, "", "worker-1"},
		{"system:node:worker-1", nil, schemagen.UserType, "", ""},
		{"system:node:worker-1", []string{"system:nodes-x", user.AllAuthenticated}, schemagen.UserType, "", ""},
		{"system:node:", nodes, schemagen.UserType, "", ""},
		{"system:nodes", nodes, schemagen.UserType, "", ""},
		// A ServiceAccount's username stays one in system:nodes.
		{"system:serviceaccount:ns:sa", nodes, schemagen.ServiceAccountType, "ns", "sa"},
	} {
		id := IdentityOf(tc.user, tc.groups)
		want := Identity{UID: types.NewEntityUID(tc.typ, types.String(tc.user)), Namespace: tc.ns, Name: tc.name}
		if id != want {
			t.Errorf("IdentityOf(%q, %q) = %+v, want %+v", tc.user, tc.groups, id, want)
		}
		if !IsPrincipal(id.UID) {
			t.Errorf("IsPrincipal(%s) = false for the identity of %q", id.UID, tc.user)
		}
		if PrincipalUID(tc.user, tc.groups) != id.UID {
			t.Errorf("PrincipalUID(%q) differs from IdentityOf", tc.user)
		}
	}
}

// TestServiceAccountsAsKubernetesSplitsThem draws usernames around the
// ServiceAccount prefix (valid and invalid namespaces and names, separators,
// case, whitespace, control characters) and checks the typing against
// k8s.io/apiserver's SplitUsername, the function kube-apiserver's
// impersonation filter and authenticators use.
func TestServiceAccountsAsKubernetesSplitsThem(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	parts := []string{"", "a", "kube-system", "team-a", "X", "a.b", "a_b", "-a", "a-", "a:b", " a", "a\n", "é", strings.Repeat("n", 63), strings.Repeat("n", 64), strings.Repeat("s", 254), "a..b", "0"}
	for range 5000 {
		u := schemagen.ServiceAccountUserPrefix + parts[rng.IntN(len(parts))]
		if rng.IntN(8) > 0 {
			u += ":" + parts[rng.IntN(len(parts))]
		}
		ns, name, err := serviceaccount.SplitUsername(u)
		id := IdentityOf(u, []string{user.AllAuthenticated})
		isSA := id.UID.Type == schemagen.ServiceAccountType
		if isSA != (err == nil) || (isSA && (id.Namespace != ns || id.Name != name)) {
			t.Fatalf("IdentityOf(%q) = %+v; SplitUsername = %q, %q, %v", u, id, ns, name, err)
		}
		if !isSA && id.UID.Type != schemagen.UserType {
			t.Fatalf("IdentityOf(%q) = %+v, want a User", u, id)
		}
	}
}

func TestUsernameTypes(t *testing.T) {
	for user, want := range map[string][]types.EntityType{
		"alice":                               {schemagen.UserType},
		"system:serviceaccount:ns:sa":         {schemagen.ServiceAccountType},
		"system:serviceaccount:kube-system:X": {schemagen.UserType},
		"system:node:n1":                      {schemagen.NodeType, schemagen.UserType},
		"system:node:":                        {schemagen.UserType},
	} {
		if got := UsernameTypes(user); !slices.Equal(got, want) {
			t.Errorf("UsernameTypes(%q) = %v, want %v", user, got, want)
		}
		for _, typ := range []types.EntityType{schemagen.UserType, schemagen.ServiceAccountType, schemagen.NodeType} {
			uid := types.NewEntityUID(typ, types.String(user))
			groups, ok := GroupsFor(uid)
			if ok != slices.Contains(want, typ) || ok != IsPrincipal(uid) {
				t.Errorf("GroupsFor(%s) ok = %v, want %v", uid, ok, slices.Contains(want, typ))
			}
			if ok && PrincipalUID(user, groups) != uid {
				t.Errorf("GroupsFor(%s) = %q, which makes %s", uid, groups, PrincipalUID(user, groups))
			}
		}
	}
}

func TestPrincipalEntityOfAnInvalidServiceAccountIsAUser(t *testing.T) {
	e := PrincipalEntity(UserInfo{Name: "system:serviceaccount:kube-system:X", Groups: []string{user.AllAuthenticated}})
	if e.UID.Type != schemagen.UserType {
		t.Fatalf("uid %s, want a k8s::User", e.UID)
	}
	for _, attr := range []string{schemagen.AttrNamespace, schemagen.AttrName} {
		if _, ok := e.Attributes.Get(types.String(attr)); ok {
			t.Errorf("a User has %s", attr)
		}
	}
	n := PrincipalEntity(UserInfo{Name: "system:node:n1", Groups: []string{user.AllAuthenticated}})
	if n.UID.Type != schemagen.UserType {
		t.Fatalf("a node's username outside system:nodes is %s, want a k8s::User", n.UID)
	}
}
