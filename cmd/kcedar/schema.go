package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kcedar/kcedar/internal/lib/atomicfile"
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

// schemaExportOptions are kcedar schema export's flags.
type schemaExportOptions struct {
	src     schemaSource
	format  string
	output  string // -o: a format, or (deprecated) a path
	out     string // --file
	verbose bool
}

const schemaExportLong = `Print the typed Cedar schema.

Sources (at most one; without any, the embedded snapshot of stock Kubernetes
v1.37 is used, so the output does not depend on the environment):
  --kubeconfig FILE   a live cluster (add --context to pick a context)
  --live              a live cluster via KUBECONFIG, ~/.kube/config or the
                      in-cluster service account
  --from-dir DIR      documents saved by 'kcedar schema capture'
  --schema FILE       a schema printed by 'kcedar schema export' (to convert
                      between the cedar and json formats)

The output is deterministic: the same documents give byte-identical output.`

func newSchemaExportCmd() *cobra.Command {
	o := &schemaExportOptions{}
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Print the Cedar schema (embedded Kubernetes v1.37 default, live cluster or saved documents)",
		Long:  schemaExportLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Complete(cmd.ErrOrStderr()); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

// AddFlags registers kcedar schema export's flags on f.
func (o *schemaExportOptions) AddFlags(f *pflag.FlagSet) {
	o.src.AddFlags(f)
	f.StringVarP(&o.output, "output", "o", "", "output format: cedar (default) or json")
	f.StringVar(&o.format, "format", "cedar", "output format (same as -o)")
	f.StringVar(&o.out, "file", "", "write to this file instead of stdout")
	f.BoolVarP(&o.verbose, "verbose", "v", false, "print counts, timings and warnings to stderr")
}

// Complete resolves -o: a format overrides --format; anything else is taken
// (deprecated, with a warning on errw) as the --file path.
func (o *schemaExportOptions) Complete(errw io.Writer) error {
	if o.output == "cedar" || o.output == "json" {
		o.format = o.output
	} else if o.output != "" {
		// A path (deprecated): --format still says the format.
		if _, err := outputFormat(errw, o.output, []string{"cedar", "json"}, &o.out, "--file"); err != nil {
			return err
		}
	}
	return nil
}

// Validate refuses an unknown format and more than one schema source.
func (o *schemaExportOptions) Validate() error {
	if o.format != "cedar" && o.format != "json" {
		return fmt.Errorf("-o must be cedar or json, not %q", o.format)
	}
	return o.src.Validate()
}

// Run loads the schema and writes it to --file or w; with --verbose it
// prints counts, timings and warnings on errw.
func (o *schemaExportOptions) Run(ctx context.Context, w, errw io.Writer) error {
	start := time.Now()
	s, err := o.src.Load(ctx)
	if err != nil {
		return err
	}
	genTime := time.Since(start)
	var data []byte
	if o.format == "json" {
		data, err = s.MarshalJSON()
	} else {
		data, err = s.MarshalCedar()
	}
	if err != nil {
		return err
	}
	if err := writeOutput(o.out, data, w); err != nil {
		return err
	}
	if o.verbose {
		fmt.Fprintf(errw, "source:            %s\n", o.src)
		fmt.Fprint(errw, s.Stats())
		fmt.Fprintf(errw, "load+generate:     %s\n", genTime.Round(time.Millisecond))
		fmt.Fprintf(errw, "total:             %s\n", time.Since(start).Round(time.Millisecond))
		for _, w := range s.Warnings {
			fmt.Fprintln(errw, "warning:", w)
		}
	}
	return nil
}

// schemaCaptureOptions are kcedar schema capture's flags. Its source flags
// are a subset of schemaSource's (no --schema), with their own help.
type schemaCaptureOptions struct {
	src       schemaSource
	out       string // --output-dir
	legacyOut string // -o, before --output-dir
}

const schemaCaptureLong = `Save the aggregated discovery (/api, /apis) and OpenAPI v3 (/openapi/v3)
documents of a live cluster into a directory, which 'kcedar schema export
--from-dir' and the --from-dir flag of other commands read. The files are
deterministic: sorted JSON keys, "description" fields stripped, and only the
connect operations kept of the OpenAPI paths. The discovery/ and openapi/
subdirectories of the output directory are replaced.

hack/capture-default.sh uses it to refresh the embedded default
(internal/schemagen/default).`

func newSchemaCaptureCmd() *cobra.Command {
	o := &schemaCaptureOptions{}
	cmd := &cobra.Command{
		Use:   "capture",
		Short: "Save a cluster's discovery and OpenAPI v3 documents for --from-dir",
		Long:  schemaCaptureLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Complete(cmd.ErrOrStderr()); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

// AddFlags registers kcedar schema capture's flags on f.
func (o *schemaCaptureOptions) AddFlags(f *pflag.FlagSet) {
	f.BoolVar(&o.src.Live, "live", false, "read the live cluster (KUBECONFIG, ~/.kube/config or in-cluster config)")
	f.StringVar(&o.src.Kubeconfig, "kubeconfig", "", "read the live cluster of this kubeconfig file")
	f.StringVar(&o.src.Context, "context", "", "kubeconfig context of the live cluster")
	f.StringVar(&o.src.FromDir, "from-dir", "", "re-normalize documents saved earlier")
	f.StringVar(&o.out, "output-dir", "", "directory to write (created if needed)")
	f.StringVarP(&o.legacyOut, "output", "o", "", "deprecated: use --output-dir")
	_ = f.MarkHidden("output")
}

// Complete takes the deprecated -o DIR as --output-dir, with a warning on
// errw; both at once is an error.
func (o *schemaCaptureOptions) Complete(errw io.Writer) error {
	if o.legacyOut == "" {
		return nil
	}
	if o.out != "" {
		return errors.New("give --output-dir only")
	}
	fmt.Fprintf(errw, "warning: -o DIR is deprecated: use --output-dir %s\n", o.legacyOut)
	o.out = o.legacyOut
	return nil
}

// Validate refuses a capture without a directory to write or documents to
// read, and more than one source.
func (o *schemaCaptureOptions) Validate() error {
	if o.out == "" {
		return errors.New("--output-dir DIR is required")
	}
	if !o.src.IsLive() && o.src.FromDir == "" {
		return errors.New("capture needs a live cluster (--kubeconfig or --live) or --from-dir")
	}
	return o.src.Validate()
}

// Run reads the documents, checks that they generate a schema, and writes
// them into --output-dir.
func (o *schemaCaptureOptions) Run(ctx context.Context) error {
	docs, err := o.src.LoadDocuments(ctx)
	if err != nil {
		return err
	}
	// Refuse to save documents kcedar cannot use.
	if _, err := schemagen.Generate(docs); err != nil {
		return fmt.Errorf("captured documents do not generate a schema: %w", err)
	}
	return docs.WriteDir(o.out)
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
	return atomicfile.WriteFile(path, data, perm)
}
