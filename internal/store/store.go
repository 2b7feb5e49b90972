package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/lib/parallel"
	"github.com/kcedar/kcedar/internal/lib/watch"
	"github.com/kcedar/kcedar/internal/schemagen"
)

// Validator checks parsed policies against a schema. It returns one error per
// invalid policy (nil when all are valid).
type Validator interface {
	Validate(policies []*cedarlang.Policy) []error
}

// FileChecker parses and checks policy files as a whole, the way `kcedar
// validate` does: it returns the policies, or one error per finding
// (positioned and hinted; errors that implement slog.LogValuer are logged as
// structured records). cedar/lint's Checker is one. When a Store has one, it
// replaces the Store's own parsing and Validator, so serve and validate
// report the same findings.
type FileChecker interface {
	CheckFiles(files []cedarlang.SourceFile) ([]*cedarlang.Policy, []error)
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
	// Repeat: the same content as the previous failed attempt, whose
	// error was reported already (count failures once per content).
	Repeat bool
	// Hash identifies the content of the set serving after the attempt
	// (hex SHA-256 over file names and contents); "" before a good load.
	Hash string
	// Incremental: the set was built by the change from the one serving
	// before (only changed files re-parsed, only new policies validated,
	// the index derived), rather than from scratch.
	Incremental bool
}

// DefaultSettle is the settle window kcedar serve uses (--policy-settle).
const DefaultSettle = 300 * time.Millisecond

// errUnsettled: the files kept changing for as long as a load waited.
var errUnsettled = errors.New("the policy files kept changing while being read; waiting for them to settle")

// Store holds the policy set that serves requests and replaces it atomically
// when the files change. An invalid edit never replaces a good set: the last
// good set keeps serving and the error is reported through OnReload and Status.
type Store struct {
	paths     []string
	validator Validator
	logger    *slog.Logger

	// Settle: a source is loaded only once it has read the same (the same
	// names, sizes, modification and change times, inodes and contents)
	// twice, Settle apart; see readStable for the rule. 0 loads what
	// it reads (tests). Set these fields before the first Load.
	Settle time.Duration
	// AllowEmpty: a source with no policies loads (an empty set answers
	// NoOpinion to everything); otherwise it is a load error. A store with
	// policy objects (SetSources) always takes an empty set: the API server
	// says what exists, and deleting the last object must revoke it.
	AllowEmpty bool
	// MaxPolicyLoss: refuse a reload that removes more than this share of
	// the serving set's policies (by id); 0 or >= 1 turns the check off.
	MaxPolicyLoss float64
	// KeepForbids: refuse a reload that removes any forbid (by id).
	KeepForbids bool

	// renames witnesses files renamed into place (Watch starts it; nil
	// otherwise); guarded by mu.
	renames *watch.Renames

	sleep   func(time.Duration) // time.Sleep; tests step through settling
	now     func() time.Time    // time.Now; tests move a read past the racy second
	serving map[string]fileMeta // the files of the set serving, by name
	// afterMark: tests act between the rename witness's mark and a read.
	afterMark func()
	// servingRead: when the read that saw serving began; servingSources:
	// the generation of the extra sources it saw.
	servingRead    time.Time
	servingSources uint64
	fileReads      atomic.Uint64
	hash           atomic.Pointer[string]
	lastFail       atomic.Pointer[failure]

	current     atomic.Pointer[cedarlang.PolicySet]
	mu          sync.Mutex // serializes loads
	fingerprint [32]byte
	lastErr     atomic.Pointer[error]
	generation  uint64
	// The files of the latest failed build and its error: while they stay
	// the same, a reload reports the error again without parsing, validating
	// and logging it every interval.
	failedFingerprint [32]byte
	failedErr         error
	// built: the files of the set serving and the policies of each, for
	// the next load to build by the change (buildDelta); nil: unknown.
	built *builtSet

	// Extra sources (SetSources): nil until set.
	sourcesMu  sync.Mutex
	sources    []policyFile
	sourcesGen uint64 // counts changes of sources

	// OnReload, if set, is called after every load attempt.
	OnReload func(ReloadResult)
	// Checker, if set, parses and checks the files (instead of
	// ParsePolicies and the Validator). Set it before the first Load.
	Checker FileChecker
	// Schema, if set, is the schema the validator and Checker check
	// against; every set the store builds carries it (PolicySet.Schema).
	// Set it before the first Load; Rebase replaces it (with the validator
	// and Checker) under the store's lock.
	Schema *schemagen.Schema
}

// SchemaCheck is a schema with the validator and file checker built from
// it: what Rebase moves a store to.
type SchemaCheck struct {
	Schema    *schemagen.Schema
	Validator Validator
	Checker   FileChecker
}

type failure struct {
	err error
	at  time.Time
}

// NewStore returns a store over paths (files, or directories searched
// recursively for *.cedar files). Nothing is loaded until Load.
func NewStore(paths []string, validator Validator, logger *slog.Logger) *Store {
	if logger == nil {
		logger = slog.Default()
	}
	return &Store{paths: paths, validator: validator, logger: logger, sleep: time.Sleep, now: time.Now}
}

// Hash identifies the content of the set serving (hex SHA-256 over file
// names and contents), "" before the first good load.
func (s *Store) Hash() string {
	if h := s.hash.Load(); h != nil {
		return *h
	}
	return ""
}

// LastFailure is the error of the latest load attempt and when it was first
// seen for this content; nil if the latest attempt succeeded.
func (s *Store) LastFailure() (time.Time, error) {
	if f := s.lastFail.Load(); f != nil {
		return f.at, f.err
	}
	return time.Time{}, nil
}

// FileReads counts the reads of the policy files: a load or poll that finds
// every file as the serving set's read left it reads none (see unchanged).
func (s *Store) FileReads() uint64 { return s.fileReads.Load() }

// Current is the policy set serving now; nil before the first good load.
func (s *Store) Current() *cedarlang.PolicySet { return s.current.Load() }

// LastError is the error of the latest load attempt, nil if it succeeded.
func (s *Store) LastError() error {
	if e := s.lastErr.Load(); e != nil {
		return *e
	}
	return nil
}

// Load reads, parses and validates the policy files and, if everything is
// valid, swaps the new set in. Unchanged files are not parsed again. With a
// settle window, Load waits (up to 10 windows) for the files to be stable.
func (s *Store) Load() error { return s.LoadContext(context.Background()) }

// LoadContext is Load that stops waiting for the files to settle when ctx
// ends, returning ctx's error with the serving set unchanged.
func (s *Store) LoadContext(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.unchanged()
	if !ok {
		c = s.readStable(ctx)
	}
	if err := ctx.Err(); err != nil && c.err == err {
		return err
	}
	if c.err == errUnsettled {
		s.logger.Warn("policy files are being written; the serving set stays until they settle", "settle", s.Settle.String())
		return c.err
	}
	now := time.Now()
	cur := s.current.Load()
	if c.err == nil && cur != nil && c.fp == s.fingerprint {
		s.serving, s.servingRead, s.servingSources = c.meta, c.readAt, c.sourcesGen
		s.lastErr.Store(nil)
		s.lastFail.Store(nil)
		s.failedErr = nil // the same bad files again are news worth logging
		s.report(ReloadResult{Time: now, Policies: cur.Len(), Hash: s.Hash()})
		return nil
	}
	if s.failedErr != nil && c.fp == s.failedFingerprint {
		err := s.failedErr
		res := ReloadResult{Time: now, Err: err, Changed: true, Repeat: true, Hash: s.Hash()}
		if cur != nil {
			res.Policies = cur.Len()
		}
		s.lastErr.Store(&err)
		s.logger.Debug("policy files unchanged since the failed load", "err", err)
		s.report(res)
		return err
	}
	var ps *cedarlang.PolicySet
	var perFile [][]*cedarlang.Policy
	incremental := false
	err := c.err
	if err == nil {
		ps, perFile, incremental, err = s.buildFrom(cur, c.files)
	}
	if err == nil {
		err = s.checkShrink(cur, ps)
	}
	res := ReloadResult{Time: now, Err: err, Changed: true}
	if err != nil {
		s.failedFingerprint, s.failedErr = c.fp, err
		s.lastErr.Store(&err)
		s.lastFail.Store(&failure{err: err, at: now})
		res.Hash = s.Hash()
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
		if cur != nil {
			res.Policies = cur.Len()
			s.logger.Error("policy reload failed; the last good policy set keeps serving", append(summary, "serving", cur.Len(), "generation", cur.Generation)...)
		} else {
			s.logger.Error("policy load failed", summary...)
		}
		s.report(res)
		return err
	}
	res.Incremental = incremental
	s.swapIn(ps, perFile, c, res, "policies loaded")
	return nil
}

// swapIn makes ps (built from the read c) the serving set; s.mu is held.
func (s *Store) swapIn(ps *cedarlang.PolicySet, perFile [][]*cedarlang.Policy, c candidate, res ReloadResult, msg string) {
	s.fingerprint, s.failedErr, s.serving = c.fp, nil, c.meta
	s.built = newBuiltSet(c.files, perFile)
	s.servingRead, s.servingSources = c.readAt, c.sourcesGen
	hash := hex.EncodeToString(c.fp[:])
	s.hash.Store(&hash)
	s.generation++
	ps.Generation = s.generation
	ps.Schema = s.Schema
	s.current.Store(ps)
	s.lastErr.Store(nil)
	s.lastFail.Store(nil)
	res.Policies, res.Hash = ps.Len(), hash
	s.logger.Info(msg, "policies", ps.Len(), "generation", ps.Generation, "hash", hash, "incremental", res.Incremental)
	s.report(res)
}

// Rebase moves the store to a new schema: it reads the policy files and
// sources as they are now, checks them against sc and, if every policy
// validates (and the set passes the shrink checks), swaps in the set built
// against sc, which then checks every later load. If anything does not
// validate, nothing changes: the last good set keeps serving with its
// schema, the store keeps checking against it, and the error lists the
// findings (a *LoadError with a Checker). A failed Rebase is not a failed
// load: it is not reported to OnReload, LastError or LastFailure; the
// caller reports it. Before the first good load there is nothing to
// re-check: the store adopts sc, and the next Load checks against it.
func (s *Store) Rebase(sc SchemaCheck) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rebase(sc)
}

// RebaseSources is Rebase with new extra sources (see SetSources), which
// replace the store's only if the rebase succeeds (or nothing serves yet).
func (s *Store) RebaseSources(sc SchemaCheck, srcs []Source) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	prev, _, had := s.extraSources()
	s.SetSources(srcs)
	err := s.rebase(sc)
	if err != nil {
		s.sourcesMu.Lock()
		s.sources = prev
		if !had {
			s.sources = nil
		}
		s.sourcesGen++
		s.sourcesMu.Unlock()
	}
	return err
}

// rebase: s.mu is held.
func (s *Store) rebase(sc SchemaCheck) error {
	adopt := func() {
		s.Schema, s.validator, s.Checker = sc.Schema, sc.Validator, sc.Checker
		// A failure cached for the old schema says nothing about the new one.
		s.failedErr = nil
	}
	cur := s.current.Load()
	if cur == nil {
		adopt()
		return nil
	}
	c := s.readStable(context.Background())
	if c.err != nil {
		return c.err
	}
	prev := SchemaCheck{Schema: s.Schema, Validator: s.validator, Checker: s.Checker}
	s.Schema, s.validator, s.Checker = sc.Schema, sc.Validator, sc.Checker
	ps, perFile, err := s.build(c.files)
	if err == nil {
		err = s.checkShrink(cur, ps)
	}
	if err != nil {
		s.Schema, s.validator, s.Checker = prev.Schema, prev.Validator, prev.Checker
		return err
	}
	adopt()
	s.swapIn(ps, perFile, c, ReloadResult{Time: time.Now(), Changed: true}, "policies re-checked against the new schema and loaded")
	return nil
}

// checkShrink refuses a set with no policies (unless AllowEmpty) and, with
// MaxPolicyLoss or KeepForbids, a reload that removes too many policies or
// any forbid, naming the ids that would disappear.
func (s *Store) checkShrink(cur, next *cedarlang.PolicySet) error {
	if _, _, objects := s.extraSources(); next.Len() == 0 && !s.AllowEmpty && !objects {
		return fmt.Errorf("no policies in %s: an empty set answers NoOpinion to every request; add policies (or pass --allow-empty-policy-set if this is intended)", strings.Join(s.paths, ", "))
	}
	if cur == nil || cur.Len() == 0 {
		return nil
	}
	var removed, forbids []string
	keptAs := keptPositions(cur, next)
	for i, p := range cur.Policies {
		var q *cedarlang.Policy
		ok := false
		if j := keptAs[i]; j >= 0 {
			// Kept: the same text, maybe moved. Without @id its id is its
			// position, so an insert above renames it; it is not removed.
			q, ok = next.Policies[j], true
		} else {
			q, ok = next.Get(p.ID)
		}
		enforcedForbid := p.Effect == types.Forbid && p.Enforcement == cedarlang.Enforce
		switch {
		case !ok:
			removed = append(removed, p.ID)
			if enforcedForbid {
				forbids = append(forbids, p.ID)
			}
		case enforcedForbid && (q.Effect != types.Forbid || q.Enforcement != cedarlang.Enforce):
			// A forbid switched to audit (or made a permit) no longer
			// denies: for --keep-forbids it is removed.
			forbids = append(forbids, p.ID+" (no longer an enforced forbid)")
		}
	}
	if len(removed) == 0 && len(forbids) == 0 {
		return nil
	}
	share := float64(len(removed)) / float64(cur.Len())
	if s.MaxPolicyLoss > 0 && s.MaxPolicyLoss < 1 && share > s.MaxPolicyLoss {
		s.logger.Warn("policy reload refused: it would remove too many policies", "removed", len(removed), "serving", cur.Len(), "max_policy_loss", s.MaxPolicyLoss, "ids", limitIDs(removed))
		return fmt.Errorf("the new policy set removes %d of the %d serving policies (%.0f%%), more than --max-policy-loss=%g allows; the last good set keeps serving (restart kcedar or raise --max-policy-loss if this is intended); removed: %s",
			len(removed), cur.Len(), 100*share, s.MaxPolicyLoss, strings.Join(limitIDs(removed), ", "))
	}
	if s.KeepForbids && len(forbids) > 0 {
		s.logger.Warn("policy reload refused: it would remove forbid policies", "ids", limitIDs(forbids))
		return fmt.Errorf("the new policy set removes %d forbid policies, refused by --keep-forbids; the last good set keeps serving (restart kcedar to remove them deliberately); removed: %s",
			len(forbids), strings.Join(limitIDs(forbids), ", "))
	}
	return nil
}

// keptPositions is, per policy of cur, its position in next when next was
// derived from cur and kept it (cedarlang.PolicySet.KeptFrom), else -1.
func keptPositions(cur, next *cedarlang.PolicySet) []int32 {
	out := make([]int32, len(cur.Policies))
	for i := range out {
		out[i] = -1
	}
	if oldOf, ok := next.KeptFrom(cur); ok {
		for j, i := range oldOf {
			if i >= 0 {
				out[i] = int32(j)
			}
		}
	}
	return out
}

// limitIDs keeps the first 50 ids, and says how many more there are.
func limitIDs(ids []string) []string {
	const max = 50
	if len(ids) <= max {
		return ids
	}
	return append(ids[:max:max], fmt.Sprintf("... %d more", len(ids)-max))
}

func (s *Store) report(r ReloadResult) {
	if s.OnReload != nil {
		s.OnReload(r)
	}
}

// Watch reloads when the files may have changed (file system events on
// them, their directories or a ConfigMap's "..data" link; internal/lib/watch)
// and every interval as the fallback, until ctx ends.
//
// While it watches, a file renamed into place is taken at once even when the
// rename fell in the same tick of the file system's clock as the file's last
// write (a watch.Renames witness; see readStable's rule 2).
func (s *Store) Watch(ctx context.Context, interval time.Duration) {
	s.witnessRenames(watch.NewRenames())
	defer s.witnessRenames(nil)
	watch.Run(ctx, s.paths, interval, s.logger, func() { _ = s.LoadContext(ctx) })
}

// witnessRenames makes r the store's rename witness, closing the one before,
// and has it watch the directories of the files there are now (a directory
// that appears later is watched from the first read that lists it).
func (s *Store) witnessRenames(r *watch.Renames) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.renames.Close()
	s.renames = r
	if names, _, err := s.list(); err == nil {
		s.watchDirs(names)
	}
}

type policyFile struct {
	name      string
	data      []byte
	namespace string // a Source's namespace: its policies are confined to it
	meta      fileMeta
}

// fileMeta is what a read saw of one file: the stat before and after
// reading (consistent when they agree) and the content's hash.
type fileMeta struct {
	stat       fileStat
	hash       [32]byte
	consistent bool // the file did not change while it was read
	snapshot   bool // read through a kubelet "..data" snapshot
	// arrived: the witness saw the file renamed into place before the read,
	// and nothing happened to it since (Store.renames).
	arrived bool
}

// candidate is one read of the policy source.
type candidate struct {
	files []policyFile
	meta  map[string]fileMeta
	fp    [32]byte // over names and contents; over the error for a failed read
	err   error
	// readAt: when the read began; sourcesGen: the extra sources' generation.
	readAt     time.Time
	sourcesGen uint64
	// witnessed: the rename witness's mark after the read (0 without one).
	witnessed uint64
}

func (s *Store) readCandidate() candidate {
	readAt := s.now()
	files, gen, err := s.read()
	c := candidate{files: files, err: err, readAt: readAt, sourcesGen: gen, witnessed: s.renames.Mark()}
	if err != nil {
		c.fp = sha256.Sum256([]byte("error\x00" + err.Error()))
		return c
	}
	c.fp = fingerprint(files)
	c.meta = make(map[string]fileMeta, len(files))
	for _, f := range files {
		c.meta[f.name] = f.meta
	}
	return c
}

// same: two reads saw the same files, unchanged in between.
func (c candidate) same(o candidate) bool {
	if (c.err == nil) != (o.err == nil) || c.fp != o.fp || len(c.meta) != len(o.meta) {
		return false
	}
	if c.err != nil {
		return c.err.Error() == o.err.Error()
	}
	for name, m := range c.meta {
		om, ok := o.meta[name]
		if !ok || !m.consistent || !om.consistent || m.stat != om.stat || m.hash != om.hash {
			return false
		}
	}
	return true
}

// readStable reads the policy source until the read is stable. The rule:
//
//  1. A read that equals the serving set (or the content of the latest failed
//     load) is taken at once: nothing new would be loaded.
//  2. A read is complete by construction, and taken at once, when every file
//     that is new or whose content differs from the serving set's either came
//     through a kubelet "..data" snapshot (kubelet writes a snapshot fully
//     before it swaps the link, and the read is redone if the link moved
//     during it) or was renamed (or linked) into place after its last write:
//     its change time is later than its modification time, which an atomic
//     rename gives and an in-place writer (open with O_TRUNC, write, write...)
//     never does, since every write sets both. A rename within the same tick
//     of the file system's clock as the last write (a few milliseconds)
//     leaves the two times equal; while the store watches (Watch), the
//     rename witness tells it apart (watch.Renames: inotify saw the name
//     arrive by a rename before the read began, and nothing happen to it
//     until after the read, and it is a regular file with one link).
//     A rename the witness saw land between the read's mark and its read
//     is counted by a read at the next settle step. Without the witness
//     (not watching, not Linux, events lost) such a rename takes rule 3.
//     No serving file may have disappeared outside a snapshot swap.
//  3. Otherwise the read is taken once the source has stood still for the
//     settle window after it: a second read, the window later, agrees with
//     it (the same file names, sizes, modification and change times, inodes
//     and contents, none of them changed while being read), and the files'
//     status, looked at every settle step meanwhile, never moved. A status
//     that moves is read again at once, and the window starts over from
//     that read: a file written in place loads about one window after its
//     last write, whatever was read of it while it was being written.
//
// After waiting 10 windows in all without a stable read, it gives up
// (errUnsettled) and the serving set stays; the next event or poll tries
// again. A writer that pauses longer than the settle window between two
// pieces of a file is indistinguishable from two edits: keep
// --policy-settle above such pauses.
//
// It stops, with ctx's error, when ctx ends while it waits.
func (s *Store) readStable(ctx context.Context) candidate {
	c := s.readCandidate()
	if s.Settle <= 0 {
		return c
	}
	step := settleStep(s.Settle)
	var quiet, waited time.Duration // since c was read; in all
	for {
		if quiet == 0 {
			if s.takenAtOnce(c) {
				return c
			}
			if waited >= settleWindows*s.Settle {
				return candidate{err: errUnsettled}
			}
		}
		d := min(step, s.Settle-quiet)
		s.sleep(d)
		if err := ctx.Err(); err != nil {
			return candidate{err: err}
		}
		quiet, waited = quiet+d, waited+d
		if quiet < s.Settle && c.err == nil && s.statusAsRead(c) {
			continue // nothing moved: no need to read yet
		}
		next := s.readCandidate()
		switch {
		case !next.same(c):
			c, quiet = next, 0
		case quiet >= s.Settle, s.takenAtOnce(next):
			return next // stood still for the window, or now vouched for by the witness
		}
	}
}

// settleWindows: readStable gives up after waiting this many settle windows.
const settleWindows = 10

// settleStep is how often readStable looks at the files' status while it
// waits: a tenth of the settle window, at most 50 ms (at least 1 ms, and
// never more than the window).
func settleStep(settle time.Duration) time.Duration {
	return min(settle, max(time.Millisecond, min(settle/10, 50*time.Millisecond)))
}

// takenAtOnce applies rules 1 and 2 of readStable to the read c.
func (s *Store) takenAtOnce(c candidate) bool {
	switch {
	case s.current.Load() != nil && c.err == nil && c.fp == s.fingerprint:
		return true
	case s.failedErr != nil && c.fp == s.failedFingerprint:
		return true
	}
	return c.err == nil && s.complete(c)
}

// statusAsRead: the source still looks as the read c saw it, without
// reading a file: the same extra sources, the same file names, each file's
// status (size, modification and change times, device and inode) as c saw
// it after reading it unchanged, no kubelet snapshot swapped since, and no
// file the read could not count as renamed into place that the rename
// witness now can (renamed in between the read's mark and its read). Every
// write moves a file's change time, so a file whose status stands still
// has not been written.
func (s *Store) statusAsRead(c candidate) bool {
	extra, gen, _ := s.extraSources()
	if gen != c.sourcesGen {
		return false
	}
	s.renames.Mark() // take in what the rename witness saw since
	listed, snapshots, err := s.list()
	if err != nil || len(listed)+len(extra) != len(c.files) {
		return false
	}
	for _, l := range listed {
		m, ok := c.meta[l.name]
		if !ok || !m.consistent || m.snapshot != l.snapshot {
			return false
		}
		st, err := statPath(l.path)
		if err != nil || st != m.stat || !st.changeTimes() {
			return false
		}
		if !m.arrived && s.renames.Arrived(l.path, c.witnessed) {
			// Renamed in after the read's mark and before it read the
			// file: a read now can count the rename.
			return false
		}
	}
	return stable(snapshots)
}

// complete applies rule 2 of readStable.
func (s *Store) complete(c candidate) bool {
	for name, m := range c.meta {
		if old, ok := s.serving[name]; ok && old.hash == m.hash {
			continue
		}
		if !m.consistent {
			return false
		}
		if m.snapshot || m.stat.renamed() || m.arrived {
			continue
		}
		return false
	}
	for name, old := range s.serving {
		if _, ok := c.meta[name]; !ok && !old.snapshot {
			return false
		}
	}
	return true
}

// read collects the policy files in a stable order. A directory is searched
// recursively for *.cedar files, skipping names that start with a dot. A
// directory that is a Kubernetes ConfigMap, Secret or projected volume (its
// files are symlinks into a "..data" symlink that kubelet swaps atomically) is
// read from the snapshot "..data" points to, so a reload never mixes files of
// two versions, and is read again if the snapshot changed during the read.
// Files keep their user-visible names (dir/team.cedar), so policy ids that
// default to file:line:col stay stable across updates.
func (s *Store) read() ([]policyFile, uint64, error) {
	extra, gen, haveExtra := s.extraSources()
	if len(s.paths) == 0 {
		if haveExtra {
			return extra, gen, nil
		}
		return nil, gen, errors.New("no policy paths given")
	}
	const attempts = 5
	for attempt := 1; ; attempt++ {
		files, snapshots, err := s.readOnce()
		if stable(snapshots) {
			if err == nil {
				files = append(files, extra...)
			}
			return files, gen, err
		}
		if attempt == attempts {
			return nil, gen, errors.New("the policy directories kept changing while being read; will retry")
		}
	}
}

// unchanged is the read of a poll that finds nothing changed, without
// reading the files: the same file names, each file's status (size,
// modification and change times, device and inode) as the serving read saw
// it, with both times at least a second before that read began (a write
// after it moves them: the "racy clean" rule), and the same extra sources.
// ok is false whenever that cannot be shown (then the files are read). A
// large set is not read, hashed and dropped every --reload-interval.
func (s *Store) unchanged() (c candidate, ok bool) {
	if s.current.Load() == nil || s.serving == nil || len(s.paths) == 0 {
		return c, false
	}
	extra, gen, _ := s.extraSources()
	if gen != s.servingSources {
		return c, false
	}
	listed, snapshots, err := s.list()
	if err != nil || len(listed)+len(extra) != len(s.serving) {
		return c, false
	}
	limit := s.servingRead.Add(-time.Second).UnixNano()
	seen := make(map[string]bool, len(listed))
	for _, l := range listed {
		m, served := s.serving[l.name]
		if !served || seen[l.name] || !m.consistent {
			return c, false
		}
		seen[l.name] = true
		st, err := statPath(l.path)
		if err != nil || st != m.stat || !st.changeTimes() || st.mtime >= limit || st.ctime >= limit {
			return c, false
		}
	}
	if !stable(snapshots) {
		return c, false
	}
	return candidate{meta: s.serving, fp: s.fingerprint, readAt: s.servingRead, sourcesGen: gen}, true
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

// inSnapshot: path resolves into a kubelet snapshot directory ("..<timestamp>").
func inSnapshot(path string) bool {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return false
	}
	for _, part := range strings.Split(filepath.Dir(real), string(filepath.Separator)) {
		if strings.HasPrefix(part, "..") && part != ".." {
			return true
		}
	}
	return false
}

// listed is one policy file a read will take: its user-visible name, the
// path to open, and whether it is in a kubelet snapshot.
type listed struct {
	name, path string
	snapshot   bool
}

func (s *Store) readOnce() ([]policyFile, []snapshot, error) {
	s.fileReads.Add(1)
	mark := s.renames.Mark()
	if s.afterMark != nil {
		s.afterMark()
	}
	names, snapshots, err := s.list()
	if err != nil {
		return nil, snapshots, err
	}
	files := make([]policyFile, 0, len(names))
	var read []int // the files read (not kept from the serving set), by index
	for _, n := range names {
		if f, ok := s.servingFile(n); ok {
			files = append(files, f)
			continue
		}
		f, err := readLimited(n.path, n.name)
		if err != nil {
			return nil, snapshots, err
		}
		f.meta.snapshot = n.snapshot
		read = append(read, len(files))
		files = append(files, f)
	}
	s.witnessed(names, files, read, mark)
	return files, snapshots, nil
}

// witnessed marks the files read (at indexes read) that the rename witness
// saw arrive by a rename before the read began (mark) and untouched until
// after it, each a regular file with one link: complete by construction.
// It watches, from now on, the directory of every file listed.
func (s *Store) witnessed(names []listed, files []policyFile, read []int, mark uint64) {
	if s.renames == nil {
		return
	}
	s.renames.Mark() // take in what happened during the reads
	for _, i := range read {
		n, m := names[i], &files[i].meta
		m.arrived = !n.snapshot && m.consistent && s.renames.Arrived(n.path, mark) && soleLink(n.path, m.stat)
	}
	s.watchDirs(names)
}

// watchDirs has the rename witness watch the directory of each file listed
// (outside kubelet snapshots, which need no witness).
func (s *Store) watchDirs(names []listed) {
	if s.renames == nil {
		return
	}
	for _, n := range names {
		if !n.snapshot {
			s.renames.Watch(filepath.Dir(n.path))
		}
	}
}

// list finds the policy files of the paths, in read order.
func (s *Store) list() ([]listed, []snapshot, error) {
	var out []listed
	var snapshots []snapshot
	for _, root := range s.paths {
		info, err := os.Stat(root)
		if err != nil {
			return nil, snapshots, err
		}
		if !info.IsDir() {
			out = append(out, listed{name: root, path: root, snapshot: inSnapshot(root)})
			continue
		}
		// The root may itself be a symlink (filepath.WalkDir would not enter it).
		real, err := filepath.EvalSymlinks(root)
		if err != nil {
			return nil, snapshots, err
		}
		var names []listed
		var walk func(dir, display string, inSnap bool) error
		walk = func(dir, display string, inSnap bool) error {
			// A kubelet atomic-writer volume: read the snapshot instead.
			// kubelet's snapshots are siblings named "..<timestamp>"; any
			// other target (which could lead back up the tree) is ignored.
			dataLink := filepath.Join(dir, "..data")
			if target, err := os.Readlink(dataLink); err == nil && strings.HasPrefix(target, "..") && target != ".." && !strings.ContainsRune(target, filepath.Separator) {
				snapshots = append(snapshots, snapshot{link: dataLink, target: target})
				dir = filepath.Join(dir, target)
				inSnap = true
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
					if err := walk(path, disp, inSnap); err != nil {
						return err
					}
				case strings.HasSuffix(name, ".cedar"):
					// Regular files and symlinks to files; symlinked
					// directories are not followed.
					names = append(names, listed{name: disp, path: path, snapshot: inSnap})
				}
			}
			return nil
		}
		if err := walk(real, root, false); err != nil {
			return nil, snapshots, err
		}
		sort.Slice(names, func(i, j int) bool { return names[i].name < names[j].name })
		out = append(out, names...)
	}
	return out, snapshots, nil
}

// readLimited reads the file at path, calling it name, with the file's
// status before and after the read.
func readLimited(path, name string) (policyFile, error) {
	f, err := os.Open(path)
	if err != nil {
		if name != path {
			return policyFile{}, fmt.Errorf("%s: %w", name, err)
		}
		return policyFile{}, err
	}
	defer f.Close()
	before, errBefore := statOf(f)
	data, err := readAllSized(f, before.size, errBefore == nil)
	if err != nil {
		return policyFile{}, fmt.Errorf("%s: %w", name, err)
	}
	if len(data) > cedarlang.MaxPolicyFileBytes {
		return policyFile{}, fmt.Errorf("%s: larger than %d bytes", name, cedarlang.MaxPolicyFileBytes)
	}
	after, errAfter := statOf(f)
	meta := fileMeta{stat: after, hash: sha256.Sum256(data),
		consistent: errBefore == nil && errAfter == nil && before == after && after.size == int64(len(data))}
	return policyFile{name: name, data: data, meta: meta}, nil
}

// fingerprint hashes the files' names and contents (each content by its
// hash, which the read computed).
func fingerprint(files []policyFile) [32]byte {
	h := sha256.New()
	for _, f := range files {
		fmt.Fprintf(h, "%d:%s\x00%d:%s\x00%d:", len(f.name), f.name, len(f.namespace), f.namespace, len(f.data))
		h.Write(f.meta.hash[:])
	}
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out
}

// build parses and checks files and builds their set from scratch; perFile
// is the policies of each file (nil if not known).
func (s *Store) build(files []policyFile) (*cedarlang.PolicySet, [][]*cedarlang.Policy, error) {
	var all []*cedarlang.Policy
	var errs []error
	var plainPer [][]*cedarlang.Policy
	rest := files
	if s.Checker != nil {
		// The files are checked as `kcedar validate` checks them (cedar/lint,
		// which parses in parallel too); namespaced sources are parsed,
		// confined and validated below.
		var plain []cedarlang.SourceFile
		rest = nil
		for _, f := range files {
			if f.namespace == "" {
				plain = append(plain, cedarlang.SourceFile{Name: f.name, Data: f.data})
			} else {
				rest = append(rest, f)
			}
		}
		if len(plain) > 0 {
			var findings []error
			all, findings = s.Checker.CheckFiles(plain)
			errs = append(errs, findings...)
			plainPer = perFileOf(plain, all)
		}
	}
	// Files are parsed in parallel (a large set spans many files).
	parsed := make([][]*cedarlang.Policy, len(rest))
	perr := make([]error, len(rest))
	parallel.For(len(rest), func(i int) { parsed[i], perr[i] = parseFile(rest[i]) })
	var parsedAll []*cedarlang.Policy
	for i := range rest {
		if perr[i] != nil {
			errs = append(errs, perr[i])
			continue
		}
		parsedAll = append(parsedAll, parsed[i]...)
	}
	if len(errs) == 0 && s.validator != nil {
		errs = append(errs, s.validator.Validate(parsedAll)...)
	}
	if len(errs) > 0 {
		if s.Checker != nil {
			return nil, nil, &LoadError{Findings: errs}
		}
		return nil, nil, errors.Join(errs...)
	}
	ps, err := cedarlang.NewPolicySet(append(all, parsedAll...))
	if err != nil {
		return nil, nil, err
	}
	return ps, mergePerFile(files, plainPer, parsed, s.Checker != nil), nil
}
