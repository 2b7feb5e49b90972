// Package atomicfile replaces a file's contents so that a reader sees either
// the old file (or none) or the whole new one, never a part: the data goes to
// a temporary file in the same directory, which is then renamed over the path.
//
// A reader that waits for a file another process writes (a CA certificate a
// client needs, a schema a build step picks up) must not read a half-written
// file, and a crash mid-write must not leave one behind.
package atomicfile

import (
	"os"
	"path/filepath"
)

// WriteFile writes data to path with mode perm, atomically on file systems
// where rename is (every local POSIX one).
func WriteFile(path string, data []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after a successful rename, there is nothing left to remove
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
