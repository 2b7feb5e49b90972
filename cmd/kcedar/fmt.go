package main

import (
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kcedar/kcedar/internal/cedarlang/format"
	"github.com/kcedar/kcedar/internal/cedarlang/lint"
	"github.com/kcedar/kcedar/internal/lib/atomicfile"
)

func init() { rootCmd.AddCommand(newFmtCmd()) }

// fmtOptions are kcedar fmt's flags and arguments. AddFlags registers the
// flags, Complete takes the arguments and stdin, Validate refuses bad
// combinations (exit 2) and Run formats.
type fmtOptions struct {
	write bool // -w: rewrite the files
	diff  bool // -d: print diffs
	check bool // --check: only report unformatted files
	paths []string
	stdin io.Reader // for the path "-"
}

const fmtLong = `Format Cedar policy files (and directories of *.cedar files) in kcedar's
canonical style (docs/policy-authoring.md, "Formatting"). Comments are kept
where they were; only the whitespace between tokens changes, and the result
is checked to parse to the same policies. In a // comment, a carriage return,
vertical tab, form feed, U+0085, U+2028 or U+2029 is written as an escape
(\u{d}, ...): other Cedar readers end the comment there and would read the
rest as code.

Without flags the formatted text is printed. -w rewrites the files in place,
-d prints a unified diff, --check prints the names of the files that are not
formatted. PATH - is stdin.

Policies without @id take their ids from their positions; fmt warns (on
stderr) about those whose position it changes.

Exit status: 0 formatted, 1 --check found unformatted files or a file does
not parse, 2 usage or I/O error.`

func newFmtCmd() *cobra.Command {
	o := &fmtOptions{}
	cmd := &cobra.Command{
		Use:   "fmt [-w] [-d] [--check] PATH... (- for stdin)",
		Short: "Format Cedar policy files in the canonical style, keeping comments",
		Long:  fmtLong,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Complete(args, cmd.InOrStdin())
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

// AddFlags registers kcedar fmt's flags on f.
func (o *fmtOptions) AddFlags(f *pflag.FlagSet) {
	f.BoolVarP(&o.write, "write", "w", false, "write the formatted text back to the files")
	f.BoolVarP(&o.diff, "diff", "d", false, "print a unified diff of the changes")
	f.BoolVar(&o.check, "check", false, "print the files that are not formatted and exit 1 if there are any")
}

// Complete takes the paths and the stdin that "-" reads.
func (o *fmtOptions) Complete(paths []string, stdin io.Reader) {
	o.paths, o.stdin = paths, stdin
}

// Validate refuses nothing to format, -w with --check, and -w on stdin.
func (o *fmtOptions) Validate() error {
	switch {
	case len(o.paths) == 0:
		return &exitError{2, fmt.Errorf("give policy files or directories (PATH...), or - for stdin")}
	case o.write && o.check:
		return &exitError{2, fmt.Errorf("-w and --check do not go together")}
	case o.write && slices.Contains(o.paths, "-"):
		return &exitError{2, fmt.Errorf("-w cannot write back to stdin")}
	}
	return nil
}

// Run formats every file: the text (by default), diffs, names (--check) or
// the files rewritten (-w) on out, warnings and errors on errOut. The error
// carries the exit code.
func (o *fmtOptions) Run(out, errOut io.Writer) error {
	files, err := readPolicyPaths(o.paths, o.stdin)
	if err != nil {
		return &exitError{2, err}
	}
	if len(files) == 0 {
		return &exitError{2, fmt.Errorf("no *.cedar files in %v", o.paths)}
	}
	invalid, unformatted := 0, 0
	for _, f := range files {
		res, err := format.Source(f.Name, f.Data)
		if err != nil {
			fmt.Fprintln(errOut, err)
			invalid++
			continue
		}
		for _, w := range res.Warnings {
			fmt.Fprintln(errOut, "warning:", w)
		}
		if res.Changed(f.Data) {
			unformatted++
		}
		if err := o.emit(out, f, res); err != nil {
			return &exitError{2, err}
		}
	}
	switch {
	case invalid > 0:
		return &exitError{1, fmt.Errorf("%s did not parse", plural(invalid, "file"))}
	case o.check && unformatted > 0:
		return &exitError{1, fmt.Errorf("%s not formatted (kcedar fmt -w formats them)", plural(unformatted, "file"))}
	}
	return nil
}

// emit shows or writes one formatted file as the flags ask.
func (o *fmtOptions) emit(out io.Writer, f lint.File, res format.Result) error {
	changed := res.Changed(f.Data)
	if o.diff && changed {
		if _, err := io.WriteString(out, format.Diff(f.Name, f.Data, res.Text)); err != nil {
			return err
		}
	}
	switch {
	case o.check:
		if changed && !o.diff {
			_, err := fmt.Fprintln(out, f.Name)
			return err
		}
	case o.write:
		if changed {
			return writeAtomic(f.Name, res.Text)
		}
	case !o.diff:
		_, err := out.Write(res.Text)
		return err
	}
	return nil
}

// writeAtomic replaces the file at path with data: a temporary file in the
// same directory, with the file's mode, renamed over it.
func writeAtomic(path string, data []byte) error {
	info, err := os.Stat(path)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, data, info.Mode().Perm())
}
