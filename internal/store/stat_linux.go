package store

import (
	"os"
	"syscall"
)

// fileStat is what decides whether a file changed between two reads.
type fileStat struct {
	size         int64
	mtime, ctime int64 // nanoseconds
	dev, ino     uint64
}

// renamed: the file's status changed after its content last did, as a
// rename (or link) into place after the last write does; every write sets
// both times.
func (s fileStat) renamed() bool { return s.ctime > s.mtime }

// changeTimes: the status has change times, which every write moves and
// no user-space tool can set back, so an unchanged status (taken well after
// the last change) means unchanged content.
func (s fileStat) changeTimes() bool { return s.ctime != 0 }

func statOf(f *os.File) (fileStat, error) {
	info, err := f.Stat()
	if err != nil {
		return fileStat{}, err
	}
	return statFromInfo(info), nil
}

// statPath is the status of the file path names (symlinks followed, as an
// open follows them).
func statPath(path string) (fileStat, error) {
	info, err := os.Stat(path)
	if err != nil {
		return fileStat{}, err
	}
	return statFromInfo(info), nil
}

func statFromInfo(info os.FileInfo) fileStat {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return fileStat{size: info.Size(), mtime: info.ModTime().UnixNano()}
	}
	return fileStat{
		size:  st.Size,
		mtime: st.Mtim.Sec*1e9 + st.Mtim.Nsec,
		ctime: st.Ctim.Sec*1e9 + st.Ctim.Nsec,
		dev:   uint64(st.Dev),
		ino:   st.Ino,
	}
}

// soleLink: path names, itself (not through a symlink), the regular file
// whose status st is, and that file has no other link, so every write to it
// goes through path's directory, where the rename witness sees it.
func soleLink(path string, st fileStat) bool {
	info, err := os.Lstat(path)
	if err != nil || !info.Mode().IsRegular() {
		return false
	}
	l, ok := info.Sys().(*syscall.Stat_t)
	return ok && l.Nlink == 1 && uint64(l.Dev) == st.dev && l.Ino == st.ino
}
