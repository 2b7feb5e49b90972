package generate

import (
	"slices"
	"strings"

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
// ServiceAccounts, nodes) or a group.
type subject struct {
	isGroup bool
	name    string
}

// userSubject is the subject of the user named name.
func userSubject(name string) subject { return subject{name: name} }

// scope is the subject's principal scope in Cedar.
func (s subject) scope() string {
	if s.isGroup {
		return "principal in " + string(schemagen.GroupType) + "::" + cedarlex.Quote(s.name)
	}
	uid := entities.PrincipalUID(s.name)
	return "principal == " + string(uid.Type) + "::" + cedarlex.Quote(string(uid.ID))
}

// slug is the subject in policy ids: the username, sa/<ns>/<name> for a
// ServiceAccount, group/<name> for a group.
func (s subject) slug() string {
	if s.isGroup {
		return "group/" + s.name
	}
	if rest, ok := strings.CutPrefix(s.name, schemagen.ServiceAccountUserPrefix); ok {
		return "sa/" + strings.Replace(rest, ":", "/", 1)
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
