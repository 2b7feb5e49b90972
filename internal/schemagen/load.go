package schemagen

import (
	"context"
	"errors"
	"fmt"
	"os"

	"k8s.io/client-go/rest"
)

// Source says where a schema comes from. The zero Source is the embedded
// default (stock Kubernetes v1.37). At most one of Config, FromDir and
// SchemaFile may be set. Choosing a source from command-line flags (and
// loading a kubeconfig) is the CLI's job (cmd/kcedar); this is the plain result.
type Source struct {
	// Config reads the live cluster with this client config.
	Config *rest.Config
	// FromDir reads saved documents (kcedar schema capture, Documents.WriteDir).
	FromDir string
	// SchemaFile reads a schema written by `kcedar schema export` (Cedar or JSON
	// format) and rebuilds the model from it with ParseSchema, so a server can
	// run on exactly the schema its policies were validated against.
	SchemaFile string
}

// IsLive reports whether the source is a live cluster.
func (s Source) IsLive() bool {
	return s.Config != nil
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
		return errors.New("choose one schema source: a live cluster, a directory of saved documents or a schema file")
	}
	return nil
}

// String describes the source for messages.
func (s Source) String() string {
	switch {
	case s.IsLive():
		return "live cluster " + s.Config.Host
	case s.FromDir != "":
		return "documents in " + s.FromDir
	case s.SchemaFile != "":
		return "schema file " + s.SchemaFile
	default:
		return "embedded default (Kubernetes v1.37)"
	}
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
		return FetchLiveContext(ctx, s.Config)
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
