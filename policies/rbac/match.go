package rbac

import (
	"fmt"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/kcedar/kcedar/cedar"
)

// The RBAC authorizer's matching rules, as in k8s.io/kubernetes
// pkg/apis/rbac/v1/evaluation_helpers.go and
// plugin/pkg/auth/authorizer/rbac/rbac.go. Allows uses them as a reference
// implementation to explain (and test) conversions offline; the e2e parity test
// compares against the real kube-apiserver.

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
func RuleAllows(req *cedar.Request, rule *rbacv1.PolicyRule) bool {
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

func subjectApplies(u cedar.UserInfo, s rbacv1.Subject, namespace string) bool {
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

// Allows decides req as the RBAC authorizer would over in, and describes the
// rules that allow it ("ClusterRoleBinding/x -> ClusterRole/y rule 2"). The
// privileged group system:masters is not special here (the apiserver lets it
// through before RBAC).
func (in *Input) Allows(req *cedar.Request) (bool, []string) {
	idx := newRoleIndex(in)
	var why []string
	check := func(b binding) {
		applies := false
		for _, s := range b.subjects {
			if subjectApplies(req.User, s, b.namespace) {
				applies = true
				break
			}
		}
		if !applies {
			return
		}
		rules, roleDesc, ok := idx.rules(b)
		if !ok {
			return
		}
		for i := range rules {
			if RuleAllows(req, &rules[i]) {
				why = append(why, fmt.Sprintf("%s -> %s rule %d", b.describe(), roleDesc, i))
			}
		}
	}
	for _, b := range bindingsOf(in) {
		if b.kind == kindRoleBinding && (req.Namespace == "" || req.Namespace != b.namespace) {
			continue
		}
		check(b)
	}
	return len(why) > 0, why
}
