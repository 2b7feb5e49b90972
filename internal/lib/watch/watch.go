// Package watch tells when files may have changed: one watcher for the
// policy files, the conditions key file and the TLS files. It listens to
// fsnotify events on the files' parent directories (so atomic renames and
// kubelet's "..data" symlink swaps in ConfigMap and Secret volumes are seen,
// which a watch on the file itself misses once the file is replaced) and on
// watched directories and their subdirectories, and it polls at an interval
// as the fallback (file systems without inotify, lost events, a watch limit
// reached, a parent directory replaced).
//
// The watcher only triggers: the caller reads the files and decides whether
// anything changed (by content), so a spurious trigger costs one read.
package watch

import (
	"context"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Run calls fn after file system events that may concern paths (files or
// directories, watched recursively) and every interval, until ctx ends. Calls
// of fn never overlap; events that arrive while fn runs cause one more call.
// Without fsnotify (an error creating or adding watches) it only polls.
func Run(ctx context.Context, paths []string, interval time.Duration, logger *slog.Logger, fn func()) {
	setup(ctx, paths, interval, logger)(fn)
}

// Start is Run in a goroutine, with the watches registered before it
// returns: a change made after Start is seen.
func Start(ctx context.Context, paths []string, interval time.Duration, logger *slog.Logger, fn func()) {
	run := setup(ctx, paths, interval, logger)
	go run(fn)
}

func setup(ctx context.Context, paths []string, interval time.Duration, logger *slog.Logger) func(fn func()) {
	if logger == nil {
		logger = slog.Default()
	}
	if interval <= 0 {
		interval = 2 * time.Second
	}
	kick := make(chan struct{}, 1)
	w := newWatcher(paths, logger, kick)
	if w != nil {
		go w.loop(ctx)
	}
	return func(fn func()) {
		if w != nil {
			defer w.close()
		}
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if w != nil {
					w.add() // re-establish watches on directories replaced since
				}
			case <-kick:
			}
			fn()
		}
	}
}

type watcher struct {
	fsw    *fsnotify.Watcher
	logger *slog.Logger
	kick   chan struct{}
	// roots are the watched paths, absolute; files maps a parent directory
	// to the base names in it that matter (the watched files, the
	// targets of symlinks).
	roots []string
	mu    sync.Mutex          // guards dirs and files (add runs on the ticker, relevant on events)
	dirs  map[string]bool     // watched directory trees (every event counts)
	files map[string][]string // parent dir -> interesting base names
}

func newWatcher(paths []string, logger *slog.Logger, kick chan struct{}) *watcher {
	fsw, err := fsnotify.NewWatcher()
	if err != nil {
		logger.Warn("file system notifications unavailable; polling only", "err", err)
		return nil
	}
	w := &watcher{fsw: fsw, logger: logger, kick: kick, dirs: map[string]bool{}, files: map[string][]string{}}
	for _, p := range paths {
		if abs, err := filepath.Abs(p); err == nil {
			w.roots = append(w.roots, abs)
		}
	}
	w.add()
	return w
}

func (w *watcher) close() { _ = w.fsw.Close() }

// add (re)registers the watches: every root's parent directory; a directory
// root and its subdirectories; the directory of a symlink's target.
func (w *watcher) add() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, root := range w.roots {
		w.watchFile(root)
		if real, err := filepath.EvalSymlinks(root); err == nil && real != root {
			w.watchFile(real)
		}
		info, err := os.Stat(root)
		if err != nil || !info.IsDir() {
			continue
		}
		real, err := filepath.EvalSymlinks(root)
		if err != nil {
			continue
		}
		w.watchTree(root)
		if real != root {
			w.watchTree(real)
		}
	}
}

func (w *watcher) watchFile(path string) {
	dir, base := filepath.Dir(path), filepath.Base(path)
	names := w.files[dir]
	found := false
	for _, n := range names {
		found = found || n == base
	}
	if !found {
		w.files[dir] = append(names, base)
	}
	w.watchDir(dir)
}

func (w *watcher) watchTree(root string) {
	w.dirs[root] = true
	_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() {
			w.watchDir(path)
		}
		return nil
	})
}

func (w *watcher) watchDir(dir string) {
	if err := w.fsw.Add(dir); err != nil {
		w.logger.Debug("cannot watch directory; polling covers it", "dir", dir, "err", err)
	}
}

// relevant says whether an event on name may change what the roots read.
func (w *watcher) relevant(name string) bool {
	dir, base := filepath.Dir(name), filepath.Base(name)
	w.mu.Lock()
	defer w.mu.Unlock()
	if strings.HasPrefix(base, "..") {
		return true // kubelet's ..data and ..<timestamp> snapshots
	}
	for _, n := range w.files[dir] {
		if n == base {
			return true
		}
	}
	for root := range w.dirs {
		if name == root || strings.HasPrefix(name, root+string(filepath.Separator)) {
			return true
		}
	}
	return false
}

func (w *watcher) loop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.fsw.Events:
			if !ok {
				return
			}
			if !w.relevant(ev.Name) {
				continue
			}
			if ev.Has(fsnotify.Create) {
				if info, err := os.Stat(ev.Name); err == nil && info.IsDir() {
					w.watchDir(ev.Name) // a new subdirectory (or snapshot)
				}
			}
			w.trigger()
		case err, ok := <-w.fsw.Errors:
			if !ok {
				return
			}
			// Typically an event queue overflow: something changed.
			w.logger.Debug("file watch error; reading the files again", "err", err)
			w.trigger()
		}
	}
}

func (w *watcher) trigger() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}
