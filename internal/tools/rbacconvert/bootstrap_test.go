package rbacconvert

import (
	"slices"
	"strings"
	"testing"

	"github.com/kcedar/kcedar/internal/testing/embeddedschema"
)

// The bootstrap policy's warnings are all Kubernetes' own; the features
// fixture (your roles) has none of them.
func TestBootstrapWarningsSeparated(t *testing.T) {
	s := embeddedschema.Schema(t)
	res, err := Convert(s, readInput(t, "testdata/bootstrap", "testdata/features.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	boot, err := Convert(s, readInput(t, "testdata/bootstrap"))
	if err != nil {
		t.Fatal(err)
	}
	if len(boot.Warnings) == 0 || !slices.Equal(boot.Bootstrap, boot.Warnings) || len(boot.UserWarnings()) != 0 {
		t.Fatalf("bootstrap fixture: %d warnings, %d bootstrap, user %q", len(boot.Warnings), len(boot.Bootstrap), boot.UserWarnings())
	}
	if !slices.Equal(res.Bootstrap, boot.Bootstrap) {
		t.Errorf("with the features fixture, the bootstrap warnings changed:\n%q\nwant\n%q", res.Bootstrap, boot.Bootstrap)
	}
	if user := res.UserWarnings(); len(user)+len(res.Bootstrap) != len(res.Warnings) || len(user) == 0 {
		t.Errorf("%d user + %d bootstrap warnings, want %d in all", len(user), len(res.Bootstrap), len(res.Warnings))
	}
}

// A warning is Kubernetes' own only when the object it names is: your
// binding to a bootstrap role, your role's typo and an aggregated bootstrap
// role (whose rules may be yours) are told apart.
func TestBootstrapWarningsByOrigin(t *testing.T) {
	const yaml = `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: boot, labels: {kubernetes.io/bootstrapping: rbac-defaults}}
rules: [{apiGroups: [""], resources: [pods/finalizers], verbs: [update]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: agg, labels: {kubernetes.io/bootstrapping: rbac-defaults}}
aggregationRule: {clusterRoleSelectors: [{matchLabels: {x: "y"}}]}
rules: [{apiGroups: [""], resources: [widgets], verbs: [get]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: mine}
rules: [{apiGroups: [""], resources: [pod], verbs: [get]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: b-boot}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: boot}
subjects: [{kind: User, name: alice}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: b-agg}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: agg}
subjects: [{kind: User, name: alice}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: b-mine}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: mine}
subjects: [{kind: User, name: alice}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: b-gone, labels: {kubernetes.io/bootstrapping: rbac-defaults}}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: gone}
subjects: [{kind: User, name: alice}]
`
	in := &Input{}
	if err := in.Read("x.yaml", strings.NewReader(yaml)); err != nil {
		t.Fatal(err)
	}
	res, err := Convert(embeddedschema.Schema(t), in)
	if err != nil {
		t.Fatal(err)
	}
	prefixes := func(ws []string) []string {
		var out []string
		for _, w := range ws {
			out = append(out, w[:strings.Index(w, ":")])
		}
		return out
	}
	if got, want := prefixes(res.Bootstrap), []string{"ClusterRole/boot rule 0", "ClusterRoleBinding/b-gone"}; !slices.Equal(got, want) {
		t.Errorf("bootstrap warnings on %q, want %q", got, want)
	}
	if got, want := prefixes(res.UserWarnings()), []string{"ClusterRole/agg rule 0", "ClusterRole/mine rule 0"}; !slices.Equal(got, want) {
		t.Errorf("user warnings on %q, want %q", got, want)
	}
}
