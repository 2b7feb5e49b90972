package schemagen

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Source says where a schema comes from. The zero Source is the embedded
// default (stock Kubernetes v1.37). At most one of the live cluster (Live,
// Kubeconfig or Config), FromDir and SchemaFile may be set.
type Source struct {
	// Live reads a live cluster with client-go's default loading rules: the
	// KUBECONFIG environment variable, ~/.kube/config, else the in-cluster config.
	Live bool
	// Kubeconfig reads the live cluster of this kubeconfig file (implies Live).
	Kubeconfig string
	// Context selects a kubeconfig context (live sources only).
	Context string
	// Config reads the live cluster with this client config (implies Live; for
	// programs, not flags).
	Config *rest.Config
	// FromDir reads saved documents (kcedar schema capture, Documents.WriteDir).
	FromDir string
	// SchemaFile reads a schema written by `kcedar schema export` (Cedar or JSON
	// format) and rebuilds the model from it with ParseSchema, so a server can
	// run on exactly the schema its policies were validated against.
	SchemaFile string
}

// AddFlags registers the source flags: --live, --kubeconfig, --context,
// --from-dir and --schema.
func (s *Source) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&s.Live, "live", false, "read the live cluster (KUBECONFIG, ~/.kube/config or in-cluster config)")
	fs.StringVar(&s.Kubeconfig, "kubeconfig", "", "read the live cluster of this kubeconfig file")
	fs.StringVar(&s.Context, "context", "", "kubeconfig context of the live cluster")
	fs.StringVar(&s.FromDir, "from-dir", "", "read discovery and OpenAPI v3 documents saved by 'kcedar schema capture'")
	fs.StringVar(&s.SchemaFile, "schema", "", "read a schema written by 'kcedar schema export' (Cedar or JSON)")
}

// IsLive reports whether the source is a live cluster.
func (s Source) IsLive() bool {
	return s.Live || s.Kubeconfig != "" || s.Config != nil
}

// Validate checks that at most one source is chosen.
func (s Source) Validate() error {
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
func (s Source) String() string {
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

// RESTConfig builds the client config of a live source.
func (s Source) RESTConfig() (*rest.Config, error) {
	if s.Config != nil {
		return s.Config, nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if s.Kubeconfig != "" {
		rules.ExplicitPath = s.Kubeconfig
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
		&clientcmd.ConfigOverrides{CurrentContext: s.Context}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading client config: %w", err)
	}
	cfg.UserAgent = "kcedar"
	return cfg, nil
}

// LoadDocuments reads the documents of a live, directory or default source.
func LoadDocuments(ctx context.Context, s Source) (*Documents, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	switch {
	case s.SchemaFile != "":
		return nil, errors.New("a schema file holds no discovery or OpenAPI documents")
	case s.IsLive():
		cfg, err := s.RESTConfig()
		if err != nil {
			return nil, err
		}
		return FetchLiveContext(ctx, cfg)
	case s.FromDir != "":
		st, err := os.Stat(s.FromDir)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			return nil, fmt.Errorf("%s is not a directory", s.FromDir)
		}
		docs, err := ReadDir(os.DirFS(s.FromDir))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.FromDir, err)
		}
		return docs, nil
	default:
		return Default()
	}
}

// Load returns the schema of a source: generated from its documents, or parsed
// from a schema file.
func Load(ctx context.Context, s Source) (*Schema, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if s.SchemaFile != "" {
		data, err := os.ReadFile(s.SchemaFile)
		if err != nil {
			return nil, err
		}
		sc, err := ParseSchema(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.SchemaFile, err)
		}
		return sc, nil
	}
	docs, err := LoadDocuments(ctx, s)
	if err != nil {
		return nil, err
	}
	return Generate(docs)
}
