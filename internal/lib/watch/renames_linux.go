//go:build linux

package watch

import (
	"encoding/binary"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// Renames witnesses which files arrived in their directory by a rename (or a
// move) and have not been written, truncated, created, replaced or removed
// under that name since: an atomic writer's file, complete by construction.
// It reads the kernel's own account (inotify's "moved to" event, which
// fsnotify reports as a plain create), so it tells a rename from an in-place
// writer even when both happen within one tick of the file system's clock,
// where the file's times cannot.
//
// It knows only what it saw: a directory is watched from the first Watch of
// it, and a lost event (a queue overflow, the directory moved or removed)
// forgets everything it concerned. So it can only say "not known to have
// arrived by a rename", never the opposite wrongly, for writes through the
// directories it watches. A write through another hard link raises no event
// here, so callers trust it only for a regular file with one link; nor does
// a write through a shared memory mapping of the file, which nothing here
// can see.
//
// A nil *Renames witnesses nothing. The methods are safe for concurrent use.
type Renames struct {
	mu   sync.Mutex
	fd   int              // the inotify instance, non-blocking; -1 once closed or broken
	seq  uint64           // events drained so far
	dirs map[string]int32 // a watched directory (as Watch was given it) -> its watch
	byWD map[int32]map[string]uint64
	buf  []byte
}

// renamesMask: every event that changes what a name in the directory holds,
// and the directory itself going away; not writes to a file no longer linked
// in the directory (replaced by a rename, or removed), which do not concern
// the name.
const renamesMask = syscall.IN_MOVED_TO | syscall.IN_MOVED_FROM | syscall.IN_CREATE | syscall.IN_DELETE |
	syscall.IN_MODIFY | syscall.IN_DELETE_SELF | syscall.IN_MOVE_SELF | syscall.IN_ONLYDIR | syscall.IN_EXCL_UNLINK

// NewRenames starts a witness, or returns nil when the system has no inotify
// instance to give (the caller then goes without).
func NewRenames() *Renames {
	fd, err := syscall.InotifyInit1(syscall.IN_NONBLOCK | syscall.IN_CLOEXEC)
	if err != nil {
		return nil
	}
	return &Renames{fd: fd, dirs: map[string]int32{}, byWD: map[int32]map[string]uint64{}, buf: make([]byte, 64<<10)}
}

// Close stops watching.
func (r *Renames) Close() {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.broken()
}

// broken closes the instance and forgets everything; r.mu is held.
func (r *Renames) broken() {
	if r.fd >= 0 {
		_ = syscall.Close(r.fd)
	}
	r.fd = -1
	clear(r.dirs)
	clear(r.byWD)
}

// Watch starts witnessing the files directly in dir, from now on. A
// directory that cannot be watched is left out (its files are never
// witnessed).
func (r *Renames) Watch(dir string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.dirs[dir]; ok || r.fd < 0 {
		return
	}
	wd, err := syscall.InotifyAddWatch(r.fd, dir, renamesMask)
	if err != nil {
		return
	}
	r.dirs[dir] = int32(wd)
	if r.byWD[int32(wd)] == nil { // the same directory under another path shares its watch
		r.byWD[int32(wd)] = map[string]uint64{}
	}
}

// Mark takes in every event so far and returns a mark of this moment.
func (r *Renames) Mark() uint64 {
	if r == nil {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.drain()
	return r.seq
}

// Arrived says whether, as of the latest Mark, the file at path arrived by
// a rename before mark was taken and nothing has happened to its name since.
// The usual use: mark, read the file, Mark again, then ask Arrived(path,
// mark): true means the whole read saw the renamed file, untouched.
func (r *Renames) Arrived(path string, mark uint64) bool {
	if r == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	wd, ok := r.dirs[filepath.Dir(path)]
	if !ok || r.fd < 0 {
		return false
	}
	at, ok := r.byWD[wd][filepath.Base(path)]
	return ok && at <= mark
}

// drain reads every queued event; r.mu is held.
func (r *Renames) drain() {
	for r.fd >= 0 {
		n, err := syscall.Read(r.fd, r.buf)
		switch {
		case errors.Is(err, syscall.EAGAIN):
			return
		case errors.Is(err, syscall.EINTR):
			continue
		case err != nil || n <= 0:
			r.broken()
			return
		}
		r.takeEvents(r.buf[:n])
	}
}

// inotifyHeader is the size of struct inotify_event before its name.
const inotifyHeader = 16

// takeEvents applies a buffer of struct inotify_event records.
func (r *Renames) takeEvents(b []byte) {
	for len(b) >= inotifyHeader {
		wd := int32(binary.NativeEndian.Uint32(b[0:4]))
		mask := binary.NativeEndian.Uint32(b[4:8])
		size := int(binary.NativeEndian.Uint32(b[12:16]))
		if len(b) < inotifyHeader+size {
			r.broken() // a record cut short: nothing more can be trusted
			return
		}
		name, _, _ := strings.Cut(string(b[inotifyHeader:inotifyHeader+size]), "\x00") // NUL-padded
		b = b[inotifyHeader+size:]
		r.seq++
		r.take(wd, mask, name)
	}
}

// take applies one event.
func (r *Renames) take(wd int32, mask uint32, name string) {
	switch {
	case mask&syscall.IN_Q_OVERFLOW != 0:
		for _, names := range r.byWD {
			clear(names) // events were lost: nothing is known any more
		}
		return
	case mask&(syscall.IN_IGNORED|syscall.IN_DELETE_SELF|syscall.IN_MOVE_SELF) != 0:
		r.forget(wd)
		return
	}
	names := r.byWD[wd]
	if names == nil || name == "" {
		return
	}
	if mask&syscall.IN_MOVED_TO != 0 && mask&syscall.IN_ISDIR == 0 {
		names[name] = r.seq
		return
	}
	delete(names, name)
}

// forget drops a watch whose directory went away (or was moved: its path
// now names something else); a later Watch of the path starts afresh.
func (r *Renames) forget(wd int32) {
	if _, ok := r.byWD[wd]; !ok {
		return
	}
	_, _ = syscall.InotifyRmWatch(r.fd, uint32(wd))
	delete(r.byWD, wd)
	for dir, w := range r.dirs {
		if w == wd {
			delete(r.dirs, dir)
		}
	}
}
