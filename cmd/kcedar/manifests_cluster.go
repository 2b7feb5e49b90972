package main

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kcedar/kcedar/internal/cluster/policyobjects"
	"github.com/kcedar/kcedar/internal/cluster/webhooks"
)

// bypass is the list of identities whose requests go around kcedar, from
// --service-account and --bypass-control-plane: the AuthorizationConfiguration
// sends them past kcedar's authorizer, and the conditions webhook leaves
// them out of admission (webhooks.Bypass renders both from one list).
func (o *manifestOptions) bypass() (webhooks.Bypass, error) {
	b := webhooks.Bypass{ServiceAccount: o.serviceAccount, ControlPlane: o.bypassControlPlane}
	if err := b.Validate(); err != nil {
		return b, fmt.Errorf("--service-account: %w", err)
	}
	return b, nil
}

// matchConditions are CEL expressions on the SubjectAccessReview: the API
// server calls kcedar only when all hold, so the identities they exclude go
// to the next authorizers (RBAC) without waiting on kcedar.
func (o *manifestOptions) matchConditions() ([]map[string]any, error) {
	b, err := o.bypass()
	if err != nil {
		return nil, err
	}
	exprs, err := b.AuthorizerMatchConditions()
	if err != nil {
		return nil, err
	}
	mc := make([]map[string]any, len(exprs))
	for i, e := range exprs {
		mc[i] = map[string]any{"expression": e}
	}
	return mc, nil
}

// policyWebhook refuses invalid kcedar policy objects, and writes that give
// access their writer does not hold, at write time: creates, updates and
// deletes (a delete can remove a forbid). It fails closed: with kcedar down,
// policy objects cannot be written (they could not be checked), while
// everything else keeps working. kcedar serve --policy-objects verifies it is
// in place (internal/cluster/webhooks.CheckPolicyWebhook) before it serves
// NamespacedCedarPolicy objects.
func policyWebhook(base string, ca []byte) *admissionregistrationv1.ValidatingWebhookConfiguration {
	all := admissionregistrationv1.AllScopes
	return webhookConfiguration("kcedar-policies", "policies.kcedar.dev", base+webhooks.PolicyWebhookPath, ca, 10, admissionregistrationv1.RuleWithOperations{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete},
		Rule: admissionregistrationv1.Rule{APIGroups: []string{policyobjects.Group}, APIVersions: []string{policyobjects.Version},
			Resources: []string{policyobjects.ResourceCluster, policyobjects.ResourceNamespaced}, Scope: &all},
	})
}

// staticPodListen is the address the static pod serves on: --url's port on
// 127.0.0.1. kcedar runs on the host network, so anything but the loopback
// address would expose it to the node's network.
func staticPodListen(rawURL string) (listen string, port int, err error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", 0, fmt.Errorf("--url %q: %w", rawURL, err)
	}
	switch h := u.Hostname(); {
	case h == "localhost":
	case net.ParseIP(h) != nil && net.ParseIP(h).IsLoopback():
	default:
		return "", 0, fmt.Errorf("--static-pod: --url %q: the static pod serves on the host network at 127.0.0.1, so the API server reaches it as https://127.0.0.1:PORT", rawURL)
	}
	if p := strings.TrimRight(u.Path, "/"); p != "" && !slices.Contains(kcedarEndpoints, p) {
		return "", 0, fmt.Errorf("--static-pod: --url %q: kcedar serves its endpoints at the root, not under %s", rawURL, p)
	}
	port = 443
	if ps := u.Port(); ps != "" {
		if port, err = strconv.Atoi(ps); err != nil || port < 1 || port > 65535 {
			return "", 0, fmt.Errorf("--url %q: bad port", rawURL)
		}
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), port, nil
}

// staticPodManifest is kcedar as a static pod (kubelet's
// /etc/kubernetes/manifests): host network on 127.0.0.1, everything it reads
// from one read-only hostPath directory (static pods cannot mount Secrets or
// ConfigMaps, nor use a ServiceAccount), probes on /livez and /readyz. With
// --policy-objects its one connection to the cluster (--kubeconfig: the
// live schema, the objects, the status Lease) is HOSTDIR/kubeconfig, which
// should authenticate as --service-account (excluded from kcedar by the
// matchConditions, granted by deploy/'s RBAC); otherwise it reads the policy
// files in HOSTDIR/policies.
func (o *manifestOptions) staticPodManifest() (*corev1.Pod, error) {
	if o.image == "" {
		return nil, errors.New("--static-pod needs --image: the kcedar image (make image) in a registry the control-plane nodes pull from")
	}
	if !filepath.IsAbs(o.hostDir) || filepath.Clean(o.hostDir) == "/" {
		return nil, fmt.Errorf("--host-dir %q: give an absolute directory other than /", o.hostDir)
	}
	listen, port, err := staticPodListen(o.url)
	if err != nil {
		return nil, err
	}
	dir := filepath.Clean(o.hostDir)
	at := func(rel string) string { return path.Join(dir, rel) }
	args := []string{"serve", "--listen=" + listen,
		"--tls-cert-file=" + at("pki/serving.crt"), "--tls-private-key-file=" + at("pki/serving.key")}
	if o.clientCert != "" {
		args = append(args, "--client-ca-file="+at("pki/client-ca.crt"))
	}
	args = append(args, "--conditions-key-file="+at("condition-keys"))
	if o.policyObjects {
		args = append(args, "--policy-objects", "--kubeconfig="+at("kubeconfig"))
		if ns, _, ok := strings.Cut(o.serviceAccount, "/"); ok {
			args = append(args, "--status-lease-namespace="+ns)
		}
	} else {
		args = append(args, "--policies="+at("policies"))
	}
	probe := func(path string, period, failures int32) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Scheme: corev1.URISchemeHTTPS, Host: "127.0.0.1", Port: intstr.FromInt32(int32(port)), Path: path}},
			PeriodSeconds:    period,
			FailureThreshold: failures,
		}
	}
	user, no, yes := int64(65532), false, true
	hostPathDir := corev1.HostPathDirectory
	priority := int32(2000001000) // system-node-critical: the Priority admission plugin refuses a mirror pod whose priority differs
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "kcedar", Namespace: "kube-system",
			Labels: map[string]string{"component": "kcedar", "tier": "control-plane", "app.kubernetes.io/name": "kcedar"}},
		Spec: corev1.PodSpec{
			HostNetwork:       true,
			PriorityClassName: "system-node-critical",
			Priority:          &priority,
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: &yes, RunAsUser: &user, RunAsGroup: &user,
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name:  "kcedar",
				Image: o.image,
				Args:  args,
				Env: []corev1.EnvVar{{Name: "GOMEMLIMIT", ValueFrom: &corev1.EnvVarSource{
					ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.memory", Divisor: resource.MustParse("1")}}}},
				StartupProbe:   probe("/livez", 2, 60),
				LivenessProbe:  probe("/livez", 10, 3),
				ReadinessProbe: probe("/readyz", 2, 2),
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
				},
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes,
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
				VolumeMounts: []corev1.VolumeMount{{Name: "kcedar", MountPath: dir, ReadOnly: true}},
			}},
			Volumes: []corev1.Volume{{Name: "kcedar", VolumeSource: corev1.VolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: dir, Type: &hostPathDir}}}},
		},
	}, nil
}
