package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/kcedar/kcedar/internal/schemagen"
)

func init() {
	rootCmd.AddCommand(newSchemaCmd())
}

func newSchemaCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "schema",
		Short: "Generate the typed Cedar schema of a cluster",
		Long: `The Cedar schema kcedar's policies are written against: one entity type per
resource and subresource, typed from the cluster's OpenAPI v3 definitions.
See docs/schema.md.`,
	}
	cmd.AddCommand(newSchemaExportCmd(), newSchemaCaptureCmd())
	return cmd
}

func newSchemaExportCmd() *cobra.Command {
	var (
		src     schemaSource
		format  string
		output  string
		out     string
		verbose bool
	)
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Print the Cedar schema (embedded Kubernetes v1.37 default, live cluster or saved documents)",
		Long: `Print the typed Cedar schema.

Sources (at most one; without any, the embedded snapshot of stock Kubernetes
v1.37 is used, so the output does not depend on the environment):
  --kubeconfig FILE   a live cluster (add --context to pick a context)
  --live              a live cluster via KUBECONFIG, ~/.kube/config or the
                      in-cluster service account
  --from-dir DIR      documents saved by 'kcedar schema capture'
  --schema FILE       a schema printed by 'kcedar schema export' (to convert
                      between the cedar and json formats)

The output is deterministic: the same documents give byte-identical output.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output == "cedar" || output == "json" {
				format = output
			} else if output != "" {
				// A path (deprecated): --format still says the format.
				if _, err := outputFormat(cmd.ErrOrStderr(), output, []string{"cedar", "json"}, &out, "--file"); err != nil {
					return err
				}
			}
			if format != "cedar" && format != "json" {
				return fmt.Errorf("-o must be cedar or json, not %q", format)
			}
			start := time.Now()
			s, err := src.Load(cmd.Context())
			if err != nil {
				return err
			}
			genTime := time.Since(start)
			var data []byte
			if format == "json" {
				data, err = s.MarshalJSON()
			} else {
				data, err = s.MarshalCedar()
			}
			if err != nil {
				return err
			}
			if err := writeOutput(out, data, cmd.OutOrStdout()); err != nil {
				return err
			}
			if verbose {
				stderr := cmd.ErrOrStderr()
				fmt.Fprintf(stderr, "source:            %s\n", src)
				fmt.Fprint(stderr, s.Stats())
				fmt.Fprintf(stderr, "load+generate:     %s\n", genTime.Round(time.Millisecond))
				fmt.Fprintf(stderr, "total:             %s\n", time.Since(start).Round(time.Millisecond))
				for _, w := range s.Warnings {
					fmt.Fprintln(stderr, "warning:", w)
				}
			}
			return nil
		},
	}
	src.AddFlags(cmd.Flags())
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: cedar (default) or json")
	cmd.Flags().StringVar(&format, "format", "cedar", "output format (same as -o)")
	cmd.Flags().StringVar(&out, "file", "", "write to this file instead of stdout")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "print counts, timings and warnings to stderr")
	return cmd
}

func newSchemaCaptureCmd() *cobra.Command {
	var (
		src       schemaSource
		out       string
		legacyOut string // -o, before --output-dir
	)
	cmd := &cobra.Command{
		Use:   "capture",
		Short: "Save a cluster's discovery and OpenAPI v3 documents for --from-dir",
		Long: `Save the aggregated discovery (/api, /apis) and OpenAPI v3 (/openapi/v3)
documents of a live cluster into a directory, which 'kcedar schema export
--from-dir' and the --from-dir flag of other commands read. The files are
deterministic: sorted JSON keys, "description" fields stripped, and only the
connect operations kept of the OpenAPI paths. The discovery/ and openapi/
subdirectories of the output directory are replaced.

hack/capture-default.sh uses it to refresh the embedded default
(internal/schemagen/default).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if legacyOut != "" {
				if out != "" {
					return errors.New("give --output-dir only")
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: -o DIR is deprecated: use --output-dir %s\n", legacyOut)
				out = legacyOut
			}
			if out == "" {
				return errors.New("--output-dir DIR is required")
			}
			if !src.IsLive() && src.FromDir == "" {
				return errors.New("capture needs a live cluster (--kubeconfig or --live) or --from-dir")
			}
			docs, err := src.LoadDocuments(cmd.Context())
			if err != nil {
				return err
			}
			// Refuse to save documents kcedar cannot use.
			if _, err := schemagen.Generate(docs); err != nil {
				return fmt.Errorf("captured documents do not generate a schema: %w", err)
			}
			return docs.WriteDir(out)
		},
	}
	cmd.Flags().BoolVar(&src.Live, "live", false, "read the live cluster (KUBECONFIG, ~/.kube/config or in-cluster config)")
	cmd.Flags().StringVar(&src.Kubeconfig, "kubeconfig", "", "read the live cluster of this kubeconfig file")
	cmd.Flags().StringVar(&src.Context, "context", "", "kubeconfig context of the live cluster")
	cmd.Flags().StringVar(&src.FromDir, "from-dir", "", "re-normalize documents saved earlier")
	cmd.Flags().StringVar(&out, "output-dir", "", "directory to write (created if needed)")
	cmd.Flags().StringVarP(&legacyOut, "output", "o", "", "deprecated: use --output-dir")
	_ = cmd.Flags().MarkHidden("output")
	return cmd
}

// writeOutput writes data to path or, without a path (or "-"), to w. A
// regular file (or a new one) is replaced atomically: a temporary file in
// its directory renamed over it, keeping its permissions. Anything else, a
// device (/dev/null, /dev/stdout), a FIFO or a socket, is written in place:
// renaming over it would replace it with a regular file. A symlink is
// followed, so the link stays and what it names is written.
func writeOutput(path string, data []byte, w io.Writer) error {
	if path == "" || path == "-" {
		_, err := w.Write(data)
		return err
	}
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	perm := os.FileMode(0o644)
	if info, err := os.Stat(path); err == nil {
		switch {
		case info.IsDir():
			return fmt.Errorf("%s is a directory; give a file name", path)
		case !info.Mode().IsRegular():
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				return err
			}
			if _, err := f.Write(data); err != nil {
				f.Close()
				return err
			}
			return f.Close()
		}
		perm = info.Mode().Perm()
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
