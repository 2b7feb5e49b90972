//go:build !linux

package store

import "os"

// fileStat is what decides whether a file changed between two reads.
type fileStat struct {
	size  int64
	mtime int64 // nanoseconds
	ctime int64 // always 0: no change times here (changeTimes is false)
}

// renamed: unknown without change times; files settle (readStable rule 3).
func (fileStat) renamed() bool { return false }

// changeTimes: without change times an unchanged status does not prove
// unchanged content (a tool may set the modification time back).
func (fileStat) changeTimes() bool { return false }

func statOf(f *os.File) (fileStat, error) {
	info, err := f.Stat()
	if err != nil {
		return fileStat{}, err
	}
	return fileStat{size: info.Size(), mtime: info.ModTime().UnixNano()}, nil
}

func statPath(path string) (fileStat, error) {
	info, err := os.Stat(path)
	if err != nil {
		return fileStat{}, err
	}
	return fileStat{size: info.Size(), mtime: info.ModTime().UnixNano()}, nil
}

// soleLink is false: without a rename witness it is never asked.
func soleLink(string, fileStat) bool { return false }
