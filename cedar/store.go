package cedar

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
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

	// OnReload, if set, is called after every load attempt.
	OnReload func(ReloadResult)
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
			s.report(ReloadResult{Time: time.Now(), Policies: s.current.Load().Len()})
			return nil
		}
		changed = true
		ps, err = s.build(files)
		if err == nil {
			s.fingerprint = fp
		}
	}
	res := ReloadResult{Time: time.Now(), Err: err, Changed: changed}
	if err != nil {
		s.lastErr.Store(&err)
		if cur := s.current.Load(); cur != nil {
			res.Policies = cur.Len()
			s.logger.Error("policy reload failed; the last good policy set keeps serving", "err", err, "serving", cur.Len(), "generation", cur.Generation)
		} else {
			s.logger.Error("policy load failed", "err", err)
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

// read collects the policy files in a stable order.
func (s *Store) read() ([]policyFile, error) {
	if len(s.paths) == 0 {
		return nil, errors.New("no policy paths given")
	}
	var files []policyFile
	for _, root := range s.paths {
		info, err := os.Stat(root)
		if err != nil {
			return nil, err
		}
		if !info.IsDir() {
			f, err := readLimited(root)
			if err != nil {
				return nil, err
			}
			files = append(files, f)
			continue
		}
		var names []string
		err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && path != root && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir // e.g. Kubernetes ConfigMap mounts' ..data dirs
			}
			if !d.IsDir() && strings.HasSuffix(d.Name(), ".cedar") && !strings.HasPrefix(d.Name(), ".") {
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
			files = append(files, f)
		}
	}
	return files, nil
}

func readLimited(name string) (policyFile, error) {
	f, err := os.Open(name)
	if err != nil {
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
	var all []*Policy
	var errs []error
	for _, f := range files {
		ps, err := ParsePolicies(f.name, f.data)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		all = append(all, ps...)
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
