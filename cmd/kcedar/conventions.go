package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kcedar/kcedar/internal/schemagen"
)

// CLI conventions shared by the subcommands.

// requireSubcommands makes every command that only groups others (kcedar
// schema, kcedar rbac) reject an unknown subcommand the way the root does:
// an error with a suggestion (exit 2), instead of printing help and exiting 0.
func requireSubcommands(c *cobra.Command) {
	for _, sub := range c.Commands() {
		requireSubcommands(sub)
	}
	if c == c.Root() || !c.HasSubCommands() || c.Run != nil || c.RunE != nil {
		return
	}
	c.Args = cobra.ArbitraryArgs
	c.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return cmd.Help()
		}
		return unknownSubcommand(cmd, args[0])
	}
}

func unknownSubcommand(cmd *cobra.Command, arg string) error {
	msg := fmt.Sprintf("unknown command %q for %q", arg, cmd.CommandPath())
	var names []string
	for _, sub := range cmd.Commands() {
		if sub.IsAvailableCommand() {
			names = append(names, sub.Name())
		}
	}
	if m := schemagen.Closest(arg, names); m != "" {
		msg += fmt.Sprintf("; did you mean %q?", cmd.CommandPath()+" "+m)
	}
	return &exitError{2, fmt.Errorf("%s (commands: %s)", msg, strings.Join(names, ", "))}
}

// outputFormat resolves -o/--output, which names an output format in every
// command. Some commands used to take a path with -o: a value that is not one
// of formats is still taken as that path (into *path, the flag pathFlag),
// with a deprecation warning on errw. The first format is the default.
func outputFormat(errw io.Writer, o string, formats []string, path *string, pathFlag string) (string, error) {
	if o == "" {
		return formats[0], nil
	}
	if slices.Contains(formats, o) {
		return o, nil
	}
	if path == nil {
		return "", fmt.Errorf("-o %q: unknown output format (want %s)", o, strings.Join(formats, " or "))
	}
	if *path != "" {
		return "", fmt.Errorf("-o %q: unknown output format (want %s); %s is given too", o, strings.Join(formats, " or "), pathFlag)
	}
	fmt.Fprintf(errw, "warning: -o %s as a path is deprecated: use %s %s (-o names the output format: %s)\n", o, pathFlag, o, strings.Join(formats, ", "))
	*path = o
	return formats[0], nil
}
