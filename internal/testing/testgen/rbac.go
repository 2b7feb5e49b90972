package testgen

import (
	"fmt"
	"math/rand/v2"
	"slices"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RBACConfig and SubjectAccessReviews build seeded RBAC configurations and
// SubjectAccessReviews that exercise every RBAC feature the converter handles
// (wildcard verbs, groups and resources, subresources and `*/sub`, literal
// `res/*`, resourceNames, non-resource URLs with prefixes, users, groups,
// ServiceAccounts with and without a namespace, RoleBindings to ClusterRoles,
// aggregated ClusterRoles with their rules filled in as the aggregation
// controller would, bindings to missing roles, custom verbs). The e2e parity
// test applies a configuration to a real kube-apiserver and compares its
// answers with kcedar's; the benchmarks use it as a workload.

// RBACObjects is a generated RBAC configuration: the objects the converter
// (rbacconvert.Input) and a real kube-apiserver take.
type RBACObjects struct {
	Roles               []rbacv1.Role
	ClusterRoles        []rbacv1.ClusterRole
	RoleBindings        []rbacv1.RoleBinding
	ClusterRoleBindings []rbacv1.ClusterRoleBinding
}

// WithoutEmptyNames is o with "" dropped from every rule's resourceNames (a
// rule left with none matches nothing): what o allows and it denies is
// allowed only through RBAC's "" corner (a request without a name matches a
// rule naming "").
func (o *RBACObjects) WithoutEmptyNames() *RBACObjects {
	strip := func(rules []rbacv1.PolicyRule) []rbacv1.PolicyRule {
		out := make([]rbacv1.PolicyRule, len(rules))
		for i, r := range rules {
			r = *r.DeepCopy()
			if len(r.ResourceNames) > 0 {
				names := slices.DeleteFunc(r.ResourceNames, func(n string) bool { return n == "" })
				if len(names) == 0 {
					names = []string{"\x00none"}
				}
				r.ResourceNames = names
			}
			out[i] = r
		}
		return out
	}
	cp := &RBACObjects{RoleBindings: o.RoleBindings, ClusterRoleBindings: o.ClusterRoleBindings}
	for _, r := range o.Roles {
		r.Rules = strip(r.Rules)
		cp.Roles = append(cp.Roles, r)
	}
	for _, r := range o.ClusterRoles {
		r.Rules = strip(r.Rules)
		cp.ClusterRoles = append(cp.ClusterRoles, r)
	}
	return cp
}

// Namespaces are the namespaces generated Roles and RoleBindings live in.
var Namespaces = []string{"team-a", "team-b", "team-c"}

var (
	genUsers  = []string{"alice", "bob", "carol", "dave", "erin", "system:node:n1", "system:serviceaccount:team-a:builder", "system:serviceaccount:team-a:Builder"}
	genGroups = []string{"dev", "ops", "qa", "auditors", "system:serviceaccounts:team-b", "system:authenticated", "system:serviceaccounts"}
	genSAs    = [][2]string{{"team-a", "builder"}, {"team-b", "deployer"}, {"team-c", "default"}, {"team-a", "ci"}}
	genNames  = []string{"web", "db", "n1", "alice", "team-a", "cfg", "*"}
	genVerbs  = []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection", "impersonate", "bind", "escalate", "approve", "sign", "attest", "use", "frobnicate",
		// Constrained impersonation: the group impersonate-on:user-info:* is a literal verb to RBAC.
		"impersonate:user-info", "impersonate:associated-node", "impersonate:serviceaccount", "impersonate-on:user-info:get",
		"impersonate-on:serviceaccount:list", "impersonate-on:associated-node:create", "impersonate-on:user-info:*"}
	genPaths  = []string{"/healthz", "/healthz/etcd", "/livez", "/readyz", "/version", "/api", "/api/v1", "/apis", "/apis/apps", "/metrics", "/logs/kube.log", "/openapi/v3", "/a*b/c", "/custom/thing"}
	genURLs   = []string{"/healthz", "/healthz/*", "/livez", "/version", "/api", "/api/*", "/apis/*", "/metrics", "/logs/*", "/a*b/*", "/custom/thing", "*"}
	genNRVerb = []string{"get", "post", "put", "delete", "head", "list", "impersonate-on:user-info:get", "impersonate-on:arbitrary-node:post"}
)

// genResource is a resource the generator knows: typed in the default schema
// or not.
type genResource struct {
	group, resource, sub string
	namespaced           bool
}

var genResources = []genResource{
	{"", "pods", "", true}, {"", "pods", "exec", true}, {"", "pods", "log", true}, {"", "pods", "status", true},
	{"", "secrets", "", true}, {"", "configmaps", "", true}, {"", "services", "", true}, {"", "services", "proxy", true},
	{"", "serviceaccounts", "", true}, {"", "namespaces", "", false}, {"", "namespaces", "status", false},
	{"", "nodes", "", false}, {"", "nodes", "proxy", false}, {"", "users", "", false}, {"", "groups", "", false},
	{"apps", "deployments", "", true}, {"apps", "deployments", "scale", true}, {"apps", "replicasets", "scale", true},
	{"batch", "jobs", "", true}, {"batch", "jobs", "status", true},
	{"rbac.authorization.k8s.io", "roles", "", true}, {"rbac.authorization.k8s.io", "clusterroles", "", false},
	{"certificates.k8s.io", "signers", "", false}, {"certificates.k8s.io", "certificatesigningrequests", "approval", false},
	{"authentication.k8s.io", "userextras", "scopes", false}, {"authentication.k8s.io", "userextras", "team", false},
	{"apiextensions.k8s.io", "customresourcedefinitions", "", false},
	// The identities of constrained impersonation.
	{"authentication.k8s.io", "users", "", false}, {"authentication.k8s.io", "groups", "", false},
	{"authentication.k8s.io", "nodes", "", false}, {"authentication.k8s.io", "serviceaccounts", "", true},
	{"authentication.k8s.io", "uids", "", false},
	// Not in the default schema: k8s::Resource.
	{"example.com", "widgets", "", true}, {"example.com", "widgets", "status", true}, {"example.com", "gadgets", "", false},
	{"", "frobs", "", true}, {"metrics.k8s.io", "pods", "", true},
}

func pick[T any](r *rand.Rand, s []T) T { return s[r.IntN(len(s))] }

func pickN[T comparable](r *rand.Rand, s []T, n int) []T {
	var out []T
	for len(out) < n {
		v := pick(r, s)
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

func genRule(r *rand.Rand, namespaced bool) rbacv1.PolicyRule {
	if !namespaced && r.IntN(8) == 0 {
		rule := rbacv1.PolicyRule{NonResourceURLs: pickN(r, genURLs, 1+r.IntN(3))}
		if r.IntN(6) == 0 {
			rule.Verbs = []string{"*"}
		} else {
			rule.Verbs = pickN(r, genNRVerb, 1+r.IntN(2))
		}
		return rule
	}
	var rule rbacv1.PolicyRule
	res := pick(r, genResources)
	rule.APIGroups = []string{res.group}
	if r.IntN(10) == 0 {
		rule.APIGroups = []string{"*"}
	} else if r.IntN(5) == 0 {
		rule.APIGroups = append(rule.APIGroups, pick(r, genResources).group)
	}
	for i := 0; i < 1+r.IntN(3); i++ {
		// Resources of the chosen groups, sometimes of others.
		cand := pick(r, genResources)
		for j := 0; j < 5 && !slices.Contains(rule.APIGroups, cand.group) && !slices.Contains(rule.APIGroups, "*"); j++ {
			cand = pick(r, genResources)
		}
		name := cand.resource
		if cand.sub != "" {
			name += "/" + cand.sub
		}
		switch n := r.IntN(40); {
		case n < 3:
			name = "*"
		case n < 6:
			name = "*/" + pick(r, []string{"status", "scale", "exec", "proxy", "scopes"})
		case n < 7:
			name = cand.resource + "/*"
		case n < 8:
			name = "*/*"
		}
		if !slices.Contains(rule.Resources, name) {
			rule.Resources = append(rule.Resources, name)
		}
	}
	switch n := r.IntN(10); {
	case n == 0:
		rule.Verbs = []string{"*"}
	default:
		rule.Verbs = pickN(r, genVerbs, 1+r.IntN(4))
	}
	if r.IntN(4) == 0 {
		rule.ResourceNames = pickN(r, genNames, 1+r.IntN(2))
		if r.IntN(2) == 0 {
			// "" matches requests that name no object.
			rule.ResourceNames = append(rule.ResourceNames[:r.IntN(len(rule.ResourceNames))], "")
		}
	}
	return rule
}

// RBACConfig returns a seeded RBAC configuration of at least roles Roles
// and ClusterRoles (a fifth of the ClusterRoles aggregated, their rules filled
// in from the roles they select) and bindings bindings (some to missing
// roles). Objects are in Namespaces.
func RBACConfig(seed uint64, roles, bindings int) *RBACObjects {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	in := &RBACObjects{}
	nCluster := roles / 2
	nAgg := nCluster / 5
	for i := 0; i < nCluster-nAgg; i++ {
		cr := rbacv1.ClusterRole{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("gen-cr-%02d", i), Labels: map[string]string{}},
		}
		for j := 0; j < 1+r.IntN(4); j++ {
			cr.Rules = append(cr.Rules, genRule(r, false))
		}
		cr.Labels[fmt.Sprintf("kcedar.test/aggregate-to-agg-%02d", r.IntN(max(nAgg, 1)))] = "true"
		in.ClusterRoles = append(in.ClusterRoles, cr)
	}
	for i := 0; i < nAgg; i++ {
		label := fmt.Sprintf("kcedar.test/aggregate-to-agg-%02d", i)
		cr := rbacv1.ClusterRole{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("gen-agg-%02d", i)},
			AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{
				{MatchLabels: map[string]string{label: "true"}},
			}},
		}
		// What the clusterrole-aggregation controller would write.
		for _, src := range in.ClusterRoles {
			if src.Labels[label] == "true" {
				for _, rule := range src.Rules {
					if !slices.ContainsFunc(cr.Rules, func(x rbacv1.PolicyRule) bool { return equalRules(x, rule) }) {
						cr.Rules = append(cr.Rules, rule)
					}
				}
			}
		}
		in.ClusterRoles = append(in.ClusterRoles, cr)
	}
	for i := 0; i < roles-nCluster; i++ {
		ro := rbacv1.Role{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
			ObjectMeta: metav1.ObjectMeta{Namespace: Namespaces[i%len(Namespaces)], Name: fmt.Sprintf("gen-role-%02d", i)},
		}
		for j := 0; j < 1+r.IntN(4); j++ {
			ro.Rules = append(ro.Rules, genRule(r, true))
		}
		in.Roles = append(in.Roles, ro)
	}
	subjects := func(ns string) []rbacv1.Subject {
		var out []rbacv1.Subject
		for j := 0; j < 1+r.IntN(3); j++ {
			switch r.IntN(3) {
			case 0:
				out = append(out, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: pick(r, genUsers)})
			case 1:
				out = append(out, rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: pick(r, genGroups)})
			default:
				sa := pick(r, genSAs)
				s := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: sa[0], Name: sa[1]}
				if ns != "" && r.IntN(2) == 0 {
					s.Namespace = "" // defaults to the binding's namespace
				}
				out = append(out, s)
			}
		}
		return out
	}
	bootstrap := []string{"system:basic-user", "system:discovery", "system:public-info-viewer", "system:node-proxier", "view", "system:auth-delegator"}
	for i := 0; i < bindings; i++ {
		missing := r.IntN(20) == 0
		if i%5 < 2 {
			crb := rbacv1.ClusterRoleBinding{
				TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("gen-crb-%03d", i)},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: pick(r, in.ClusterRoles).Name},
				Subjects:   subjects(""),
			}
			switch {
			case missing:
				crb.RoleRef.Name = fmt.Sprintf("gen-missing-%03d", i)
			case r.IntN(10) == 0:
				crb.RoleRef.Name = pick(r, bootstrap)
			}
			in.ClusterRoleBindings = append(in.ClusterRoleBindings, crb)
			continue
		}
		ns := pick(r, Namespaces)
		rb := rbacv1.RoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("gen-rb-%03d", i)},
			Subjects:   subjects(ns),
		}
		switch n := r.IntN(10); {
		case missing:
			rb.RoleRef = rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: pick(r, []string{"Role", "ClusterRole"}), Name: fmt.Sprintf("gen-missing-%03d", i)}
		case n < 4:
			rb.RoleRef = rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: pick(r, in.ClusterRoles).Name}
		case n < 5:
			rb.RoleRef = rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: pick(r, bootstrap)}
		default:
			var local []string
			for _, ro := range in.Roles {
				if ro.Namespace == ns {
					local = append(local, ro.Name)
				}
			}
			rb.RoleRef = rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: pick(r, local)}
			if r.IntN(8) == 0 {
				// A Role of that name exists in another namespace only.
				for _, ro := range in.Roles {
					if ro.Namespace != ns {
						rb.RoleRef.Name = ro.Name
						break
					}
				}
			}
		}
		in.RoleBindings = append(in.RoleBindings, rb)
	}
	return in
}

func equalRules(a, b rbacv1.PolicyRule) bool {
	return slices.Equal(a.Verbs, b.Verbs) && slices.Equal(a.APIGroups, b.APIGroups) && slices.Equal(a.Resources, b.Resources) &&
		slices.Equal(a.ResourceNames, b.ResourceNames) && slices.Equal(a.NonResourceURLs, b.NonResourceURLs)
}

// SubjectAccessReviews returns n seeded SubjectAccessReview specs over the
// generator's users, groups, ServiceAccounts, resources and URLs: every verb
// (including "*" and custom ones), typed and unknown resources, subresources
// both as a subresource and inside the resource ("pods/exec" with no
// subresource), "*" groups, resources and subresources, empty and set names,
// and empty and set namespaces for namespaced and cluster-scoped resources
// alike (a SubjectAccessReview may name a namespace for a cluster-scoped
// resource; RBAC then applies that namespace's RoleBindings). system:masters
// is never used.
func SubjectAccessReviews(seed uint64, n int) []authorizationv1.SubjectAccessReviewSpec {
	r := rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d))
	out := make([]authorizationv1.SubjectAccessReviewSpec, 0, n)
	for len(out) < n {
		var spec authorizationv1.SubjectAccessReviewSpec
		switch k := r.IntN(10); {
		case k < 5:
			spec.User = pick(r, genUsers)
			for _, g := range genGroups {
				if r.IntN(4) == 0 {
					spec.Groups = append(spec.Groups, g)
				}
			}
		case k < 8:
			sa := pick(r, genSAs)
			spec.User = "system:serviceaccount:" + sa[0] + ":" + sa[1]
			spec.Groups = []string{"system:serviceaccounts", "system:serviceaccounts:" + sa[0], "system:authenticated"}
		case k < 9:
			spec.User = "system:node:" + pick(r, []string{"n1", "n2"})
			spec.Groups = []string{"system:nodes", "system:authenticated"}
		default:
			spec.User = "system:anonymous"
			spec.Groups = []string{"system:unauthenticated"}
		}
		if r.IntN(6) == 0 {
			verb := pick(r, genNRVerb)
			if r.IntN(8) == 0 {
				verb = "*"
			}
			spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: pick(r, genPaths), Verb: verb}
			out = append(out, spec)
			continue
		}
		res := pick(r, genResources)
		ra := &authorizationv1.ResourceAttributes{Group: res.group, Resource: res.resource, Subresource: res.sub}
		ra.Verb = pick(r, genVerbs)
		if r.IntN(12) == 0 {
			ra.Verb = "*"
		}
		switch k := r.IntN(30); {
		case k == 0:
			ra.Group = "*"
		case k == 1:
			ra.Resource = "*"
		case k == 2:
			ra.Subresource = "*"
		case k == 3:
			ra.Subresource = ""
		case k < 7 && ra.Subresource != "":
			// The subresource inside the resource, which RBAC compares as
			// one string.
			ra.Resource, ra.Subresource = ra.Resource+"/"+ra.Subresource, ""
		}
		if r.IntN(5) < 3 {
			ra.Name = pick(r, genNames)
		}
		// Namespaces: mostly the generated ones, for every kind of resource.
		switch k := r.IntN(8); {
		case k < 2:
		case k < 7:
			ra.Namespace = pick(r, Namespaces)
		default:
			ra.Namespace = "other"
		}
		if res.group == "" && res.resource == "namespaces" && ra.Name != "" && r.IntN(2) == 0 {
			// As kube-apiserver sets it for a namespace.
			ra.Name = pick(r, Namespaces)
			ra.Namespace = ra.Name
		}
		spec.ResourceAttributes = ra
		out = append(out, spec)
	}
	return out
}
