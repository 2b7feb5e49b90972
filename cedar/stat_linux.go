package cedar

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

func statOf(f *os.File) (fileStat, error) {
	info, err := f.Stat()
	if err != nil {
		return fileStat{}, err
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return fileStat{size: info.Size(), mtime: info.ModTime().UnixNano()}, nil
	}
	return fileStat{
		size:  st.Size,
		mtime: st.Mtim.Sec*1e9 + st.Mtim.Nsec,
		ctime: st.Ctim.Sec*1e9 + st.Ctim.Nsec,
		dev:   uint64(st.Dev),
		ino:   st.Ino,
	}, nil
}
