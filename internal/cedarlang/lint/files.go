package lint

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/kcedar/kcedar/internal/cedarlang"
)

// ReadPaths reads policy files: each path is a file, or a directory searched
// recursively for *.cedar files (names starting with a dot are skipped), as
// `kcedar serve --policies` reads them. Files are read up to
// cedarlang.MaxPolicyFileBytes+1 bytes, so a huge file is refused without
// reading it whole.
func ReadPaths(paths []string) ([]File, error) {
	var out []File
	for _, root := range paths {
		info, err := os.Stat(root)
		if err != nil {
			return nil, err
		}
		if !info.IsDir() {
			f, err := readLimited(root)
			if err != nil {
				return nil, err
			}
			out = append(out, f)
			continue
		}
		var names []string
		err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if path != root && strings.HasPrefix(d.Name(), ".") {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			if !d.IsDir() && strings.HasSuffix(d.Name(), ".cedar") {
				names = append(names, path)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		sort.Strings(names)
		for _, n := range names {
			f, err := readLimited(n)
			if err != nil {
				return nil, err
			}
			out = append(out, f)
		}
	}
	return out, nil
}

func readLimited(path string) (File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return File{}, err
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, cedarlang.MaxPolicyFileBytes+1))
	if err != nil {
		return File{}, fmt.Errorf("%s: %w", path, err)
	}
	return File{Name: path, Data: data}, nil
}

// InvalidPoliciesError carries the error diagnostics of policies that do not
// validate.
type InvalidPoliciesError struct {
	Diagnostics []Diagnostic
}

func (e *InvalidPoliciesError) Error() string {
	return fmt.Sprintf("the policies are not valid (%d errors)", len(e.Diagnostics))
}

// LoadPolicies reads and checks policy files and returns them as a policy
// set, or an *InvalidPoliciesError with the errors.
func (c *Checker) LoadPolicies(paths []string) (*cedarlang.PolicySet, error) {
	files, err := ReadPaths(paths)
	if err != nil {
		return nil, err
	}
	res := c.Check(files)
	if res.Errors() > 0 {
		inv := &InvalidPoliciesError{}
		for _, d := range res.Diagnostics {
			if d.Severity == Error {
				inv.Diagnostics = append(inv.Diagnostics, d)
			}
		}
		return nil, inv
	}
	return cedarlang.NewPolicySet(res.Policies)
}
