package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/kcedar/kcedar/internal/entities"
)

// The user a command asks about, with kubectl's impersonation flags: one
// implementation for every command that takes a user (authorize, can-i,
// why, and the kubectl plugin's commands).

// Group names kube-apiserver adds to an impersonated user (k8s.io/apiserver
// user.AllAuthenticated and user.AllUnauthenticated).
const (
	groupAuthenticated   = "system:authenticated"
	groupUnauthenticated = "system:unauthenticated"
	anonymousUser        = "system:anonymous"
	nodeUserPrefix       = "system:node:"
)

// identityFlags are kubectl's --as, --as-group, --as-uid and
// --as-user-extra, and, for commands that had them, the older --user,
// --group, --uid and --extra as deprecated (hidden) aliases.
type identityFlags struct {
	user   string
	groups []string
	uid    string
	extra  []string
	// legacy are the values of the deprecated aliases, merged by userInfo.
	legacy struct {
		user   string
		groups []string
		uid    string
		extra  []string
	}
}

// AddFlags registers the kubectl flags on f and, with legacy, the older
// names as deprecated aliases (they still work and print a deprecation
// warning).
func (o *identityFlags) AddFlags(f *pflag.FlagSet, legacy bool) {
	f.StringVar(&o.user, "as", "", "user name (system:serviceaccount:NS:NAME, system:node:NAME or any other), as kubectl --as")
	f.StringArrayVar(&o.groups, "as-group", nil, "group of the user (repeatable), as kubectl --as-group; system:authenticated is added as kube-apiserver adds it")
	f.StringVar(&o.uid, "as-uid", "", "uid of the user, as kubectl --as-uid")
	f.StringArrayVar(&o.extra, "as-user-extra", nil, "user extra KEY=VALUE (repeatable), as kubectl --as-user-extra")
	if !legacy {
		return
	}
	f.StringVar(&o.legacy.user, "user", "", "user name")
	f.StringArrayVar(&o.legacy.groups, "group", nil, "group of the user (repeatable)")
	f.StringVar(&o.legacy.uid, "uid", "", "user uid")
	f.StringArrayVar(&o.legacy.extra, "extra", nil, "user extra KEY=VALUE (repeatable)")
	for _, alias := range [][2]string{{"user", "as"}, {"group", "as-group"}, {"uid", "as-uid"}, {"extra", "as-user-extra"}} {
		_ = f.MarkDeprecated(alias[0], "use --"+alias[1])
	}
}

// given reports whether any identity flag was set.
func (o *identityFlags) given() bool {
	return o.user != "" || o.legacy.user != "" || len(o.groups)+len(o.legacy.groups) > 0
}

// userInfo is the user the flags name as kube-apiserver sees it when kubectl
// impersonates it (see impersonatedGroups).
func (o *identityFlags) userInfo() (entities.UserInfo, error) {
	name, err := oneOf("--as", o.user, "--user", o.legacy.user)
	if err != nil {
		return entities.UserInfo{}, err
	}
	uid, err := oneOf("--as-uid", o.uid, "--uid", o.legacy.uid)
	if err != nil {
		return entities.UserInfo{}, err
	}
	extra, err := parseUserExtra(append(slices.Clone(o.extra), o.legacy.extra...))
	if err != nil {
		return entities.UserInfo{}, err
	}
	groups := append(slices.Clone(o.groups), o.legacy.groups...)
	return entities.UserInfo{Name: name, UID: uid, Groups: impersonatedGroups(name, groups), Extra: extra}, nil
}

// oneOf is the value of a flag or of its deprecated alias, an error when
// both are set differently.
func oneOf(name, value, alias, aliasValue string) (string, error) {
	if value != "" && aliasValue != "" && value != aliasValue {
		return "", fmt.Errorf("give %s or its deprecated alias %s, not both", name, alias)
	}
	if value != "" {
		return value, nil
	}
	return aliasValue, nil
}

// impersonatedGroups are the groups kube-apiserver gives an impersonated
// user (k8s.io/apiserver's impersonation filter): without --as-group, a
// ServiceAccount gets its fixed groups, and a node (system:node:<a valid
// node name>) gets system:nodes, as constrained impersonation gives it
// (legacy impersonation, which the API server tries last, gives none). Then
// a user other than system:anonymous gets system:authenticated unless the
// groups hold system:authenticated or system:unauthenticated;
// system:anonymous gets system:unauthenticated unless the groups hold it.
// An authenticated request (the authenticated group adder) ends up with the
// same groups.
func impersonatedGroups(user string, groups []string) []string {
	if len(groups) == 0 {
		groups = identityGroups(user)
	}
	add := groupAuthenticated
	if user == anonymousUser {
		add = groupUnauthenticated
		if slices.Contains(groups, groupUnauthenticated) {
			return groups
		}
	} else if slices.Contains(groups, groupAuthenticated) || slices.Contains(groups, groupUnauthenticated) {
		return groups
	}
	return append(groups, add)
}

// identityGroups are the groups the impersonation filter fixes for a user
// impersonated without groups: a ServiceAccount's, or system:nodes for a
// node whose name is a valid node name.
func identityGroups(username string) []string {
	if ns, _, ok := entities.ServiceAccountName(username); ok {
		return serviceaccount.MakeGroupNames(ns)
	}
	if name, ok := strings.CutPrefix(username, nodeUserPrefix); ok && len(validation.IsDNS1123Subdomain(name)) == 0 {
		return []string{user.NodesGroup}
	}
	return nil
}

// parseUserExtra reads KEY=VALUE pairs as kubectl reads --as-user-extra
// (split at the first "="; a key may repeat): nil when there are none.
func parseUserExtra(pairs []string) (map[string][]string, error) {
	var extra map[string][]string
	for _, kv := range pairs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--as-user-extra %q: want KEY=VALUE", kv)
		}
		if extra == nil {
			extra = map[string][]string{}
		}
		extra[k] = append(extra[k], v)
	}
	return extra, nil
}

// errNoSubject is the usage error of a command that needs a user.
var errNoSubject = errors.New("give the subject with --as USER (and --as-group GROUP)")
