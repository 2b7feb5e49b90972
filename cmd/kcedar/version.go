package main

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/kcedar/kcedar/internal/lib/version"
)

func init() { rootCmd.AddCommand(newVersionCmd()) }

func newVersionCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print kcedar's version, VCS revision, Go version and platform",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			i := version.Get()
			switch output {
			case "json":
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(i)
			case "text":
				rev := i.Revision
				if rev == "" {
					rev = "unknown"
				}
				if i.Modified {
					rev += " (modified)"
				}
				fmt.Fprintf(cmd.OutOrStdout(), "kcedar %s\nrevision: %s\ngo: %s\nplatform: %s\n", i.Version, rev, i.GoVersion, i.Platform)
				return nil
			}
			return &exitError{2, fmt.Errorf("--output %q: use text or json", output)}
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text or json")
	return cmd
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
