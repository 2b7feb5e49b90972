package main

import (
	"context"
	"fmt"
	"io"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/kubernetes"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/tools/rbacconvert"
)

// bootstrapEveryoneRBAC are the grants of Kubernetes' bootstrap RBAC to
// every user (k8s.io/kubernetes plugin/pkg/auth/authorizer/rbac/
// bootstrappolicy): the ClusterRoles system:discovery, system:basic-user
// and system:public-info-viewer, bound to system:authenticated (and the
// last to system:unauthenticated too). A test checks them against the
// bootstrap policy of kube-apiserver v1.37.1.
func bootstrapEveryoneRBAC() *rbacconvert.Input {
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Labels: map[string]string{rbacconvert.BootstrapLabel: "rbac-defaults"},
			Annotations: map[string]string{rbacv1.AutoUpdateAnnotationKey: "true"}}
	}
	get := []string{"get"}
	roles := []rbacv1.ClusterRole{
		{ObjectMeta: meta("system:discovery"), Rules: []rbacv1.PolicyRule{{Verbs: get, NonResourceURLs: []string{
			"/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*", "/readyz", "/version", "/version/"}}}},
		{ObjectMeta: meta("system:basic-user"), Rules: []rbacv1.PolicyRule{
			{Verbs: []string{"create"}, APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"selfsubjectaccessreviews", "selfsubjectrulesreviews"}},
			{Verbs: []string{"create"}, APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"selfsubjectreviews"}}}},
		{ObjectMeta: meta("system:public-info-viewer"), Rules: []rbacv1.PolicyRule{{Verbs: get, NonResourceURLs: []string{
			"/healthz", "/livez", "/readyz", "/version", "/version/"}}}},
	}
	group := func(name string) rbacv1.Subject {
		return rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: name}
	}
	in := &rbacconvert.Input{ClusterRoles: roles}
	for _, r := range roles {
		subjects := []rbacv1.Subject{group(user.AllAuthenticated)}
		if r.Name == "system:public-info-viewer" {
			subjects = append(subjects, group(user.AllUnauthenticated))
		}
		in.ClusterRoleBindings = append(in.ClusterRoleBindings, rbacv1.ClusterRoleBinding{ObjectMeta: meta(r.Name), Subjects: subjects,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: r.Name}})
	}
	return in
}

// bootstrapEveryoneSource names bootstrapEveryoneRBAC in the output.
const bootstrapEveryoneSource = "the bootstrap RBAC every user has (system:discovery, system:basic-user, system:public-info-viewer; without --cluster only these are read)"

// generateRBAC is the RBAC requests are left out for, converted to Cedar,
// and what it is: the cluster's with --cluster, else the bootstrap grants
// to every user; nil with --include-rbac-allowed. Rules that do not
// convert are left out of it (their requests are generated), counted on
// stderr.
func (o *generateOptions) generateRBAC(ctx context.Context, s *schemagen.Schema, stderr io.Writer) (*cedarlang.PolicySet, string, error) {
	if o.includeRBACAllowed {
		return nil, "", nil
	}
	in, source := bootstrapEveryoneRBAC(), bootstrapEveryoneSource
	if o.pol.cluster {
		cfg, err := o.pol.conn.RESTConfig()
		if err != nil {
			return nil, "", &exitError{2, fmt.Errorf("--cluster: %w", err)}
		}
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, "", &exitError{2, err}
		}
		in = &rbacconvert.Input{}
		if err := in.ReadCluster(ctx, cs); err != nil {
			return nil, "", &exitError{2, fmt.Errorf("--cluster: reading the RBAC: %w (--include-rbac-allowed does without it)", err)}
		}
		source = fmt.Sprintf("the cluster's RBAC (%d ClusterRoles, %d Roles, %d ClusterRoleBindings, %d RoleBindings)",
			len(in.ClusterRoles), len(in.Roles), len(in.ClusterRoleBindings), len(in.RoleBindings))
	}
	res, err := rbacconvert.Convert(s, in)
	if err != nil {
		return nil, "", err
	}
	if n := len(res.UserWarnings()); n > 0 {
		fmt.Fprintf(stderr, "note: %s converting the RBAC (kcedar rbac convert lists them): requests only those rules allow are generated\n", plural(n, "warning"))
	}
	set, err := cedarlang.NewPolicySet(res.Parsed)
	if err != nil {
		return nil, "", fmt.Errorf("the converted RBAC does not load (a bug in kcedar): %w", err)
	}
	return set, source, nil
}
