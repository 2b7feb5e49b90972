package diff

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cedar-policy/cedar-go/types"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/schemagen"
)

// localDim is dimension d's representatives at a node of the enumeration:
// those of the literals of the policies alive there (fs), plus extra.
// Policies not alive there cannot match a request of the node, so values
// only they tell apart decide alike.
func localDim(fs []*facts, d string, extra ...string) *dimension {
	vals := map[string]bool{}
	var pats []types.Pattern
	seen := map[string]bool{}
	cross := false
	for _, f := range fs {
		for _, v := range f.valuesOf(d) {
			vals[v] = true
		}
		for _, p := range f.patternsOf(d) {
			if k := string(p.MarshalCedar()); !seen[k] {
				seen[k] = true
				pats = append(pats, p)
			}
		}
		cross = cross || f.lits.crossDims[d]
	}
	for _, v := range extra {
		vals[v] = true
	}
	return newDimension(sortedKeys(vals), pats, cross)
}

// userSpace is the representative usernames at a node: Users (usernames of
// one type, User), ServiceAccounts and node usernames (a Node in
// system:nodes, a User outside it). A ServiceAccount is told apart by
// whether the policies name its username, by its namespace and its name
// among those they compare principal.namespace and principal.name with,
// and by the username patterns it matches; a node by the same but its
// namespace.
type userSpace struct {
	names               *dimension // usernames
	pNamespaces, pNames *dimension // principal.namespace, principal.name
	// literal are the ServiceAccount and node usernames the policies name.
	literal map[string]bool
	reps    []string
}

// usersAt is the user space of the policies fs.
func usersAt(fs []*facts) *userSpace {
	u := &userSpace{names: localDim(fs, dimUsername), pNamespaces: attrOnlyDim(fs, dimPNamespace), pNames: attrOnlyDim(fs, dimPName),
		literal: map[string]bool{}}
	seen := map[string]bool{}
	add := func(name string) {
		if !seen[name] {
			seen[name] = true
			u.reps = append(u.reps, name)
		}
	}
	var others []string // ServiceAccounts and nodes among the usernames' representatives
	for _, n := range u.names.reps {
		if ts := usernameTypes(n); len(ts) == 1 && ts[0] == schemagen.UserType {
			add(n)
		} else {
			others = append(others, n)
			u.literal[n] = u.names.literal[n]
		}
	}
	for _, n := range others {
		add(n)
	}
	for _, ns := range u.pNamespaces.reps {
		for _, n := range u.pNames.reps {
			add(schemagen.ServiceAccountUserPrefix + ns + ":" + n)
		}
	}
	for _, n := range u.pNames.reps {
		add(schemagen.NodeUserPrefix + n)
	}
	return u
}

// attrOnlyDim is dimension d (principal.namespace or principal.name) at a
// node: the literals the policies alive there compare it with.
func attrOnlyDim(fs []*facts, d string) *dimension {
	vals := map[string]bool{}
	cross := false
	for _, f := range fs {
		for v := range f.lits.strs[d] {
			vals[v] = v != ""
		}
		cross = cross || f.lits.crossDims[d]
	}
	delete(vals, "")
	return newDimension(sortedKeys(vals), nil, cross)
}

// classKey is the class of a ServiceAccount or node username not named
// by the policies: its namespace's and name's representatives and the
// username patterns it matches ("" for a User).
func (u *userSpace) classKey(username string) (string, bool) {
	sig := u.names.signature(username)
	if ns, name, ok := entities.ServiceAccountName(username); ok {
		nsRep, okNS := u.pNamespaces.classify(ns)
		nameRep, okName := u.pNames.classify(name)
		return "sa\x00" + nsRep + "\x00" + nameRep + "\x00" + sig, okNS && okName
	}
	if isNodeUsername(username) {
		nameRep, ok := u.pNames.classify(strings.TrimPrefix(username, schemagen.NodeUserPrefix))
		return "node\x00" + nameRep + "\x00" + sig, ok
	}
	return "", true
}

// classify is the representative of username; ok is false when it has
// none.
func (u *userSpace) classify(username string) (string, bool) {
	if u.literal[username] {
		return username, true
	}
	key, ok := u.classKey(username)
	if key == "" {
		rep, found := u.names.classify(username)
		if ts := usernameTypes(rep); len(ts) != 1 || ts[0] != schemagen.UserType {
			return "", false // a pattern's string of another type: no User stands for it
		}
		return rep, found
	}
	for _, rep := range u.reps {
		if k, _ := u.classKey(rep); k == key && !u.literal[rep] {
			return rep, ok
		}
	}
	return "", false
}

// isNodeUsername reports whether username is a node's: a Node in
// system:nodes, a User outside it.
func isNodeUsername(username string) bool {
	return len(usernameTypes(username)) > 1
}

// identities memoizes entities.IdentityOf by username and whether the
// user is in system:nodes, all an identity depends on: each takes a
// validation of the username (as a ServiceAccount's).
var identities sync.Map // identityKey -> entities.Identity

type identityKey struct {
	username string
	inNodes  bool
}

// identityOf is entities.IdentityOf(username, groups).
func identityOf(username string, groups []string) entities.Identity {
	k := identityKey{username, slices.Contains(groups, user.NodesGroup)}
	if id, ok := identities.Load(k); ok {
		return id.(entities.Identity)
	}
	id := entities.IdentityOf(username, groups)
	if memoized.Add(1) < maxMemoized {
		identities.Store(k, id)
	}
	return id
}

// usernameTypes is entities.UsernameTypes, memoized.
func usernameTypes(username string) []types.EntityType {
	if ts, ok := typesOf.Load(username); ok {
		return ts.([]types.EntityType)
	}
	ts := entities.UsernameTypes(username)
	if memoized.Add(1) < maxMemoized {
		typesOf.Store(username, ts)
	}
	return ts
}

var typesOf sync.Map // username -> []types.EntityType

// memoized counts the usernames memoized, at most maxMemoized (the
// representatives of a comparison are far fewer).
var memoized atomic.Int64

const maxMemoized = 1 << 16

// nodesGroupOnly is the groups of a node username's Node.
var nodesGroupOnly = []string{user.NodesGroup}

// identities are the subjects of the representative users: one for each
// User and ServiceAccount, two for each node username (a Node, and a User
// outside system:nodes).
func (u *userSpace) identities() []string {
	var out []string
	for _, name := range u.reps {
		if isNodeUsername(name) {
			out = append(out, subjectKey(identitySubject(name, true)))
		}
		out = append(out, subjectKey(identitySubject(name, false)))
	}
	return out
}

// identitySubject is the subject of a representative username, a node's
// in system:nodes or not.
func identitySubject(username string, inNodes bool) Subject {
	var groups []string
	if inNodes {
		groups = nodesGroupOnly
	}
	id := identityOf(username, groups)
	switch id.UID.Type {
	case schemagen.ServiceAccountType:
		return Subject{Kind: KindServiceAccount, Namespace: id.Namespace, Name: id.Name}
	case schemagen.NodeType:
		return Subject{Kind: KindNode, Name: id.Name}
	}
	return Subject{Kind: KindUser, Name: username}
}
