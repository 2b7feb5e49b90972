package entities

import (
	"slices"
	"strings"

	"github.com/cedar-policy/cedar-go/types"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/kcedar/kcedar/internal/schemagen"
)

// Identity is the principal Kubernetes makes of a username and its groups:
// a ServiceAccount when the username is one that
// k8s.io/apiserver/pkg/authentication/serviceaccount.SplitUsername accepts
// (a valid namespace and name), a Node when the username starts with
// system:node: and the groups hold system:nodes (as kube-apiserver's node
// identifier requires), and a User otherwise. A username shaped like a
// ServiceAccount or a Node that Kubernetes does not accept as one is a User,
// as kube-apiserver's impersonation filter treats it.
type Identity struct {
	UID types.EntityUID
	// Namespace is a ServiceAccount's namespace.
	Namespace string
	// Name is a ServiceAccount's or a Node's name.
	Name string
}

// IdentityOf types the user named username in groups.
func IdentityOf(username string, groups []string) Identity {
	if ns, name, ok := ServiceAccountName(username); ok {
		return Identity{UID: types.NewEntityUID(schemagen.ServiceAccountType, types.String(username)), Namespace: ns, Name: name}
	}
	if name, ok := NodeName(username, groups); ok {
		return Identity{UID: types.NewEntityUID(schemagen.NodeType, types.String(username)), Name: name}
	}
	return Identity{UID: types.NewEntityUID(schemagen.UserType, types.String(username))}
}

// PrincipalUID is the principal's entity uid (IdentityOf).
func PrincipalUID(username string, groups []string) types.EntityUID {
	return IdentityOf(username, groups).UID
}

// ServiceAccountName splits a ServiceAccount's username into its namespace
// and name; ok is false for any username Kubernetes does not read as a
// ServiceAccount's (serviceaccount.SplitUsername).
func ServiceAccountName(username string) (ns, name string, ok bool) {
	if !strings.HasPrefix(username, schemagen.ServiceAccountUserPrefix) {
		return "", "", false
	}
	ns, name, err := serviceaccount.SplitUsername(username)
	return ns, name, err == nil
}

// NodeName is the node's name when the user is a node as kube-apiserver's
// node identifier sees it: a system:node:<name> username (name not empty)
// in the system:nodes group.
func NodeName(username string, groups []string) (string, bool) {
	name, ok := strings.CutPrefix(username, schemagen.NodeUserPrefix)
	if !ok || name == "" || !slices.Contains(groups, user.NodesGroup) {
		return "", false
	}
	return name, true
}

// UsernameTypes are the principal types a user of this username can have,
// whatever its groups: a ServiceAccount's username is always a
// ServiceAccount; a node's is a Node in system:nodes and a User outside it;
// any other is a User.
func UsernameTypes(username string) []types.EntityType {
	if _, _, ok := ServiceAccountName(username); ok {
		return []types.EntityType{schemagen.ServiceAccountType}
	}
	if _, ok := NodeName(username, nodesGroupOnly); ok {
		return []types.EntityType{schemagen.NodeType, schemagen.UserType}
	}
	return []types.EntityType{schemagen.UserType}
}

var nodesGroupOnly = []string{user.NodesGroup}

// IsPrincipal reports whether some user is the principal uid: its type is
// one its username can have (UsernameTypes).
func IsPrincipal(uid types.EntityUID) bool {
	return slices.Contains(UsernameTypes(string(uid.ID)), uid.Type)
}

// GroupsFor are groups that give username the principal type t, for tools
// that name a principal by its uid and must build a user who is it:
// system:nodes for a Node, none otherwise. ok is false when no user of that
// username has type t.
func GroupsFor(uid types.EntityUID) (groups []string, ok bool) {
	if !IsPrincipal(uid) {
		return nil, false
	}
	if uid.Type == schemagen.NodeType {
		return []string{user.NodesGroup}, true
	}
	return nil, true
}
