package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kcedar/kcedar/schemagen"
)

// schemaSource is where a command gets its schema: the embedded default, a
// directory of saved discovery and OpenAPI documents, or a live cluster.
type schemaSource struct {
	kubeconfig string
	fromDir    string
}

func (s *schemaSource) addFlags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&s.kubeconfig, "kubeconfig", "", "generate the schema from this live cluster")
	cmd.Flags().StringVar(&s.fromDir, "from-dir", "", "generate the schema from saved discovery and OpenAPI v3 documents (kcedar schema capture)")
	cmd.MarkFlagsMutuallyExclusive("kubeconfig", "from-dir")
}

func (s *schemaSource) load(ctx context.Context, logger *slog.Logger) (*schemagen.Schema, error) {
	start := time.Now()
	var docs *schemagen.Documents
	var err error
	var from string
	switch {
	case s.kubeconfig != "":
		from = "cluster " + s.kubeconfig
		cfg, cerr := clientcmd.BuildConfigFromFlags("", s.kubeconfig)
		if cerr != nil {
			return nil, fmt.Errorf("--kubeconfig: %w", cerr)
		}
		docs, err = schemagen.FetchLiveContext(ctx, cfg)
	case s.fromDir != "":
		from = s.fromDir
		docs, err = schemagen.ReadDir(os.DirFS(s.fromDir))
	default:
		from = "embedded default"
		docs, err = schemagen.Default()
	}
	if err != nil {
		return nil, fmt.Errorf("reading the schema sources (%s): %w", from, err)
	}
	schema, err := schemagen.Generate(docs)
	if err != nil {
		return nil, fmt.Errorf("generating the schema (%s): %w", from, err)
	}
	if logger != nil {
		logger.Info("schema generated", "from", from, "resources", len(schema.Resources), "warnings", len(schema.Warnings), "took", time.Since(start).String())
	}
	return schema, nil
}
