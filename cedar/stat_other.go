//go:build !linux

package cedar

import "os"

// fileStat is what decides whether a file changed between two reads.
type fileStat struct {
	size  int64
	mtime int64 // nanoseconds
}

// renamed: unknown without change times; files settle (readStable rule 3).
func (fileStat) renamed() bool { return false }

func statOf(f *os.File) (fileStat, error) {
	info, err := f.Stat()
	if err != nil {
		return fileStat{}, err
	}
	return fileStat{size: info.Size(), mtime: info.ModTime().UnixNano()}, nil
}
