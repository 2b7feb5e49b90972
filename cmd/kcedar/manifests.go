package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	"sigs.k8s.io/yaml"
)

func init() { rootCmd.AddCommand(newManifestsCmd()) }

// manifestOptions are kcedar manifests' flags. AddFlags registers them,
// Complete resolves -o, Validate refuses bad combinations, and Run prints or
// writes the manifests.
type manifestOptions struct {
	url                  string
	caFile               string
	clientCert           string
	clientKey            string
	kubeconfigPath       string
	admissionKubeconfig  string
	admissionEnforcement bool
	conditionsReview     bool
	kubernetesVersion    string
	kubeconfig           string
	context              string
	failurePolicy        string
	outDir               string
	output               string
	policyObjects        bool
	serviceAccount       string
	bypassControlPlane   bool
	staticPod            bool
	image                string
	hostDir              string

	// notes are said on stderr after the files: how conditions are
	// enforced, and why (chooseMode).
	notes []string
	// serverVersion reads the cluster's git version; nil:
	// readServerVersion.
	serverVersion func(context.Context) (string, error)
}

const manifestsLong = `Print, as one set, everything kube-apiserver needs to use kcedar:

  authorization-config.yaml   AuthorizationConfiguration: Node, kcedar, RBAC
                              (with --conditions-review: conditionsReview)
  kcedar-webhook.kubeconfig   how the API server reaches kcedar (context
                              "authorize", and "conditions" with
                              --conditions-review); it embeds --client-key,
                              so --output-dir writes it 0600
  validating-webhook.yaml     with --admission-enforcement: the
                              ValidatingWebhookConfiguration (failurePolicy
                              Fail) that enforces conditions on clusters
                              without conditional authorization; it leaves
                              out the identities the AuthorizationConfiguration
                              sends past kcedar
  policy-webhook.yaml         with --policy-objects: the
                              ValidatingWebhookConfiguration that refuses
                              invalid CedarPolicy and NamespacedCedarPolicy
                              objects
  admission-config.yaml       with a webhook above and --client-certificate:
  kcedar-admission.kubeconfig the AdmissionConfiguration
                              (--admission-control-config-file) and its
                              kubeconfig (0600), so the API server presents
                              its client certificate to kcedar's admission
                              webhooks too (kcedar serve --client-ca-file
                              refuses calls without it)
  kcedar-static-pod.yaml      with --static-pod: a static Pod for
                              /etc/kubernetes/manifests on each control-plane
                              node, serving on the host network at --url
                              (127.0.0.1), reading its files from --host-dir;
                              with --policy-objects it watches the policy
                              objects with HOSTDIR/kubeconfig, else it reads
                              HOSTDIR/policies

How conditions are enforced follows the API servers' Kubernetes version,
--kubernetes-version or else the cluster's (read through the kubeconfig):
1.38 and later get --conditions-review (and need the ConditionalAuthorization
feature gate), earlier releases --admission-enforcement. Giving either flag
(true or false) decides instead. If the version cannot be read, neither is
configured, and conditional permits do not allow.

With --admission-enforcement the webhook is always part of the output: the
authorizer's conditional Allow is only safe with it installed.`

func newManifestsCmd() *cobra.Command {
	o := &manifestOptions{}
	cmd := &cobra.Command{
		Use:   "manifests --url https://HOST:PORT --ca-file CA",
		Short: "Print the API server configuration that puts kcedar in front",
		Long:  manifestsLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Complete(cmd.Context(), cmd.Flags(), cmd.ErrOrStderr()); err != nil {
				return &exitError{2, err}
			}
			if err := o.Validate(); err != nil {
				return &exitError{2, err}
			}
			return o.Run(cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

// AddFlags registers kcedar manifests' flags on f.
func (o *manifestOptions) AddFlags(f *pflag.FlagSet) {
	f.StringVar(&o.url, "url", "", "kcedar's base URL as the API server reaches it, e.g. https://127.0.0.1:8443")
	f.StringVar(&o.caFile, "ca-file", "", "CA that signed kcedar's serving certificate (kcedar serve --write-ca writes one)")
	f.StringVar(&o.clientCert, "client-certificate", "", "client certificate the API server presents to kcedar (for kcedar serve --client-ca-file)")
	f.StringVar(&o.clientKey, "client-key", "", "its private key")
	f.StringVar(&o.kubeconfigPath, "webhook-kubeconfig-path", "/etc/kubernetes/kcedar-webhook.kubeconfig", "where the API server will find kcedar-webhook.kubeconfig")
	f.StringVar(&o.admissionKubeconfig, "admission-kubeconfig-path", "/etc/kubernetes/kcedar-admission.kubeconfig", "where the API server will find kcedar-admission.kubeconfig (named in admission-config.yaml)")
	f.BoolVar(&o.admissionEnforcement, "admission-enforcement", false, "Kubernetes 1.37 and earlier: also print the ValidatingWebhookConfiguration for kcedar serve --admission-enforcement (default: by the Kubernetes version)")
	f.BoolVar(&o.conditionsReview, "conditions-review", false, "Kubernetes 1.38+ with the ConditionalAuthorization feature gate (KEP-5681): the API server takes kcedar's conditions and calls back with AuthorizationConditionsReview (default: by the Kubernetes version)")
	f.StringVar(&o.kubernetesVersion, "kubernetes-version", "", "the API servers' Kubernetes version (e.g. 1.37, v1.38.0), which chooses how conditions are enforced; default: the cluster's, read through the kubeconfig")
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig to read the cluster's version with (default: KUBECONFIG, ~/.kube/config)")
	f.StringVar(&o.context, "context", "", "kubeconfig context to read the cluster's version with")
	f.StringVar(&o.failurePolicy, "failure-policy", "Deny", "the authorizer's failurePolicy when kcedar is unreachable: Deny or NoOpinion")
	f.StringVar(&o.outDir, "output-dir", "", "write the files into this directory instead of printing them")
	f.StringVarP(&o.output, "output", "o", "yaml", "output format: yaml")
	f.BoolVar(&o.policyObjects, "policy-objects", false, "also print policy-webhook.yaml: the ValidatingWebhookConfiguration that refuses invalid CedarPolicy and NamespacedCedarPolicy objects (kcedar serve --policy-objects)")
	f.StringVar(&o.serviceAccount, "service-account", "kcedar-system/kcedar", "kcedar's own ServiceAccount (NAMESPACE/NAME): its requests skip kcedar, so kcedar can read its policy objects before its set loads")
	f.BoolVar(&o.bypassControlPlane, "bypass-control-plane", true, "send the control plane's identities (system:masters, nodes, kube-system controllers and service accounts) straight to the authorizers after kcedar (Node, RBAC), so the cluster never depends on kcedar to run itself")
	f.BoolVar(&o.staticPod, "static-pod", false, "also print kcedar-static-pod.yaml: kcedar as a static Pod on the host network at --url's 127.0.0.1 port (needs --image)")
	f.StringVar(&o.image, "image", "", "with --static-pod: kcedar's image (make image builds one; push it to a registry the nodes pull from)")
	f.StringVar(&o.hostDir, "host-dir", "/etc/kcedar", "with --static-pod: the node directory with kcedar's files (pki/, condition-keys, kubeconfig or policies/), mounted read-only at the same path")
}

// Complete resolves -o: the one format yaml, or (deprecated) a directory
// taken as --output-dir, with a warning on errw; and how conditions are
// enforced (chooseMode), from flags as given.
func (o *manifestOptions) Complete(ctx context.Context, flags *pflag.FlagSet, errw io.Writer) error {
	if _, err := outputFormat(errw, o.output, []string{"yaml"}, &o.outDir, "--output-dir"); err != nil {
		return err
	}
	return o.chooseMode(ctx, flags)
}

// Validate refuses flags that cannot make manifests: a missing or bad --url,
// no --ca-file, an unknown --failure-policy, or half a client credential.
// What needs the files (the certificates) or --static-pod is checked by
// render.
func (o *manifestOptions) Validate() error {
	if _, err := webhookBaseURL(o.url); err != nil {
		return err
	}
	if o.caFile == "" {
		return errors.New("--ca-file is required")
	}
	if o.failurePolicy != "Deny" && o.failurePolicy != "NoOpinion" {
		return errors.New("--failure-policy is Deny or NoOpinion")
	}
	if (o.clientCert == "") != (o.clientKey == "") {
		return errors.New("--client-certificate and --client-key go together")
	}
	return nil
}

// Run renders the manifests and prints them to w, or writes them into
// --output-dir (naming each file on errw). Errors in rendering exit 2.
func (o *manifestOptions) Run(w, errw io.Writer) error {
	files, err := o.render()
	if err != nil {
		return &exitError{2, err}
	}
	if err := emitManifests(w, errw, o.outDir, files); err != nil {
		return err
	}
	o.writeNotes(errw)
	return nil
}

type manifestFile struct {
	name string
	data []byte
	mode os.FileMode
}

// manifestObject is one output file before it is marshalled; private marks
// files that embed a private key.
type manifestObject struct {
	name    string
	obj     any
	private bool
	header  string // comment lines written before the object
}

// emitManifests writes files into dir (created if missing; files with keys
// 0600), or prints them to w as one YAML stream, each under a comment naming
// its file.
func emitManifests(w, errw io.Writer, dir string, files []manifestFile) error {
	if dir == "" {
		for i, f := range files {
			if i > 0 {
				fmt.Fprintln(w, "---")
			}
			fmt.Fprintf(w, "# %s\n", f.name)
			if _, err := w.Write(f.data); err != nil {
				return err
			}
		}
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, f := range files {
		p := filepath.Join(dir, f.name)
		if err := os.WriteFile(p, f.data, f.mode); err != nil {
			return err
		}
		if err := os.Chmod(p, f.mode); err != nil { // WriteFile keeps an existing file's mode
			return err
		}
		fmt.Fprintln(errw, "wrote", p)
	}
	return nil
}

// render reads the certificates and builds the manifest files, for flags
// Validate accepted.
func (o *manifestOptions) render() ([]manifestFile, error) {
	base, err := webhookBaseURL(o.url)
	if err != nil {
		return nil, err
	}
	ca, err := readCertificates(o.caFile)
	if err != nil {
		return nil, fmt.Errorf("--ca-file: %w", err)
	}
	user := clientcmdv1.AuthInfo{}
	if o.clientCert != "" {
		if user.ClientCertificateData, err = os.ReadFile(o.clientCert); err != nil {
			return nil, err
		}
		if user.ClientKeyData, err = os.ReadFile(o.clientKey); err != nil {
			return nil, err
		}
		if _, err := tls.X509KeyPair(user.ClientCertificateData, user.ClientKeyData); err != nil {
			return nil, fmt.Errorf("--client-certificate %s / --client-key %s: not a PEM certificate and its key: %w", o.clientCert, o.clientKey, err)
		}
	}
	authz, err := o.authorizationConfig()
	if err != nil {
		return nil, err
	}
	objs := []manifestObject{
		{name: "authorization-config.yaml", obj: authz, header: o.authorizationConfigHeader()},
		{name: "kcedar-webhook.kubeconfig", obj: webhookKubeconfig(base, ca, user, o.conditionsReview), private: user.ClientKeyData != nil},
	}
	if o.admissionEnforcement {
		vwc, err := o.validatingWebhook(base, ca)
		if err != nil {
			return nil, err
		}
		objs = append(objs, manifestObject{name: "validating-webhook.yaml", obj: vwc})
	}
	if o.policyObjects {
		objs = append(objs, manifestObject{name: "policy-webhook.yaml", obj: policyWebhook(base, ca)})
	}
	if (o.admissionEnforcement || o.policyObjects) && user.ClientCertificateData != nil {
		kc, err := admissionKubeconfig(o.url, user)
		if err != nil {
			return nil, err
		}
		objs = append(objs, manifestObject{name: "admission-config.yaml", obj: admissionConfiguration(o.admissionKubeconfig)},
			manifestObject{name: "kcedar-admission.kubeconfig", obj: kc, private: true})
	}
	if o.staticPod {
		pod, err := o.staticPodManifest()
		if err != nil {
			return nil, err
		}
		objs = append(objs, manifestObject{name: "kcedar-static-pod.yaml", obj: pod})
	}
	files := make([]manifestFile, 0, len(objs))
	for _, m := range objs {
		data, err := yaml.Marshal(m.obj)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", m.name, err)
		}
		mode := os.FileMode(0o644)
		if m.private {
			mode = 0o600
		}
		files = append(files, manifestFile{m.name, append([]byte(m.header), data...), mode})
	}
	return files, nil
}

// webhookKubeconfig is how the API server reaches kcedar: one context per
// endpoint it calls (the conditions callback only with conditionsReview,
// which names its context), the same CA and client credentials for both.
func webhookKubeconfig(base string, ca []byte, user clientcmdv1.AuthInfo, conditionsReview bool) clientcmdv1.Config {
	cfg := clientcmdv1.Config{
		APIVersion: "v1", Kind: "Config",
		Clusters:       []clientcmdv1.NamedCluster{{Name: "kcedar-authorize", Cluster: clientcmdv1.Cluster{Server: base + "/v1/authorize", CertificateAuthorityData: ca}}},
		AuthInfos:      []clientcmdv1.NamedAuthInfo{{Name: "kube-apiserver", AuthInfo: user}},
		Contexts:       []clientcmdv1.NamedContext{{Name: "authorize", Context: clientcmdv1.Context{Cluster: "kcedar-authorize", AuthInfo: "kube-apiserver"}}},
		CurrentContext: "authorize",
	}
	if conditionsReview {
		cfg.Clusters = append(cfg.Clusters, clientcmdv1.NamedCluster{Name: "kcedar-conditions", Cluster: clientcmdv1.Cluster{Server: base + "/v1/conditions", CertificateAuthorityData: ca}})
		cfg.Contexts = append(cfg.Contexts, clientcmdv1.NamedContext{Name: conditionsContext, Context: clientcmdv1.Context{Cluster: "kcedar-conditions", AuthInfo: "kube-apiserver"}})
	}
	return cfg
}

// conditionsContext is the webhook kubeconfig's context for the
// conditions callback, named by conditionsReview.
const conditionsContext = "conditions"

// authorizationConfigHeader says, in the AuthorizationConfiguration, what
// kube-apiserver needs besides it for conditionsReview.
func (o *manifestOptions) authorizationConfigHeader() string {
	if !o.conditionsReview {
		return ""
	}
	return "# conditionsReview needs Kubernetes 1.38 or later with --feature-gates=" + conditionalAuthorizationGate + "=true on\n" +
		"# kube-apiserver (without the gate it refuses this file), and the AuthorizationConditionsEnforcer\n" +
		"# admission plugin on (it is, unless --disable-admission-plugins names it).\n"
}

// admissionConfiguration is kube-apiserver's --admission-control-config-file:
// the ValidatingAdmissionWebhook plugin finds the credentials for its
// webhooks' hosts in kubeconfig.
func admissionConfiguration(kubeconfig string) map[string]any {
	return map[string]any{
		"apiVersion": "apiserver.config.k8s.io/v1",
		"kind":       "AdmissionConfiguration",
		"plugins": []any{map[string]any{
			"name": "ValidatingAdmissionWebhook",
			"configuration": map[string]any{
				"apiVersion":     "apiserver.config.k8s.io/v1",
				"kind":           "WebhookAdmissionConfiguration",
				"kubeConfigFile": kubeconfig,
			},
		}},
	}
}

// admissionKubeconfig holds the API server's client credentials for kcedar's
// admission webhooks. The admission plugin picks a user by the webhook URL's
// host:port (443 when the URL has none), so the credentials go to kcedar
// only, never to another webhook.
func admissionKubeconfig(rawURL string, user clientcmdv1.AuthInfo) (clientcmdv1.Config, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return clientcmdv1.Config{}, err
	}
	hostPort := u.Host
	if u.Port() == "" {
		hostPort = net.JoinHostPort(u.Hostname(), "443")
	}
	return clientcmdv1.Config{APIVersion: "v1", Kind: "Config",
		AuthInfos: []clientcmdv1.NamedAuthInfo{{Name: hostPort, AuthInfo: user}}}, nil
}

// authorizationConfig is the AuthorizationConfiguration: Node, kcedar, RBAC.
func (o *manifestOptions) authorizationConfig() (map[string]any, error) {
	webhook := map[string]any{
		"timeout":                    "3s",
		"subjectAccessReviewVersion": "v1",
		"matchConditionSubjectAccessReviewVersion": "v1",
		"failurePolicy":   o.failurePolicy,
		"authorizedTTL":   "30s",
		"unauthorizedTTL": "30s",
		"connectionInfo":  map[string]any{"type": "KubeConfigFile", "kubeConfigFile": o.kubeconfigPath},
	}
	if mc, err := o.matchConditions(); err != nil {
		return nil, err
	} else if len(mc) > 0 {
		webhook["matchConditions"] = mc
	}
	if o.conditionsReview {
		webhook["conditionsReview"] = map[string]any{"version": "v1alpha1", "kubeConfigContextName": conditionsContext}
	}
	return map[string]any{
		"apiVersion": "apiserver.config.k8s.io/v1",
		"kind":       "AuthorizationConfiguration",
		"authorizers": []any{
			map[string]any{"type": "Node", "name": "node"},
			map[string]any{"type": "Webhook", "name": "kcedar", "webhook": webhook},
			map[string]any{"type": "RBAC", "name": "rbac"},
		},
	}, nil
}

// validatingWebhook covers exactly the requests kcedar may allow
// conditionally: writes (create, update, patch, delete, deletecollection
// arrive as CREATE, UPDATE, DELETE) and connects, on every resource and
// subresource ("*/*" means both; the API server refuses "*" next to it),
// of every identity but those the AuthorizationConfiguration sends past
// kcedar (matchConditions from the same list: kcedar never answers them,
// so they hold no conditional allow to enforce, and a kcedar outage does
// not stop their writes). kcedar serve --admission-enforcement verifies
// exactly this (webhooks.Inspect).
func (o *manifestOptions) validatingWebhook(base string, ca []byte) (*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	b, err := o.bypass()
	if err != nil {
		return nil, err
	}
	conds, err := b.AdmissionMatchConditions()
	if err != nil {
		return nil, err
	}
	all := admissionregistrationv1.AllScopes
	vwc := webhookConfiguration("kcedar-conditions", "conditions.kcedar.dev", base+"/v1/admit", ca, 5, admissionregistrationv1.RuleWithOperations{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete, admissionregistrationv1.Connect},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{"*"}, APIVersions: []string{"*"}, Resources: []string{"*/*"}, Scope: &all},
	})
	vwc.Webhooks[0].MatchConditions = conds
	return vwc, nil
}

// webhookConfiguration is a ValidatingWebhookConfiguration of one webhook
// at url that fails closed (failurePolicy Fail), has no side effects and
// matches equivalent versions of its rule.
func webhookConfiguration(name, webhook, url string, ca []byte, timeoutSeconds int32, rule admissionregistrationv1.RuleWithOperations) *admissionregistrationv1.ValidatingWebhookConfiguration {
	fail := admissionregistrationv1.Fail
	none := admissionregistrationv1.SideEffectClassNone
	equivalent := admissionregistrationv1.Equivalent
	return &admissionregistrationv1.ValidatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingWebhookConfiguration"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    webhook,
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: ca},
			Rules:                   []admissionregistrationv1.RuleWithOperations{rule},
			FailurePolicy:           &fail,
			MatchPolicy:             &equivalent,
			SideEffects:             &none,
			TimeoutSeconds:          &timeoutSeconds,
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
}

// kcedarEndpoints are the paths kcedar serves under its base URL.
var kcedarEndpoints = []string{"/v1/authorize", "/v1/conditions", "/v1/admit"}

// webhookBaseURL checks --url: https, a host, no query, fragment or user
// info. A URL that already ends in one of kcedar's endpoints
// (https://host:8443/v1/authorize) is taken as its base, so the endpoints are
// not appended twice; another path is kept as a prefix (kcedar behind a
// proxy).
func webhookBaseURL(raw string) (string, error) {
	if raw == "" {
		return "", errors.New("--url is required, e.g. https://kcedar.example:8443")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("--url %q: %w", raw, err)
	}
	switch {
	case u.Scheme != "https":
		return "", fmt.Errorf("--url %q: the scheme must be https (the API server only calls webhooks over TLS)", raw)
	case u.Host == "" || u.Hostname() == "":
		return "", fmt.Errorf("--url %q: no host", raw)
	case u.User != nil:
		return "", fmt.Errorf("--url %q: user info is not allowed (use --client-certificate)", raw)
	case u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
		return "", fmt.Errorf("--url %q: a query or fragment is not allowed", raw)
	}
	path := strings.TrimRight(u.Path, "/")
	for _, e := range kcedarEndpoints {
		if strings.HasSuffix(path, e) {
			path = strings.TrimSuffix(path, e)
			break
		}
	}
	u.Path, u.RawPath = path, ""
	return u.String(), nil
}

// readCertificates reads a PEM file of one or more certificates: anything
// else (a DER file, a key, an empty file) is an error.
func readCertificates(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	rest, n := data, 0
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("%s: PEM block %q, want CERTIFICATE", path, b.Type)
		}
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			return nil, fmt.Errorf("%s: certificate %d: %w", path, n+1, err)
		}
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("%s: no PEM certificate found (kcedar serve --write-ca writes one)", path)
	}
	if strings.TrimSpace(string(rest)) != "" {
		return nil, fmt.Errorf("%s: data after the last certificate is not PEM", path)
	}
	return data, nil
}
