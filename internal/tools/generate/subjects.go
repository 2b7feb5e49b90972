package generate

import (
	"slices"
	"strings"

	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/lib/cedarlex"
	"github.com/kcedar/kcedar/internal/schemagen"
)

// The identities left out unless IncludeSystem: who kcedar's policies do
// not decide for, or should not (Kubernetes' own components).
const (
	mastersGroup   = "system:masters"
	nodesGroup     = "system:nodes"
	nodeUserPrefix = "system:node:"
	// kubeSystemSAPrefix: the ServiceAccounts of kube-system, where
	// kube-controller-manager's controllers (with
	// --use-service-account-credentials) and the cluster's add-ons run.
	kubeSystemSAPrefix = schemagen.ServiceAccountUserPrefix + "kube-system:"
)

// controlPlaneUsers are the control plane's own users.
var controlPlaneUsers = []string{"system:apiserver", "system:kube-controller-manager", "system:kube-scheduler"}

// System identity classes, as the output's comment counts them.
const (
	SystemMasters      = "system:masters members"
	SystemControlPlane = "control plane (system:apiserver, system:kube-controller-manager, system:kube-scheduler)"
	SystemNodes        = "nodes (system:node:*, group system:nodes)"
	SystemKubeSystemSA = "kube-system ServiceAccounts (system:serviceaccount:kube-system:*)"
)

// SystemClass is the class of system identity u belongs to, "" if none.
func SystemClass(u entities.UserInfo) string {
	switch {
	case slices.Contains(u.Groups, mastersGroup):
		return SystemMasters
	case slices.Contains(controlPlaneUsers, u.Name):
		return SystemControlPlane
	case strings.HasPrefix(u.Name, nodeUserPrefix) || slices.Contains(u.Groups, nodesGroup):
		return SystemNodes
	case strings.HasPrefix(u.Name, kubeSystemSAPrefix):
		return SystemKubeSystemSA
	}
	return ""
}

// subject is who a generated policy is for: a user (any username: users,
// ServiceAccounts, nodes; principal is the type Kubernetes makes of it) or
// a group.
type subject struct {
	isGroup   bool
	name      string
	principal types.EntityType
}

// userSubject is the subject of the user u.
func userSubject(u entities.UserInfo) subject {
	return subject{name: u.Name, principal: entities.PrincipalUID(u.Name, u.Groups).Type}
}

// scope is the subject's principal scope.
func (s subject) scope() cedarlex.Scope {
	if s.isGroup {
		return cedarlex.ScopeIn(types.NewEntityUID(schemagen.GroupType, types.String(s.name)))
	}
	return cedarlex.ScopeEq(types.NewEntityUID(s.principal, types.String(s.name)))
}

// slugPrefixes start the slugs of ServiceAccounts and groups; a username
// starting with one is written user/<name>, so that no two subjects share
// a slug.
var slugPrefixes = []string{"sa/", "group/", "user/"}

// slug is the subject in policy ids: the username, sa/<ns>/<name> for a
// ServiceAccount, group/<name> for a group, user/<name> for a username
// that starts like those.
func (s subject) slug() string {
	if s.isGroup {
		return "group/" + s.name
	}
	if rest, ok := strings.CutPrefix(s.name, schemagen.ServiceAccountUserPrefix); ok {
		return "sa/" + strings.Replace(rest, ":", "/", 1)
	}
	for _, p := range slugPrefixes {
		if strings.HasPrefix(s.name, p) {
			return "user/" + s.name
		}
	}
	return s.name
}

// describe is the subject in comments.
func (s subject) describe() string {
	if s.isGroup {
		return "group " + s.name
	}
	if rest, ok := strings.CutPrefix(s.name, schemagen.ServiceAccountUserPrefix); ok {
		return "ServiceAccount " + strings.Replace(rest, ":", "/", 1)
	}
	return "user " + s.name
}

// groupSubjectOf is the first of the chosen groups u is a member of, "" if
// none.
func groupSubjectOf(u entities.UserInfo, chosen []string) string {
	for _, g := range chosen {
		if slices.Contains(u.Groups, g) {
			return g
		}
	}
	return ""
}
