package helm

import (
	"slices"
	"strings"
	"testing"
)

// TestPolicyFilesWithoutObjects: policies from a ConfigMap only. No CRDs, no
// rules on policy objects or the status Lease, --policies instead of
// --policy-objects, and the ConfigMap mounted where --policies reads.
func TestPolicyFilesWithoutObjects(t *testing.T) {
	r := mustRenderChart(t, "authz", "security", values(t, `
policyObjects: {enabled: false}
policies: {files: {team.cedar: "permit(principal, action, resource);"}}
`))
	for _, o := range r.objects {
		if o["kind"] == "CustomResourceDefinition" || o["kind"] == "Role" || o["kind"] == "RoleBinding" {
			t.Errorf("policy objects off, yet the chart renders %s", key(o))
		}
	}
	role := find(t, r.objects, "ClusterRole", "authz-kcedar")
	for _, rule := range role["rules"].([]any) {
		if groups, _ := get(rule, "apiGroups").([]any); slices.Contains(groups, any("kcedar.dev")) {
			t.Errorf("policy objects off, yet the ClusterRole grants %v", rule)
		}
	}
	d := find(t, r.objects, "Deployment", "authz-kcedar")
	a := args(t, d)
	if slices.Contains(a, "--policy-objects") || !slices.Contains(a, "--policies=/etc/kcedar/policies") {
		t.Errorf("args %v: want --policies=/etc/kcedar/policies and no --policy-objects", a)
	}
	cm := find(t, r.objects, "ConfigMap", "authz-kcedar-policies")
	if str(cm, "data", "team.cedar") != "permit(principal, action, resource);" {
		t.Errorf("ConfigMap data %v", cm["data"])
	}
	checkMounted(t, d, "/etc/kcedar/policies", "configMap", "authz-kcedar-policies")
	if str(d, "metadata", "namespace") != "security" || !strings.Contains(r.notes, "--service-account security/authz-kcedar") {
		t.Errorf("namespace %q; NOTES must name the ServiceAccount for kcedar manifests:\n%s", str(d, "metadata", "namespace"), r.notes)
	}
}

// TestExistingSecretsAndConfigMap: nothing generated, the named objects
// mounted.
func TestExistingSecretsAndConfigMap(t *testing.T) {
	r := mustRenderChart(t, "kcedar", "kcedar-system", values(t, `
tls: {existingSecret: my-serving}
clientCA: {existingSecret: my-client-ca}
conditionKeys: {existingSecret: my-keys}
policies: {existingConfigMap: my-policies}
`))
	for _, o := range r.objects {
		if o["kind"] == "Secret" || o["kind"] == "ConfigMap" {
			t.Errorf("existing Secrets and ConfigMap named, yet the chart renders %s", key(o))
		}
	}
	d := find(t, r.objects, "Deployment", "kcedar")
	checkMounted(t, d, "/etc/kcedar/pki", "secret", "my-serving")
	checkMounted(t, d, "/etc/kcedar/client-ca", "secret", "my-client-ca")
	checkMounted(t, d, "/etc/kcedar/keys", "secret", "my-keys")
	checkMounted(t, d, "/etc/kcedar/policies", "configMap", "my-policies")
	if !slices.Contains(args(t, d), "--policies=/etc/kcedar/policies") {
		t.Errorf("args %v: the existing ConfigMap is mounted but not read", args(t, d))
	}
}

// TestDaemonSetValues: the DaemonSet's own defaults (host network, loopback,
// control-plane nodes) plus the user's scheduling values, and the knobs
// passed through.
func TestDaemonSetValues(t *testing.T) {
	r := mustRenderChart(t, "kcedar", "kcedar-system", values(t, `
kind: DaemonSet
nodeSelector: {disk: ssd}
tolerations: [{key: dedicated, operator: Exists}]
conditions: {enforcement: admissionWebhook}
extraArgs: [--decision-log=-]
resources: {limits: {memory: 2Gi}}
podDisruptionBudget: {enabled: false}
image: {repository: registry.example.com/kcedar, tag: v9, pullPolicy: Always}
`))
	ds := find(t, r.objects, "DaemonSet", "kcedar")
	spec := mapAt(ds, "spec", "template", "spec")
	if spec["hostNetwork"] != true || str(spec, "nodeSelector", "disk") != "ssd" || get(spec, "nodeSelector", "node-role.kubernetes.io/control-plane") != "" {
		t.Errorf("DaemonSet pod spec: hostNetwork %v, nodeSelector %v", spec["hostNetwork"], spec["nodeSelector"])
	}
	if tol := spec["tolerations"].([]any); len(tol) != 2 {
		t.Errorf("tolerations %v: want the control-plane taint's and the user's", tol)
	}
	a := args(t, ds)
	for _, want := range []string{"--listen=127.0.0.1:8443", "--admission-enforcement", "--decision-log=-"} {
		if !slices.Contains(a, want) {
			t.Errorf("args %v lack %s", a, want)
		}
	}
	c := container(t, ds)
	if c["image"] != "registry.example.com/kcedar:v9" || c["imagePullPolicy"] != "Always" || str(c, "resources", "limits", "memory") != "2Gi" {
		t.Errorf("container image %v (%v), resources %v", c["image"], c["imagePullPolicy"], c["resources"])
	}
	if str(c, "readinessProbe", "httpGet", "host") != "127.0.0.1" {
		t.Errorf("probes of a host-network pod on loopback need host 127.0.0.1: %v", c["readinessProbe"])
	}
	for _, o := range r.objects {
		if o["kind"] == "Service" || o["kind"] == "PodDisruptionBudget" || o["kind"] == "Deployment" {
			t.Errorf("DaemonSet without PDB, yet the chart renders %s", key(o))
		}
	}
}

// TestReleaseNames: a second release in the same namespace names every
// object, its lease and its selectors apart from the first.
func TestReleaseNames(t *testing.T) {
	r := mustRenderChart(t, "canary", "kcedar-system", values(t, `policyObjects: {statusLeaseName: canary-status}`))
	for _, o := range r.objects {
		if name := str(o, "metadata", "name"); !strings.HasPrefix(name, "canary-kcedar") && o["kind"] != "CustomResourceDefinition" {
			t.Errorf("%s: not named after the release", key(o))
		}
	}
	d := find(t, r.objects, "Deployment", "canary-kcedar")
	if str(d, "spec", "selector", "matchLabels", "app.kubernetes.io/instance") != "canary" {
		t.Errorf("selector %v lacks the release", get(d, "spec", "selector"))
	}
	if !slices.Contains(args(t, d), "--status-lease-name=canary-status") {
		t.Errorf("args %v lack the lease name", args(t, d))
	}
	role := find(t, r.objects, "Role", "canary-kcedar-status-lease")
	if names := get(role["rules"].([]any)[1], "resourceNames"); !slices.Equal(names.([]any), []any{"canary-status"}) {
		t.Errorf("the Role grants the lease %v, want canary-status", names)
	}
	if !strings.Contains(r.notes, "kcedar manifests --url https://canary-kcedar.kcedar-system.svc:443") {
		t.Errorf("NOTES.txt does not give the kcedar manifests command for this release:\n%s", r.notes)
	}
}

// checkMounted checks that the container mounts, at path, the volume of the
// kind (secret, configMap) named name.
func checkMounted(t *testing.T, workload obj, path, kind, name string) {
	t.Helper()
	var volume string
	for _, m := range container(t, workload)["volumeMounts"].([]any) {
		if str(m, "mountPath") == path {
			volume = str(m, "name")
		}
	}
	for _, v := range get(workload, "spec", "template", "spec", "volumes").([]any) {
		if str(v, "name") == volume && volume != "" {
			ref := str(v, kind, "secretName")
			if kind == "configMap" {
				ref = str(v, kind, "name")
			}
			if ref != name {
				t.Errorf("%s mounts %s %q, want %q", path, kind, ref, name)
			}
			return
		}
	}
	t.Errorf("nothing mounted at %s", path)
}
