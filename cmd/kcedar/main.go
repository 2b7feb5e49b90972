// Command kcedar is a Kubernetes authorizer built on Cedar: the webhook server,
// schema export, and offline policy tools. Each subcommand lives in its own file
// and registers itself on rootCmd; the work is done in the library packages.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/kcedar/kcedar/internal/lib/safetext"
)

var rootCmd = &cobra.Command{
	Use:           "kcedar",
	Short:         "A Kubernetes authorizer built on Cedar",
	SilenceUsage:  true,
	SilenceErrors: true,
}

// exitError carries a specific exit code out of a subcommand.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }

func main() {
	root, name := rootCmd, "kcedar"
	if isPluginBinary(os.Args[0]) {
		root, name = newPluginRoot(), pluginName // kubectl cedar: plugin.go
	}
	requireSubcommands(root)
	stopProfile := startProfile()
	err := root.Execute()
	stopProfile()
	if err != nil {
		// Errors quote inputs (files, logs, objects, flags): only their own
		// newlines reach the terminal raw.
		fmt.Fprintln(os.Stderr, name+":", safetext.Lines(err.Error()))
		if ee, ok := err.(*exitError); ok {
			os.Exit(ee.code)
		}
		os.Exit(2)
	}
}
