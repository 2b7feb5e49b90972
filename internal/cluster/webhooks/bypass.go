package webhooks

import (
	"fmt"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
)

// Bypass names the identities whose requests go around kcedar. The
// AuthorizationConfiguration's matchConditions send their requests past
// kcedar's authorizer to the next ones (Node, RBAC), so kcedar never
// answers them, and never with a conditional allow. The conditions webhook
// (--admission-enforcement) can therefore leave the same identities out of
// admission: there is nothing of kcedar's to enforce on their requests, and
// a kcedar outage does not stop their writes (the API server's own Leases,
// kubelets' heartbeats, controllers' leader election, kcedar's status
// Lease).
//
// Both sides are rendered from one list of rules (identityRules), each
// rule once per expression environment: a SubjectAccessReview's
// request.user and request.groups for the authorizer, an AdmissionRequest's
// request.userInfo.username and request.userInfo.groups for the webhook.
// Excludes is the same list in Go.
type Bypass struct {
	// ServiceAccount is kcedar's own ServiceAccount as NAMESPACE/NAME (its
	// requests skip kcedar, so it can read its policy objects before its
	// set loads, and renew its status Lease while it is not ready); ""
	// for none.
	ServiceAccount string
	// ControlPlane also bypasses the control plane: the groups
	// system:masters and system:nodes, every valid ServiceAccount username
	// of kube-system, and ControlPlaneUsers.
	ControlPlane bool
}

// ControlPlaneUsers are the control plane's own users that bypass kcedar
// with Bypass.ControlPlane (besides nodes, system:masters and kube-system's
// ServiceAccounts).
var ControlPlaneUsers = []string{"system:kube-controller-manager", "system:kube-scheduler", "system:kube-proxy", "system:apiserver"}

// kubeSystemServiceAccountPattern matches exactly the usernames
// serviceaccount.SplitUsername accepts with namespace kube-system: the
// prefix and a DNS-1123 subdomain (the name of a ServiceAccount), whose
// length kubeSystemServiceAccountMaxLen bounds. CEL's matches() searches,
// hence the anchors; [.] is a dot without an escape in CEL's string.
const kubeSystemServiceAccountPattern = `^system:serviceaccount:kube-system:[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`

// kubeSystemServiceAccountMaxLen is the longest such username: the prefix
// and a subdomain of at most 253 characters.
var kubeSystemServiceAccountMaxLen = len(serviceaccount.ServiceAccountUsernamePrefix+"kube-system:") + validation.DNS1123SubdomainMaxLength

// celEnvironment is how an expression environment names a request's user
// and groups.
type celEnvironment struct {
	user, groups string
}

var (
	// subjectAccessReviewEnv: the AuthorizationConfiguration's
	// matchConditions see the SubjectAccessReview spec, whose user and
	// groups are always present (groups may be an empty list).
	subjectAccessReviewEnv = celEnvironment{user: "request.user", groups: "request.groups"}
	// admissionEnv: a webhook's matchConditions see the AdmissionRequest,
	// whose userInfo leaves out an empty username or group list.
	admissionEnv = celEnvironment{user: "(has(request.userInfo.username) ? request.userInfo.username : '')", groups: "request.userInfo.groups"}
)

// identityRule is one class of identities that bypasses kcedar.
type identityRule struct {
	// name names the webhook's matchCondition (a qualified name).
	name string
	// expression renders the rule for env: true when the request is not
	// of the class (so it may reach kcedar).
	expression func(env celEnvironment) string
	// excludes is the rule in Go.
	excludes func(user string, groups []string) bool
}

// serviceAccountConditionName names the match condition of Bypass.ServiceAccount.
const serviceAccountConditionName = "exclude-kcedar-service-account"

// rules is b's list of identity rules, in the order both sides render them.
func (b Bypass) rules() ([]identityRule, error) {
	var rules []identityRule
	if b.ServiceAccount != "" {
		username, err := serviceAccountUsername(b.ServiceAccount)
		if err != nil {
			return nil, err
		}
		rules = append(rules, identityRule{name: serviceAccountConditionName,
			expression: func(env celEnvironment) string { return env.user + " != '" + username + "'" },
			excludes:   func(user string, _ []string) bool { return user == username }})
	}
	if !b.ControlPlane {
		return rules, nil
	}
	return append(rules, groupRule("exclude-system-masters", "system:masters"), groupRule("exclude-system-nodes", "system:nodes"),
		identityRule{name: "exclude-kube-system-service-accounts",
			expression: func(env celEnvironment) string {
				return fmt.Sprintf("!(size(%s) <= %d && %s.matches('%s'))", env.user, kubeSystemServiceAccountMaxLen, env.user, kubeSystemServiceAccountPattern)
			},
			excludes: func(user string, _ []string) bool {
				ns, _, err := serviceaccount.SplitUsername(user)
				return err == nil && ns == "kube-system"
			}},
		identityRule{name: "exclude-control-plane-users",
			expression: func(env celEnvironment) string {
				quoted := make([]string, len(ControlPlaneUsers))
				for i, u := range ControlPlaneUsers {
					quoted[i] = "'" + u + "'"
				}
				return "!(" + env.user + " in [" + strings.Join(quoted, ", ") + "])"
			},
			excludes: func(user string, _ []string) bool { return slices.Contains(ControlPlaneUsers, user) }},
	), nil
}

// groupRule bypasses the members of group.
func groupRule(name, group string) identityRule {
	return identityRule{name: name,
		expression: func(env celEnvironment) string {
			return "!has(" + env.groups + ") || !('" + group + "' in " + env.groups + ")"
		},
		excludes: func(_ string, groups []string) bool { return slices.Contains(groups, group) }}
}

// serviceAccountUsername is the username of NAMESPACE/NAME, which must be a
// ServiceAccount name Kubernetes accepts (and so needs no quoting in CEL).
func serviceAccountUsername(namespacedName string) (string, error) {
	ns, name, ok := strings.Cut(namespacedName, "/")
	username := serviceaccount.MakeUsername(ns, name)
	if _, _, err := serviceaccount.SplitUsername(username); !ok || err != nil {
		return "", fmt.Errorf("service account %q: want NAMESPACE/NAME, a DNS-1123 label and a DNS-1123 subdomain", namespacedName)
	}
	return username, nil
}

// Validate reports whether b can be rendered (a valid ServiceAccount).
func (b Bypass) Validate() error {
	_, err := b.rules()
	return err
}

// AuthorizerMatchConditions are the expressions of the
// AuthorizationConfiguration's kcedar webhook (on the SubjectAccessReview
// v1 spec): the API server calls kcedar only when all hold.
func (b Bypass) AuthorizerMatchConditions() ([]string, error) {
	rules, err := b.rules()
	if err != nil {
		return nil, err
	}
	out := make([]string, len(rules))
	for i, r := range rules {
		out[i] = r.expression(subjectAccessReviewEnv)
	}
	return out, nil
}

// AdmissionMatchConditions are the matchConditions of the conditions
// webhook (on the AdmissionRequest): the same identities, left out of
// admission.
func (b Bypass) AdmissionMatchConditions() ([]admissionregistrationv1.MatchCondition, error) {
	rules, err := b.rules()
	if err != nil {
		return nil, err
	}
	out := make([]admissionregistrationv1.MatchCondition, len(rules))
	for i, r := range rules {
		out[i] = admissionregistrationv1.MatchCondition{Name: r.name, Expression: r.expression(admissionEnv)}
	}
	return out, nil
}

// Excludes reports whether a request of user in groups bypasses kcedar:
// what both renderings evaluate to false for.
func (b Bypass) Excludes(user string, groups []string) bool {
	rules, err := b.rules()
	if err != nil {
		return false
	}
	return slices.ContainsFunc(rules, func(r identityRule) bool { return r.excludes(user, groups) })
}

// BypassOf recognizes the matchConditions of a conditions webhook: they must
// be exactly what AdmissionMatchConditions renders for some Bypass (the
// flags of kcedar manifests), in the same order; anything else, a
// condition more or less, another expression, is an error. It returns that
// Bypass.
func BypassOf(conds []admissionregistrationv1.MatchCondition) (Bypass, error) {
	accounts := []string{""}
	for _, c := range conds {
		if c.Name != serviceAccountConditionName {
			continue
		}
		username, ok := strings.CutPrefix(c.Expression, admissionEnv.user+" != '")
		username, ok2 := strings.CutSuffix(username, "'")
		if ns, name, err := serviceaccount.SplitUsername(username); ok && ok2 && err == nil {
			accounts = append(accounts, ns+"/"+name)
		}
	}
	for _, sa := range accounts {
		for _, controlPlane := range []bool{false, true} {
			b := Bypass{ServiceAccount: sa, ControlPlane: controlPlane}
			if want, err := b.AdmissionMatchConditions(); err == nil && slices.Equal(want, conds) {
				return b, nil
			}
		}
	}
	names := make([]string, len(conds))
	for i, c := range conds {
		names[i] = c.Name
	}
	return Bypass{}, fmt.Errorf("its matchConditions %v are not those kcedar manifests writes (kcedar's ServiceAccount and, with --bypass-control-plane, the control plane): they may leave out requests kcedar allowed on conditions", names)
}
