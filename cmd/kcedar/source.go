package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kcedar/kcedar/internal/schemagen"
)

// schemaSource is the schema source chosen on the command line: the flags
// --live, --kubeconfig, --context, --from-dir and --schema. It resolves to a
// schemagen.Source (loading the kubeconfig for a live cluster). The zero
// value is the embedded default.
type schemaSource struct {
	// Live reads a live cluster with client-go's default loading rules: the
	// KUBECONFIG environment variable, ~/.kube/config, else the in-cluster config.
	Live bool
	// Kubeconfig reads the live cluster of this kubeconfig file (implies Live).
	Kubeconfig string
	// Context selects a kubeconfig context (live sources only).
	Context string
	// Cluster selects a kubeconfig cluster (kubectl's --cluster; the
	// kubectl plugin's flag).
	Cluster string
	// FromDir reads saved documents (kcedar schema capture).
	FromDir string
	// SchemaFile reads a schema written by `kcedar schema export`.
	SchemaFile string
}

// AddFlags registers the source flags: --live, --kubeconfig, --context,
// --from-dir and --schema.
func (s *schemaSource) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&s.Live, "live", false, "read the live cluster (KUBECONFIG, ~/.kube/config or in-cluster config)")
	fs.StringVar(&s.Kubeconfig, "kubeconfig", "", "read the live cluster of this kubeconfig file")
	fs.StringVar(&s.Context, "context", "", "kubeconfig context of the live cluster")
	if kubectlPlugin {
		fs.StringVar(&s.Cluster, "cluster", "", "kubeconfig cluster of the live cluster, as kubectl --cluster")
	}
	fs.StringVar(&s.FromDir, "from-dir", "", "read discovery and OpenAPI v3 documents saved by 'kcedar schema capture'")
	fs.StringVar(&s.SchemaFile, "schema", "", "read a schema written by 'kcedar schema export' (Cedar or JSON)")
}

// IsLive reports whether the source is a live cluster.
func (s schemaSource) IsLive() bool {
	return s.Live || s.Kubeconfig != ""
}

// Validate checks that at most one source is chosen.
func (s schemaSource) Validate() error {
	n := 0
	for _, set := range []bool{s.IsLive(), s.FromDir != "", s.SchemaFile != ""} {
		if set {
			n++
		}
	}
	if n > 1 {
		return errors.New("choose one schema source: a live cluster (--live, --kubeconfig), --from-dir or --schema")
	}
	if s.Context != "" && !s.IsLive() {
		return errors.New("--context needs a live cluster (--live or --kubeconfig)")
	}
	return nil
}

// String describes the source for messages.
func (s schemaSource) String() string {
	switch {
	case s.Kubeconfig != "":
		return "live cluster (kubeconfig " + s.Kubeconfig + ")"
	case s.IsLive():
		return "live cluster"
	case s.FromDir != "":
		return "documents in " + s.FromDir
	case s.SchemaFile != "":
		return "schema file " + s.SchemaFile
	default:
		return "embedded default (Kubernetes v1.37)"
	}
}

// RESTConfig builds the client config of a live source from its kubeconfig
// (client-go's default loading rules, --kubeconfig and --context).
func (s schemaSource) RESTConfig() (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if s.Kubeconfig != "" {
		rules.ExplicitPath = s.Kubeconfig
	}
	loader := pluginClientConfig(s.Kubeconfig, s.Context, s.Cluster) // kubectl cedar's --as, --token...
	if loader == nil {
		loader = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
			&clientcmd.ConfigOverrides{CurrentContext: s.Context, Context: clientcmdapi.Context{Cluster: s.Cluster}})
	}
	cfg, err := loader.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading client config: %w", err)
	}
	cfg.UserAgent = "kcedar"
	return cfg, nil
}

// resolve validates the flags and turns them into a schemagen.Source.
func (s schemaSource) resolve() (schemagen.Source, error) {
	if err := s.Validate(); err != nil {
		return schemagen.Source{}, err
	}
	out := schemagen.Source{FromDir: s.FromDir, SchemaFile: s.SchemaFile}
	if s.IsLive() {
		cfg, err := s.RESTConfig()
		if err != nil {
			return schemagen.Source{}, err
		}
		out.Config = cfg
	}
	return out, nil
}

// Load returns the schema of the source.
func (s schemaSource) Load(ctx context.Context) (*schemagen.Schema, error) {
	src, err := s.resolve()
	if err != nil {
		return nil, err
	}
	return schemagen.Load(ctx, src)
}

// LoadDocuments returns the discovery and OpenAPI documents of the source.
func (s schemaSource) LoadDocuments(ctx context.Context) (*schemagen.Documents, error) {
	src, err := s.resolve()
	if err != nil {
		return nil, err
	}
	return schemagen.LoadDocuments(ctx, src)
}
