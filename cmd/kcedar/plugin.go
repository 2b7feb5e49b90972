package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"
)

// The kubectl plugin: the same binary run as kubectl-cedar (make build
// writes both names) is `kubectl cedar`, a cobra root over the same command
// constructors as kcedar's who-can, can-i, why and diff, with kubectl's
// conventions: the cluster's policy objects and live schema by default,
// -n from the kubeconfig context, -A, --cluster as the kubeconfig cluster,
// -o yaml.

// pluginName is the binary name kubectl finds the plugin by.
const pluginName = "kubectl-cedar"

// kubectlPlugin is set when the binary runs as the kubectl plugin, before
// the plugin's commands are built (their flags differ a little).
var kubectlPlugin bool

// clusterPoliciesFlag names the flag that reads the cluster's policy
// objects: --cluster for kcedar; in the plugin --cluster is kubectl's (the
// kubeconfig cluster), and the policy objects are read by default.
var clusterPoliciesFlag = "cluster"

// isPluginBinary reports whether argv0 names the kubectl plugin.
func isPluginBinary(argv0 string) bool {
	return strings.TrimSuffix(filepath.Base(argv0), ".exe") == pluginName
}

// newPluginRoot builds `kubectl cedar`. Its commands are built with the
// plugin's flag names, which are restored for kcedar's afterwards.
func newPluginRoot() *cobra.Command {
	kubectlPlugin, clusterPoliciesFlag = true, "cluster-policies"
	defer func() { kubectlPlugin, clusterPoliciesFlag = false, "cluster" }()
	root := &cobra.Command{
		Use:   "cedar",
		Short: "kcedar's access reviews through kubectl: who-can, can-i, why, diff",
		Long: `kubectl cedar answers from the cluster's Cedar policies (CedarPolicy and
NamespacedCedarPolicy objects), its RBAC and its live schema, read through
the API server with the kubeconfig, for kube-apiserver's authorizer chain
(kcedar, then RBAC; --kcedar-only asks kcedar alone): who can make a
request, whether a user may make one ("yes", "no", or "yes, if" with the
conditions kubectl auth can-i does not ask for), what a user can do (with
the conditions kubectl auth can-i --list cannot show for a webhook
authorizer), why a request is decided as it is, and what a change of
policy files would change. can-i and why without --as ask about you, as
the API server authenticates you. --policies FILE|DIR uses policy files
instead of the cluster's objects.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl cedar"},
	}
	conn := newConnectionFlags()
	conn.AddFlags(root.PersistentFlags())
	for _, c := range []*cobra.Command{newWhoCanCmd(), newCanICmd(), newWhyCmd(), newDiffCmd(), newVersionCmd()} {
		root.AddCommand(withKubectlConventions(c, conn))
	}
	return root
}

// pluginConnection holds kubectl's global connection flags while a
// `kubectl cedar` command runs (nil otherwise): schemaSource.RESTConfig
// reads the cluster with them.
var pluginConnection *genericclioptions.ConfigFlags

// newConnectionFlags are kubectl's global flags, from k8s.io/cli-runtime
// (kubectl's own): impersonation (--as, --as-group, --as-uid,
// --as-user-extra), credentials (--user, --token, --client-certificate,
// --client-key), the server (--server, --certificate-authority,
// --insecure-skip-tls-verify, --tls-server-name, --proxy-url,
// --disable-compression) and --request-timeout. --kubeconfig, --context,
// --cluster and -n are each command's own flags (the same meaning), and
// there is no discovery cache (--cache-dir). A command's own flag of the
// same name takes its place: can-i's and why's --as, --as-group, --as-uid
// and --as-user-extra name the user asked about, as with kubectl auth can-i.
func newConnectionFlags() *genericclioptions.ConfigFlags {
	f := genericclioptions.NewConfigFlags(false)
	f.KubeConfig, f.Context, f.ClusterName, f.Namespace, f.CacheDir = nil, nil, nil, nil, nil
	return f
}

// pluginClientConfig is the client config of a plugin command's
// --kubeconfig, --context and --cluster with kubectl's global flags, or nil
// outside the plugin.
func pluginClientConfig(kubeconfig, kubeContext, cluster string) clientcmd.ClientConfig {
	if pluginConnection == nil {
		return nil
	}
	pluginConnection.KubeConfig, pluginConnection.Context, pluginConnection.ClusterName = &kubeconfig, &kubeContext, &cluster
	return pluginConnection.ToRawKubeConfigLoader()
}

// withKubectlConventions adds -A and kubectl's defaults to a command, and
// runs it with kubectl's global flags conn.
func withKubectlConventions(cmd *cobra.Command, conn *genericclioptions.ConfigFlags) *cobra.Command {
	if cmd.RunE == nil {
		return cmd
	}
	f := cmd.Flags()
	var all bool
	if f.Lookup("namespace") != nil {
		f.BoolVarP(&all, "all-namespaces", "A", false, "every namespace, as kubectl -A (else -n, else the kubeconfig context's namespace)")
	}
	policies := clusterPoliciesFlag
	if f.Lookup(policies) != nil {
		_ = f.MarkHidden(policies)
	}
	run := cmd.RunE
	cmd.RunE = func(c *cobra.Command, args []string) error {
		pluginConnection = conn
		defer func() { pluginConnection = nil }()
		if err := kubectlDefaults(c, args, all, policies); err != nil {
			return &exitError{2, err}
		}
		return runWithYAML(c, args, run)
	}
	return cmd
}

// kubectlDefaults sets what kubectl users expect when they do not say:
// the policies of the cluster, and the namespace of the kubeconfig context.
// policies names the flag that reads the cluster's policy objects.
func kubectlDefaults(c *cobra.Command, args []string, all bool, policies string) error {
	f := c.Flags()
	diffOfTwoFiles := c.Name() == "diff" && len(args) >= 2
	fromCluster := f.Lookup(policies) != nil && !f.Changed("policies") && !f.Changed("policy-objects") && !diffOfTwoFiles
	liveSchema := f.Lookup("live") != nil && !f.Changed("schema") && !f.Changed("from-dir")
	if err := setNamespace(f, all); err != nil {
		return err
	}
	if !fromCluster && !liveSchema {
		// Nothing is read from the cluster: the kubeconfig flags only
		// chose the namespace.
		for _, name := range []string{"kubeconfig", "context", "cluster"} {
			if f.Lookup(name) != nil {
				_ = f.Set(name, "")
			}
		}
	}
	for flag, set := range map[string]bool{policies: fromCluster, "live": liveSchema} {
		if set {
			if err := f.Set(flag, "true"); err != nil {
				return err
			}
		}
	}
	if asksAboutAUser(c, f) {
		return setSelf(c.Context(), f)
	}
	return nil
}

// asksAboutAUser reports whether the command asks about a user and none
// was named: kubectl auth can-i then asks about the caller, and so do the
// plugin's can-i and why.
func asksAboutAUser(c *cobra.Command, f *pflag.FlagSet) bool {
	return (c.Name() == "can-i" || c.Name() == "why") && f.Lookup("as") != nil && !f.Changed("as") && !f.Changed("as-group")
}

// setSelf sets --as, --as-group, --as-uid and --as-user-extra to the
// caller, as the API server authenticates it (a SelfSubjectReview, as
// kubectl auth whoami asks).
func setSelf(ctx context.Context, f *pflag.FlagSet) error {
	if ctx == nil {
		ctx = context.Background()
	}
	src := schemaSource{}
	for name, v := range map[string]*string{"kubeconfig": &src.Kubeconfig, "context": &src.Context, "cluster": &src.Cluster} {
		if fl := f.Lookup(name); fl != nil {
			*v = fl.Value.String()
		}
	}
	cfg, err := src.RESTConfig()
	if err != nil {
		return fmt.Errorf("give --as USER (asking the API server who you are: %w)", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("give --as USER (asking the API server who you are: %w)", err)
	}
	u := review.Status.UserInfo
	sets := [][2]string{{"as", u.Username}, {"as-uid", u.UID}}
	for _, g := range u.Groups {
		sets = append(sets, [2]string{"as-group", g})
	}
	for k, vs := range u.Extra {
		for _, v := range vs {
			sets = append(sets, [2]string{"as-user-extra", k + "=" + v})
		}
	}
	for _, kv := range sets {
		if kv[1] == "" {
			continue
		}
		if err := f.Set(kv[0], kv[1]); err != nil {
			return err
		}
	}
	return nil
}

// setNamespace sets -n as kubectl would: every namespace with -A, else the
// kubeconfig context's namespace unless -n is given.
func setNamespace(f *pflag.FlagSet, all bool) error {
	switch {
	case f.Lookup("namespace") == nil:
		return nil
	case all && f.Changed("namespace"):
		return errors.New("give -n NAMESPACE or -A, not both")
	case all || f.Changed("namespace"):
		return nil
	}
	return f.Set("namespace", contextNamespace(f))
}

// contextNamespace is the namespace of the kubeconfig context, as kubectl
// takes it ("default" when the context names none or there is no
// kubeconfig).
func contextNamespace(f *pflag.FlagSet) string {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if k := f.Lookup("kubeconfig"); k != nil && k.Value.String() != "" {
		rules.ExplicitPath = k.Value.String()
	}
	overrides := &clientcmd.ConfigOverrides{}
	if c := f.Lookup("context"); c != nil {
		overrides.CurrentContext = c.Value.String()
	}
	ns, _, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).Namespace()
	if err != nil || ns == "" {
		return "default"
	}
	return ns
}

// runWithYAML runs run, with -o yaml as the command's JSON converted to
// YAML (kubectl's -o yaml).
func runWithYAML(c *cobra.Command, args []string, run func(*cobra.Command, []string) error) error {
	out := c.Flags().Lookup("output")
	if out == nil || out.Value.String() != "yaml" {
		return run(c, args)
	}
	if err := out.Value.Set("json"); err != nil {
		return err
	}
	stdout := c.OutOrStdout()
	var buf bytes.Buffer
	c.SetOut(&buf)
	err := run(c, args)
	c.SetOut(stdout)
	if err != nil {
		return err
	}
	y, yerr := yaml.JSONToYAML(buf.Bytes())
	if yerr != nil {
		return yerr
	}
	_, werr := stdout.Write(y)
	return werr
}
