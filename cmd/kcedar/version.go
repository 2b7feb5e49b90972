package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kcedar/kcedar/internal/lib/version"
)

func init() { rootCmd.AddCommand(newVersionCmd()) }

// versionOptions are kcedar version's flags.
type versionOptions struct {
	output string
}

func newVersionCmd() *cobra.Command {
	o := &versionOptions{}
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print kcedar's version, VCS revision, Go version and platform",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Complete()
			if err := o.Validate(); err != nil {
				return &exitError{2, err}
			}
			return o.Run(cmd.OutOrStdout())
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

// AddFlags registers kcedar version's flags on f.
func (o *versionOptions) AddFlags(f *pflag.FlagSet) {
	f.StringVarP(&o.output, "output", "o", "text", "text or json")
}

// Complete has nothing to fill in: it is here for the commands' common shape.
func (o *versionOptions) Complete() {}

// Validate refuses an unknown --output.
func (o *versionOptions) Validate() error {
	if o.output != "text" && o.output != "json" {
		return fmt.Errorf("--output %q: use text or json", o.output)
	}
	return nil
}

// Run prints the build's identity to w as text or JSON.
func (o *versionOptions) Run(w io.Writer) error {
	i := version.Get()
	if o.output == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(i)
	}
	rev := i.Revision
	if rev == "" {
		rev = "unknown"
	}
	if i.Modified {
		rev += " (modified)"
	}
	fmt.Fprintf(w, "kcedar %s\nrevision: %s\ngo: %s\nplatform: %s\n", i.Version, rev, i.GoVersion, i.Platform)
	return nil
}

// registerBuildInfo adds kcedar_build_info (always 1, labelled with the
// build identity) to reg.
func registerBuildInfo(reg prometheus.Registerer) {
	i := version.Get()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "kcedar_build_info",
		Help:        "kcedar's build: always 1, labelled with version, revision, Go version and platform.",
		ConstLabels: prometheus.Labels{"version": i.Version, "revision": i.Revision, "modified": strconv.FormatBool(i.Modified), "goversion": i.GoVersion, "platform": i.Platform},
	})
	g.Set(1)
	_ = reg.Register(g)
}
