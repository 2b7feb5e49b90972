// Package deploy tests kcedar's kustomize manifests (deploy/): it renders them
// with kustomize (the library kubectl apply -k uses) and checks the result.
package deploy

import (
	"os"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	rbacvalidation "k8s.io/component-helpers/auth/rbac/validation"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/kcedar/kcedar/internal/cluster/policyobjects"
)

// object is one rendered object, decoded strictly into its typed struct.
type object struct {
	kind, name, namespace string
	yaml                  []byte
	typed                 any
}

// typedKinds are the kinds deploy/ may hold, each decoded strictly into its
// k8s.io/api struct: a field the struct does not know fails the test.
var typedKinds = map[string]func() any{
	"Namespace":                func() any { return &corev1.Namespace{} },
	"ServiceAccount":           func() any { return &corev1.ServiceAccount{} },
	"Secret":                   func() any { return &corev1.Secret{} },
	"Service":                  func() any { return &corev1.Service{} },
	"CustomResourceDefinition": func() any { return &apiextensionsv1.CustomResourceDefinition{} },
	"ClusterRole":              func() any { return &rbacv1.ClusterRole{} },
	"ClusterRoleBinding":       func() any { return &rbacv1.ClusterRoleBinding{} },
	"Role":                     func() any { return &rbacv1.Role{} },
	"RoleBinding":              func() any { return &rbacv1.RoleBinding{} },
	"DaemonSet":                func() any { return &appsv1.DaemonSet{} },
	"Deployment":               func() any { return &appsv1.Deployment{} },
	"PodDisruptionBudget":      func() any { return &policyv1.PodDisruptionBudget{} },
}

// render runs kustomize on dir, as kubectl apply -k does, and decodes every
// object strictly.
func render(t *testing.T, dir string) []object {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	var out []object
	for _, r := range m.Resources() {
		y, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		newTyped, ok := typedKinds[r.GetKind()]
		if !ok {
			t.Fatalf("%s renders a %s, which this test does not know how to check: add it to typedKinds", dir, r.GetKind())
		}
		v := newTyped()
		if err := yaml.UnmarshalStrict(y, v); err != nil {
			t.Fatalf("%s %s/%s does not decode strictly: %v\n%s", dir, r.GetKind(), r.GetName(), err, y)
		}
		out = append(out, object{r.GetKind(), r.GetName(), r.GetNamespace(), y, v})
	}
	return out
}

func find[T any](t *testing.T, objs []object, kind, name string) *T {
	t.Helper()
	for _, o := range objs {
		if o.kind == kind && o.name == name {
			return o.typed.(*T)
		}
	}
	t.Fatalf("no %s %s among %v", kind, name, kinds(objs))
	return nil
}

func kinds(objs []object) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.kind+"/"+o.name)
	}
	slices.Sort(out)
	return out
}

func TestDeployCRDsMatch(t *testing.T) {
	data, err := os.ReadFile("components/crds-rbac/crds.yaml")
	if err != nil {
		t.Fatal(err)
	}
	strip := func(b []byte) string { // the first line is a comment naming the copy
		_, rest, _ := strings.Cut(string(b), "\n")
		return rest
	}
	if strip(data) != strip(policyobjects.CRDYAML) {
		t.Fatal("deploy/components/crds-rbac/crds.yaml differs from internal/cluster/policyobjects/crds.yaml: copy it over")
	}
}

const namespace = "kcedar-system"

// common are the objects of both the base and the Deployment overlay.
var common = append(slices.Clone(crdsRBAC), "Namespace/kcedar-system", "PodDisruptionBudget/kcedar", "Secret/kcedar-condition-keys")

func TestBase(t *testing.T) {
	objs := render(t, "base")
	want := slices.Sorted(slices.Values(append(slices.Clone(common), "DaemonSet/kcedar")))
	if got := kinds(objs); !slices.Equal(got, want) {
		t.Fatalf("base renders\n%v\nwant\n%v", got, want)
	}
	checkCommon(t, objs)
	ds := find[appsv1.DaemonSet](t, objs, "DaemonSet", "kcedar")
	spec := ds.Spec.Template.Spec
	if !spec.HostNetwork || spec.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
		t.Fatalf("DaemonSet: hostNetwork=%v dnsPolicy=%s", spec.HostNetwork, spec.DNSPolicy)
	}
	if _, ok := spec.NodeSelector["node-role.kubernetes.io/control-plane"]; !ok || len(spec.NodeSelector) != 1 {
		t.Fatalf("DaemonSet nodeSelector %v: control-plane nodes only", spec.NodeSelector)
	}
	checkPod(t, objs, ds.Spec.Selector, ds.Spec.Template, "127.0.0.1:8443")
}

func TestDeploymentOverlay(t *testing.T) {
	objs := render(t, "overlays/deployment")
	want := slices.Sorted(slices.Values(append(slices.Clone(common), "Deployment/kcedar", "Service/kcedar")))
	if got := kinds(objs); !slices.Equal(got, want) {
		t.Fatalf("overlays/deployment renders\n%v\nwant\n%v", got, want)
	}
	checkCommon(t, objs)
	d := find[appsv1.Deployment](t, objs, "Deployment", "kcedar")
	if d.Spec.Template.Spec.HostNetwork {
		t.Fatal("the Deployment must not use the host network")
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas < 2 {
		t.Fatal("the Deployment must run several replicas")
	}
	checkPod(t, objs, d.Spec.Selector, d.Spec.Template, ":8443")
	svc := find[corev1.Service](t, objs, "Service", "kcedar")
	if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("the Service's selector %v does not select the Deployment's pods %v", svc.Spec.Selector, d.Spec.Template.Labels)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 443 || svc.Spec.Ports[0].TargetPort.String() != "https" {
		t.Errorf("Service ports %+v: want 443 -> the container's https port", svc.Spec.Ports)
	}
}

// crdsRBAC are the objects of components/crds-rbac, which the base includes.
var crdsRBAC = []string{
	"ClusterRole/kcedar", "ClusterRole/kcedar-policy-reader", "ClusterRoleBinding/kcedar", "CustomResourceDefinition/cedarpolicies.kcedar.dev",
	"CustomResourceDefinition/namespacedcedarpolicies.kcedar.dev", "Role/kcedar-status-lease",
	"RoleBinding/kcedar-status-lease", "ServiceAccount/kcedar",
}

// TestCRDsRBACComponent: the component builds on its own (kubectl apply -k,
// for static pods and a kcedar run outside the cluster) and holds only the
// CRDs, the ServiceAccount and its RBAC: no namespace, Secret or workload.
func TestCRDsRBACComponent(t *testing.T) {
	objs := render(t, "components/crds-rbac")
	only := []string{"CustomResourceDefinition", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
	for _, o := range objs {
		if !slices.Contains(only, o.kind) {
			t.Errorf("components/crds-rbac holds %s/%s: only %v belong there", o.kind, o.name, only)
		}
	}
	if got := kinds(objs); !slices.Equal(got, crdsRBAC) {
		t.Fatalf("components/crds-rbac renders\n%v\nwant\n%v", got, crdsRBAC)
	}
	checkCRDsRBAC(t, objs)
}

// checkCommon checks what both variants share: the CRDs and RBAC
// (checkCRDsRBAC) and the condition-key Secret.
func checkCommon(t *testing.T, objs []object) {
	t.Helper()
	checkCRDsRBAC(t, objs)
	if s := find[corev1.Secret](t, objs, "Secret", "kcedar-condition-keys"); s.StringData["keys"] == "" {
		t.Error("the condition-key Secret has no keys entry")
	}
}

// checkCRDsRBAC checks that everything namespaced is in kcedar-system, the
// bindings name the ServiceAccount and roles that exist, the CRDs are
// kcedar's, and the RBAC covers every call kcedar makes.
func checkCRDsRBAC(t *testing.T, objs []object) {
	t.Helper()
	for _, o := range objs {
		clusterScoped := slices.Contains([]string{"Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding"}, o.kind)
		if clusterScoped != (o.namespace == "") || (!clusterScoped && o.namespace != namespace) {
			t.Errorf("%s/%s in namespace %q", o.kind, o.name, o.namespace)
		}
	}
	crds, err := policyobjects.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	for _, crd := range crds {
		got := find[apiextensionsv1.CustomResourceDefinition](t, objs, "CustomResourceDefinition", crd.Name)
		if got.Spec.Group != policyobjects.Group || got.Spec.Names.Kind != crd.Spec.Names.Kind {
			t.Errorf("CRD %s: %s %s", crd.Name, got.Spec.Group, got.Spec.Names.Kind)
		}
	}
	sa := rbacv1.Subject{Kind: "ServiceAccount", Name: find[corev1.ServiceAccount](t, objs, "ServiceAccount", "kcedar").Name, Namespace: namespace}
	crb := find[rbacv1.ClusterRoleBinding](t, objs, "ClusterRoleBinding", "kcedar")
	rb := find[rbacv1.RoleBinding](t, objs, "RoleBinding", "kcedar-status-lease")
	for _, b := range []struct {
		subjects []rbacv1.Subject
		ref      rbacv1.RoleRef
	}{{crb.Subjects, crb.RoleRef}, {rb.Subjects, rb.RoleRef}} {
		if !slices.Contains(b.subjects, sa) {
			t.Errorf("binding to %s %s does not name %+v", b.ref.Kind, b.ref.Name, sa)
		}
	}
	cr := find[rbacv1.ClusterRole](t, objs, crb.RoleRef.Kind, crb.RoleRef.Name)
	role := find[rbacv1.Role](t, objs, rb.RoleRef.Kind, rb.RoleRef.Name)
	checkRules(t, cr.Rules, role.Rules)
}

// A requiredRule is one permission kcedar serve needs, and the code that
// needs it. Add a line here with every new API call: the e2e test TestDeploy
// runs kcedar with only deploy/'s RBAC and fails on any forbidden request,
// and this list names what that RBAC must keep covering.
type requiredRule struct {
	rule rbacv1.PolicyRule
	by   string
}

// statusLease is serve's default --status-lease-name; its namespace is
// $POD_NAMESPACE (the Role's namespace).
const statusLease = "kcedar-policy-status"

var clusterRules = []requiredRule{
	{rbacv1.PolicyRule{APIGroups: []string{"kcedar.dev"}, Resources: []string{"cedarpolicies", "namespacedcedarpolicies"}, Verbs: []string{"list", "watch"}},
		"internal/cluster/policyobjects Source.Run: dynamic informers on both kinds (--policy-objects)"},
	{rbacv1.PolicyRule{APIGroups: []string{"kcedar.dev"}, Resources: []string{"cedarpolicies", "namespacedcedarpolicies"}, Verbs: []string{"get"}},
		"internal/cluster/policyobjects StatusWriter.write: reads the object before writing its status"},
	{rbacv1.PolicyRule{APIGroups: []string{"kcedar.dev"}, Resources: []string{"cedarpolicies/status", "namespacedcedarpolicies/status"}, Verbs: []string{"update"}},
		"internal/cluster/policyobjects StatusWriter.write: UpdateStatus"},
	{rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"list", "watch"}},
		"internal/cluster/namespaces Informer: resource.namespaceObject (--namespace-objects, on with --live)"},
	{rbacv1.PolicyRule{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"list", "watch"}},
		"internal/cluster/schemarefresh Refresher.Watch: metadata informer on CRDs (--schema-refresh-interval, with --live)"},
	{rbacv1.PolicyRule{APIGroups: []string{"apiregistration.k8s.io"}, Resources: []string{"apiservices"}, Verbs: []string{"list", "watch"}},
		"internal/cluster/schemarefresh Refresher.Watch: metadata informer on APIServices (aggregated APIs)"},
	{rbacv1.PolicyRule{NonResourceURLs: []string{"/api", "/apis", "/api/v1", "/apis/apps/v1", "/openapi/v3", "/openapi/v3/api/v1", "/openapi/v3/apis/apps/v1"}, Verbs: []string{"get"}},
		"schemagen: discovery and OpenAPI v3 documents (--live, --kubeconfig)"},
	{rbacv1.PolicyRule{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"validatingwebhookconfigurations"}, Verbs: []string{"list", "watch"}},
		"internal/cluster/webhooks Verifier.Run, PolicyVerifier.Run: informers on the ValidatingWebhookConfigurations (--admission-enforcement, --policy-objects)"},
	{rbacv1.PolicyRule{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
		"internal/cluster/policyobjects SARReviewer.Allowed: the escalation check of policy-object writes (--policy-objects)"},
}

var leaseRules = []requiredRule{
	{rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}},
		"client-go leader election (StatusWriter.Run): creates the Lease the first time"},
	{rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{statusLease}, Verbs: []string{"get", "update"}},
		"client-go leader election (StatusWriter.Run): reads, acquires and renews the Lease"},
}

// checkRules checks that the roles cover every required rule, with
// kube-apiserver's own rule matching (the comparator RBAC's escalation
// check uses).
func checkRules(t *testing.T, cluster, lease []rbacv1.PolicyRule) {
	t.Helper()
	for _, c := range []struct {
		role  string
		have  []rbacv1.PolicyRule
		wants []requiredRule
	}{{"ClusterRole kcedar", cluster, clusterRules}, {"Role kcedar-status-lease", lease, leaseRules}} {
		for _, want := range c.wants {
			if ok, missing := rbacvalidation.Covers(c.have, []rbacv1.PolicyRule{want.rule}); !ok {
				t.Errorf("%s does not grant %s, which %s needs", c.role, fmtRules(missing), want.by)
			}
		}
	}
}

func fmtRules(rules []rbacv1.PolicyRule) string {
	var out []string
	for _, r := range rules {
		out = append(out, r.String())
	}
	return strings.Join(out, "; ")
}

// TestRulesCanFail: the coverage check refuses roles without the rules.
func TestRulesCanFail(t *testing.T) {
	objs := render(t, "base")
	cr := find[rbacv1.ClusterRole](t, objs, "ClusterRole", "kcedar")
	role := find[rbacv1.Role](t, objs, "Role", "kcedar-status-lease")
	for i := range cr.Rules {
		rules := slices.Delete(slices.Clone(cr.Rules), i, i+1)
		if ok, _ := rbacvalidation.Covers(rules, requiredOf(clusterRules)); ok {
			t.Errorf("without ClusterRole rule %s every required rule is still covered: it is not needed (or the list lacks what needs it)", cr.Rules[i].String())
		}
	}
	for i := range role.Rules {
		rules := slices.Delete(slices.Clone(role.Rules), i, i+1)
		if ok, _ := rbacvalidation.Covers(rules, requiredOf(leaseRules)); ok {
			t.Errorf("without Role rule %s every required rule is still covered", role.Rules[i].String())
		}
	}
}

func requiredOf(rs []requiredRule) []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	for _, r := range rs {
		out = append(out, r.rule)
	}
	return out
}

// checkPod checks the pod template of the DaemonSet or Deployment: the
// selector picks its own pods (and the PDB's), the ServiceAccount and
// Secrets are the deploy's, kcedar watches policy objects and shares its
// condition keys, the probes are /livez and /readyz over HTTPS.
func checkPod(t *testing.T, objs []object, selector *metav1.LabelSelector, tmpl corev1.PodTemplateSpec, listen string) {
	t.Helper()
	if s, err := metav1.LabelSelectorAsSelector(selector); err != nil || !s.Matches(labels.Set(tmpl.Labels)) {
		t.Errorf("the selector does not select its own pods %v (%v)", tmpl.Labels, err)
	}
	spec := tmpl.Spec
	if spec.ServiceAccountName != "kcedar" {
		t.Errorf("serviceAccountName %q", spec.ServiceAccountName)
	}
	if spec.SecurityContext == nil || spec.SecurityContext.RunAsUser == nil || *spec.SecurityContext.RunAsUser != 65532 || !*spec.SecurityContext.RunAsNonRoot {
		t.Error("kcedar must run as the image's non-root user 65532")
	}
	pdb := find[policyv1.PodDisruptionBudget](t, objs, "PodDisruptionBudget", "kcedar")
	if s, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector); err != nil || !s.Matches(labels.Set(tmpl.Labels)) {
		t.Errorf("the PodDisruptionBudget's selector does not select the pods %v (%v)", tmpl.Labels, err)
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers", len(spec.Containers))
	}
	c := spec.Containers[0]
	if c.Image != "kcedar:latest" {
		t.Errorf("image %q: the kustomization's images: entry must apply", c.Image)
	}
	args := strings.Join(c.Args, " ")
	for _, want := range []string{"serve", "--listen=" + listen, "--policy-objects", "--live", "--conditions-key-file=", "--tls-cert-file=", "--client-ca-file="} {
		if !strings.Contains(args, want) {
			t.Errorf("args %q lack %s", args, want)
		}
	}
	if strings.Contains(args, "--status-lease") {
		t.Errorf("args %q: the Role grants the Lease %s in the pod's namespace; keep the defaults", args, statusLease)
	}
	var podNamespace bool
	for _, e := range c.Env {
		if e.Name == "POD_NAMESPACE" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace" {
			podNamespace = true
		}
	}
	if !podNamespace {
		t.Error("POD_NAMESPACE must come from metadata.namespace: the status Lease lives there")
	}
	for name, p := range map[string]*corev1.Probe{"startup": c.StartupProbe, "liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
		want := "/livez"
		if name == "readiness" {
			want = "/readyz"
		}
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != want || p.HTTPGet.Scheme != corev1.URISchemeHTTPS || p.HTTPGet.Port.IntValue() != 8443 {
			t.Errorf("%s probe: want HTTPS GET :8443%s", name, want)
		}
	}
	// Every file an arg names is inside a volume mount.
	mounts := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		mounts[v.Name] = v
	}
	for _, a := range c.Args {
		_, val, ok := strings.Cut(a, "=")
		if !ok || !strings.HasPrefix(val, "/") {
			continue
		}
		var in *corev1.Volume
		for _, m := range c.VolumeMounts {
			if strings.HasPrefix(val, m.MountPath+"/") && m.ReadOnly {
				v := mounts[m.Name]
				in = &v
			}
		}
		if in == nil || in.Secret == nil {
			t.Errorf("%s: not inside a read-only Secret volume", a)
		}
	}
	secrets := map[string]bool{"kcedar-condition-keys": true, "kcedar-serving-cert": true, "kcedar-client-ca": true}
	for _, v := range spec.Volumes {
		if v.Secret == nil || !secrets[v.Secret.SecretName] {
			t.Errorf("volume %s: want one of the Secrets %v", v.Name, secrets)
		}
	}
}

// TestPolicyReaderRole: the ClusterRole kcedar-policy-reader (in the base,
// through components/crds-rbac) lets its holders read both kinds of policy
// objects, and nothing else: no write, no status, no other resource. It is
// bound to no one.
func TestPolicyReaderRole(t *testing.T) {
	objs := render(t, "base")
	role := find[rbacv1.ClusterRole](t, objs, "ClusterRole", "kcedar-policy-reader")
	kinds := []string{"cedarpolicies", "namespacedcedarpolicies"}
	for _, verb := range []string{"get", "list", "watch"} {
		want := rbacv1.PolicyRule{APIGroups: []string{"kcedar.dev"}, Resources: kinds, Verbs: []string{verb}}
		if ok, _ := rbacvalidation.Covers(role.Rules, []rbacv1.PolicyRule{want}); !ok {
			t.Errorf("kcedar-policy-reader does not grant %s", want.String())
		}
	}
	for _, refused := range []rbacv1.PolicyRule{
		{APIGroups: []string{"kcedar.dev"}, Resources: kinds, Verbs: []string{"create"}},
		{APIGroups: []string{"kcedar.dev"}, Resources: kinds, Verbs: []string{"update"}},
		{APIGroups: []string{"kcedar.dev"}, Resources: kinds, Verbs: []string{"patch"}},
		{APIGroups: []string{"kcedar.dev"}, Resources: kinds, Verbs: []string{"delete"}},
		{APIGroups: []string{"kcedar.dev"}, Resources: kinds, Verbs: []string{"deletecollection"}},
		{APIGroups: []string{"kcedar.dev"}, Resources: kinds, Verbs: []string{"escalate"}},
		{APIGroups: []string{"kcedar.dev"}, Resources: []string{"cedarpolicies/status"}, Verbs: []string{"get"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}},
	} {
		if ok, _ := rbacvalidation.Covers(role.Rules, []rbacv1.PolicyRule{refused}); ok {
			t.Errorf("kcedar-policy-reader grants %s", refused.String())
		}
	}
	for _, o := range objs {
		if o.kind != "ClusterRoleBinding" && o.kind != "RoleBinding" {
			continue
		}
		var ref rbacv1.RoleRef
		if o.kind == "ClusterRoleBinding" {
			ref = find[rbacv1.ClusterRoleBinding](t, objs, o.kind, o.name).RoleRef
		} else {
			ref = find[rbacv1.RoleBinding](t, objs, o.kind, o.name).RoleRef
		}
		if ref.Name == role.Name {
			t.Errorf("%s/%s binds kcedar-policy-reader: it is for the operator to bind", o.kind, o.name)
		}
	}
}
