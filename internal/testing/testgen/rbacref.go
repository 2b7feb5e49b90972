package testgen

import (
	"fmt"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/kcedar/kcedar/internal/entities"
)

// A reference RBAC authorizer, written from the RBAC authorizer's matching
// rules in k8s.io/kubernetes pkg/apis/rbac/v1/evaluation_helpers.go and
// plugin/pkg/auth/authorizer/rbac/rbac.go, independently of the converter
// (internal/tools/rbacconvert): its tests compare the converted policies' answers with
// Allows offline, and the e2e parity test compares both with a real
// kube-apiserver.

func verbMatches(rule *rbacv1.PolicyRule, verb string) bool {
	for _, v := range rule.Verbs {
		if v == rbacv1.VerbAll || v == verb {
			return true
		}
	}
	return false
}

func apiGroupMatches(rule *rbacv1.PolicyRule, group string) bool {
	for _, g := range rule.APIGroups {
		if g == rbacv1.APIGroupAll || g == group {
			return true
		}
	}
	return false
}

func resourceMatches(rule *rbacv1.PolicyRule, combined, subresource string) bool {
	for _, r := range rule.Resources {
		if r == rbacv1.ResourceAll || r == combined {
			return true
		}
		if subresource == "" {
			continue
		}
		if len(r) == len(subresource)+2 && strings.HasPrefix(r, "*/") && strings.HasSuffix(r, subresource) {
			return true
		}
	}
	return false
}

func resourceNameMatches(rule *rbacv1.PolicyRule, name string) bool {
	if len(rule.ResourceNames) == 0 {
		return true
	}
	for _, n := range rule.ResourceNames {
		if n == name {
			return true
		}
	}
	return false
}

func nonResourceURLMatches(rule *rbacv1.PolicyRule, path string) bool {
	for _, u := range rule.NonResourceURLs {
		if u == rbacv1.NonResourceAll || u == path {
			return true
		}
		if strings.HasSuffix(u, "*") && strings.HasPrefix(path, strings.TrimRight(u, "*")) {
			return true
		}
	}
	return false
}

// RuleAllows reports whether one RBAC rule allows req.
func RuleAllows(req *entities.Request, rule *rbacv1.PolicyRule) bool {
	if req.ResourceRequest {
		combined := req.Resource
		if req.Subresource != "" {
			combined += "/" + req.Subresource
		}
		return verbMatches(rule, req.Verb) && apiGroupMatches(rule, req.APIGroup) &&
			resourceMatches(rule, combined, req.Subresource) && resourceNameMatches(rule, req.Name)
	}
	return verbMatches(rule, req.Verb) && nonResourceURLMatches(rule, req.Path)
}

func subjectApplies(u entities.UserInfo, s rbacv1.Subject, namespace string) bool {
	switch s.Kind {
	case rbacv1.UserKind:
		return u.Name == s.Name
	case rbacv1.GroupKind:
		for _, g := range u.Groups {
			if g == s.Name {
				return true
			}
		}
		return false
	case rbacv1.ServiceAccountKind:
		ns := namespace
		if s.Namespace != "" {
			ns = s.Namespace
		}
		if ns == "" {
			return false
		}
		return u.Name == "system:serviceaccount:"+ns+":"+s.Name
	}
	return false
}

// Allows decides req as the RBAC authorizer would over o, and describes the
// rules that allow it ("ClusterRoleBinding/x -> ClusterRole/y rule 2"): a
// ClusterRoleBinding grants its ClusterRole everywhere, a RoleBinding grants
// its Role (in the binding's namespace) or ClusterRole only in its own
// namespace, and a binding to a missing role grants nothing. The privileged
// group system:masters is not special here (the apiserver lets it through
// before RBAC).
func (o *RBACObjects) Allows(req *entities.Request) (bool, []string) {
	var why []string
	grant := func(binding, namespace string, subjects []rbacv1.Subject, role string, rules []rbacv1.PolicyRule) {
		applies := false
		for _, s := range subjects {
			if subjectApplies(req.User, s, namespace) {
				applies = true
				break
			}
		}
		if !applies {
			return
		}
		for i := range rules {
			if RuleAllows(req, &rules[i]) {
				why = append(why, fmt.Sprintf("%s -> %s rule %d", binding, role, i))
			}
		}
	}
	clusterRole := func(name string) (*rbacv1.ClusterRole, bool) {
		for i := range o.ClusterRoles {
			if o.ClusterRoles[i].Name == name {
				return &o.ClusterRoles[i], true
			}
		}
		return nil, false
	}
	for _, b := range o.ClusterRoleBindings {
		if b.RoleRef.Kind != "ClusterRole" {
			continue
		}
		if cr, ok := clusterRole(b.RoleRef.Name); ok {
			grant("ClusterRoleBinding/"+b.Name, "", b.Subjects, "ClusterRole/"+cr.Name, cr.Rules)
		}
	}
	for _, b := range o.RoleBindings {
		if req.Namespace == "" || req.Namespace != b.Namespace {
			continue
		}
		desc := "RoleBinding/" + b.Namespace + "/" + b.Name
		switch b.RoleRef.Kind {
		case "ClusterRole":
			if cr, ok := clusterRole(b.RoleRef.Name); ok {
				grant(desc, b.Namespace, b.Subjects, "ClusterRole/"+cr.Name, cr.Rules)
			}
		case "Role":
			for i := range o.Roles {
				if r := &o.Roles[i]; r.Namespace == b.Namespace && r.Name == b.RoleRef.Name {
					grant(desc, b.Namespace, b.Subjects, "Role/"+r.Namespace+"/"+r.Name, r.Rules)
				}
			}
		}
	}
	return len(why) > 0, why
}
