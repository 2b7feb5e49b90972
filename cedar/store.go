package cedar

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Validator checks parsed policies against a schema. It returns one error per
// invalid policy (nil when all are valid).
type Validator interface {
	Validate(policies []*Policy) []error
}

// SourceFile is one policy file as read.
type SourceFile struct {
	Name string
	Data []byte
}

// FileChecker parses and checks policy files as a whole, the way `kcedar
// validate` does: it returns the policies, or one error per finding
// (positioned and hinted; errors that implement slog.LogValuer are logged as
// structured records). cedar/lint's Checker is one. When a Store has one, it
// replaces the Store's own parsing and Validator, so serve and validate
// report the same findings.
type FileChecker interface {
	CheckFiles(files []SourceFile) ([]*Policy, []error)
}

// LoadError is a failed load's findings, one per problem.
type LoadError struct {
	Findings []error
}

// Error is a readable summary: the count, then one finding per line.
func (e *LoadError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d problem", len(e.Findings))
	if len(e.Findings) != 1 {
		b.WriteString("s")
	}
	b.WriteString(" in the policy files:")
	for _, f := range e.Findings {
		b.WriteString("\n  ")
		b.WriteString(strings.ReplaceAll(f.Error(), "\n", "\n  "))
	}
	return b.String()
}

// Unwrap returns the findings.
func (e *LoadError) Unwrap() []error { return e.Findings }

// ReloadResult describes one attempt to load the policy files.
type ReloadResult struct {
	Time     time.Time
	Err      error // nil on success
	Policies int   // policies in the set now serving
	Changed  bool  // the files differed from the set serving
}

// Store holds the policy set that serves requests and replaces it atomically
// when the files change. An invalid edit never replaces a good set: the last
// good set keeps serving and the error is reported through OnReload and Status.
type Store struct {
	paths     []string
	validator Validator
	logger    *slog.Logger

	current     atomic.Pointer[PolicySet]
	mu          sync.Mutex // serializes loads
	fingerprint [32]byte
	lastErr     atomic.Pointer[error]
	generation  uint64
	// The files of the latest failed build and its error: while they stay
	// the same, a reload reports the error again without parsing, validating
	// and logging it every interval.
	failedFingerprint [32]byte
	failedErr         error

	// OnReload, if set, is called after every load attempt.
	OnReload func(ReloadResult)
	// Checker, if set, parses and checks the files (instead of
	// ParsePolicies and the Validator). Set it before the first Load.
	Checker FileChecker
}

// NewStore returns a store over paths (files, or directories searched
// recursively for *.cedar files). Nothing is loaded until Load.
func NewStore(paths []string, validator Validator, logger *slog.Logger) *Store {
	if logger == nil {
		logger = slog.Default()
	}
	return &Store{paths: paths, validator: validator, logger: logger}
}

// Current is the policy set serving now; nil before the first good load.
func (s *Store) Current() *PolicySet { return s.current.Load() }

// LastError is the error of the latest load attempt, nil if it succeeded.
func (s *Store) LastError() error {
	if e := s.lastErr.Load(); e != nil {
		return *e
	}
	return nil
}

// Load reads, parses and validates the policy files and, if everything is
// valid, swaps the new set in. Unchanged files are not parsed again.
func (s *Store) Load() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	files, err := s.read()
	var ps *PolicySet
	changed := false
	if err == nil {
		fp := fingerprint(files)
		if s.current.Load() != nil && fp == s.fingerprint {
			s.lastErr.Store(nil)
			s.failedErr = nil // the same bad files again are news worth logging
			s.report(ReloadResult{Time: time.Now(), Policies: s.current.Load().Len()})
			return nil
		}
		changed = true
		if s.failedErr != nil && fp == s.failedFingerprint {
			err = s.failedErr
			res := ReloadResult{Time: time.Now(), Err: err, Changed: true}
			if cur := s.current.Load(); cur != nil {
				res.Policies = cur.Len()
			}
			s.lastErr.Store(&err)
			s.logger.Debug("policy files unchanged since the failed load", "err", err)
			s.report(res)
			return err
		}
		ps, err = s.build(files)
		if err == nil {
			s.fingerprint = fp
			s.failedErr = nil
		} else {
			s.failedFingerprint, s.failedErr = fp, err
		}
	}
	res := ReloadResult{Time: time.Now(), Err: err, Changed: changed}
	if err != nil {
		s.lastErr.Store(&err)
		// One record per finding, then the outcome.
		var le *LoadError
		summary := []any{"err", err}
		if errors.As(err, &le) {
			for _, f := range le.Findings {
				if lv, ok := f.(slog.LogValuer); ok {
					s.logger.Error("policy error", "finding", lv)
				} else {
					s.logger.Error("policy error", "err", f.Error())
				}
			}
			summary = []any{"problems", len(le.Findings)}
		}
		if cur := s.current.Load(); cur != nil {
			res.Policies = cur.Len()
			s.logger.Error("policy reload failed; the last good policy set keeps serving", append(summary, "serving", cur.Len(), "generation", cur.Generation)...)
		} else {
			s.logger.Error("policy load failed", summary...)
		}
		s.report(res)
		return err
	}
	s.generation++
	ps.Generation = s.generation
	s.current.Store(ps)
	s.lastErr.Store(nil)
	res.Policies = ps.Len()
	s.logger.Info("policies loaded", "policies", ps.Len(), "generation", ps.Generation)
	s.report(res)
	return nil
}

func (s *Store) report(r ReloadResult) {
	if s.OnReload != nil {
		s.OnReload(r)
	}
}

// Watch reloads whenever the files change, checking every interval, until ctx ends.
func (s *Store) Watch(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_ = s.Load()
		}
	}
}

type policyFile struct {
	name string
	data []byte
}

// read collects the policy files in a stable order. A directory is searched
// recursively for *.cedar files, skipping names that start with a dot. A
// directory that is a Kubernetes ConfigMap, Secret or projected volume (its
// files are symlinks into a "..data" symlink that kubelet swaps atomically) is
// read from the snapshot "..data" points to, so a reload never mixes files of
// two versions, and is read again if the snapshot changed during the read.
// Files keep their user-visible names (dir/team.cedar), so policy ids that
// default to file:line:col stay stable across updates.
func (s *Store) read() ([]policyFile, error) {
	if len(s.paths) == 0 {
		return nil, errors.New("no policy paths given")
	}
	const attempts = 5
	for attempt := 1; ; attempt++ {
		files, snapshots, err := s.readOnce()
		if stable(snapshots) {
			return files, err
		}
		if attempt == attempts {
			return nil, errors.New("the policy directories kept changing while being read; will retry")
		}
	}
}

// snapshot is a "..data" symlink and where it pointed during a read.
type snapshot struct{ link, target string }

func stable(snapshots []snapshot) bool {
	for _, sn := range snapshots {
		if t, err := os.Readlink(sn.link); err != nil || t != sn.target {
			return false
		}
	}
	return true
}

func (s *Store) readOnce() ([]policyFile, []snapshot, error) {
	var files []policyFile
	var snapshots []snapshot
	for _, root := range s.paths {
		info, err := os.Stat(root)
		if err != nil {
			return nil, snapshots, err
		}
		if !info.IsDir() {
			f, err := readLimited(root, root)
			if err != nil {
				return nil, snapshots, err
			}
			files = append(files, f)
			continue
		}
		// The root may itself be a symlink (filepath.WalkDir would not enter it).
		real, err := filepath.EvalSymlinks(root)
		if err != nil {
			return nil, snapshots, err
		}
		type found struct{ name, path string }
		var names []found
		var walk func(dir, display string) error
		walk = func(dir, display string) error {
			// A kubelet atomic-writer volume: read the snapshot instead.
			// kubelet's snapshots are siblings named "..<timestamp>"; any
			// other target (which could lead back up the tree) is ignored.
			dataLink := filepath.Join(dir, "..data")
			if target, err := os.Readlink(dataLink); err == nil && strings.HasPrefix(target, "..") && target != ".." && !strings.ContainsRune(target, filepath.Separator) {
				snapshots = append(snapshots, snapshot{link: dataLink, target: target})
				dir = filepath.Join(dir, target)
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				return err
			}
			for _, e := range entries {
				name := e.Name()
				if strings.HasPrefix(name, ".") {
					continue // dot files and dirs, e.g. ..data and ..2024_01_01_00_00_00.123
				}
				path, disp := filepath.Join(dir, name), filepath.Join(display, name)
				switch {
				case e.IsDir():
					if err := walk(path, disp); err != nil {
						return err
					}
				case strings.HasSuffix(name, ".cedar"):
					// Regular files and symlinks to files; symlinked
					// directories are not followed.
					names = append(names, found{name: disp, path: path})
				}
			}
			return nil
		}
		if err := walk(real, root); err != nil {
			return nil, snapshots, err
		}
		sort.Slice(names, func(i, j int) bool { return names[i].name < names[j].name })
		for _, n := range names {
			f, err := readLimited(n.path, n.name)
			if err != nil {
				return nil, snapshots, err
			}
			files = append(files, f)
		}
	}
	return files, snapshots, nil
}

// readLimited reads the file at path, calling it name.
func readLimited(path, name string) (policyFile, error) {
	f, err := os.Open(path)
	if err != nil {
		if name != path {
			return policyFile{}, fmt.Errorf("%s: %w", name, err)
		}
		return policyFile{}, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxPolicyFileBytes+1))
	if err != nil {
		return policyFile{}, fmt.Errorf("%s: %w", name, err)
	}
	if len(data) > MaxPolicyFileBytes {
		return policyFile{}, fmt.Errorf("%s: larger than %d bytes", name, MaxPolicyFileBytes)
	}
	return policyFile{name: name, data: data}, nil
}

func fingerprint(files []policyFile) [32]byte {
	h := sha256.New()
	for _, f := range files {
		fmt.Fprintf(h, "%d:%s\x00%d:", len(f.name), f.name, len(f.data))
		h.Write(f.data)
	}
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out
}

func (s *Store) build(files []policyFile) (*PolicySet, error) {
	// With a Checker (cedar/lint parses files in parallel too), its findings
	// replace ParsePolicies and the Validator.
	if s.Checker != nil {
		src := make([]SourceFile, len(files))
		for i, f := range files {
			src[i] = SourceFile{Name: f.name, Data: f.data}
		}
		all, errs := s.Checker.CheckFiles(src)
		if len(errs) > 0 {
			return nil, &LoadError{Findings: errs}
		}
		return NewPolicySet(all)
	}
	// Files are parsed in parallel (a large set spans many files).
	parsed := make([][]*Policy, len(files))
	perr := make([]error, len(files))
	parallel(len(files), func(i int) { parsed[i], perr[i] = ParsePolicies(files[i].name, files[i].data) })
	var all []*Policy
	var errs []error
	for i := range files {
		if perr[i] != nil {
			errs = append(errs, perr[i])
			continue
		}
		all = append(all, parsed[i]...)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	ps, err := NewPolicySet(all)
	if err != nil {
		return nil, err
	}
	if s.validator != nil {
		if verrs := s.validator.Validate(all); len(verrs) > 0 {
			return nil, errors.Join(verrs...)
		}
	}
	return ps, nil
}
