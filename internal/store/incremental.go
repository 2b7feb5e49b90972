package store

import (
	"bytes"
	"io"
	"time"
	"unicode/utf8"

	"github.com/kcedar/kcedar/internal/cedarlang"
)

// builtFile is one file (or source) of the set serving: its text and the
// policies it gave, in order.
type builtFile struct {
	name, namespace string
	data            []byte
	hash            [32]byte
	policies        []*cedarlang.Policy
}

// builtSet is what the serving set was built from, file by file, so the
// next load re-parses and re-validates only what changed (buildDelta).
type builtSet struct {
	files  map[string]*builtFile // by fileKey
	byHash map[[32]byte]*builtFile
}

func fileKey(name, namespace string) string { return name + "\x00" + namespace }

// newBuiltSet records files and the policies each gave (perFile[i] from
// files[i]); nil when they are not known.
func newBuiltSet(files []policyFile, perFile [][]*cedarlang.Policy) *builtSet {
	if perFile == nil {
		return nil
	}
	b := &builtSet{files: make(map[string]*builtFile, len(files)), byHash: make(map[[32]byte]*builtFile, len(files))}
	for i, f := range files {
		bf := &builtFile{name: f.name, namespace: f.namespace, data: f.data, hash: f.meta.hash, policies: perFile[i]}
		b.files[fileKey(f.name, f.namespace)] = bf
		if f.namespace == "" {
			b.byHash[f.meta.hash] = bf
		}
	}
	return b
}

// buildDelta builds the set of files from the serving set cur (built from
// prev) by the change alone: an unchanged file keeps its policies; a
// changed or renamed file is re-parsed policy by policy
// (cedarlang.Reparse: an unchanged policy text is not parsed again, even
// where it moved); only the policies parsed anew are validated; the index
// reuses every kept policy's extracted keys (cedarlang.NewPolicySetFrom).
// ok is false whenever the change fails anywhere (a file that does not
// parse, a policy that does not validate, a duplicate id) or cannot be
// built this way: the full build then decides, and reports exactly what a
// first load would. The set it builds is the one the full build would
// (TestEveryWayOfWritingLoadsByTheChange; internal/engine's
// TestIncrementalReloadDecidesAsAFreshLoad).
func (s *Store) buildDelta(prev *builtSet, cur *cedarlang.PolicySet, files []policyFile) (ps *cedarlang.PolicySet, perFile [][]*cedarlang.Policy, ok bool) {
	if prev == nil || cur == nil || (s.Checker != nil && s.validator == nil) {
		return nil, nil, false
	}
	perFile = make([][]*cedarlang.Policy, len(files))
	var fresh []*cedarlang.Policy
	for i, f := range files {
		old := prev.files[fileKey(f.name, f.namespace)]
		if old != nil && old.hash == f.meta.hash {
			perFile[i] = old.policies
			continue
		}
		got, parsed, ok := s.reparseFile(prev, old, f)
		if !ok {
			return nil, nil, false
		}
		perFile[i], fresh = got, append(fresh, parsed...)
	}
	if s.validator != nil && len(s.validator.Validate(fresh)) > 0 {
		return nil, nil, false
	}
	ps, err := cedarlang.NewPolicySetFrom(cur, s.setOrder(files, perFile))
	if err != nil {
		return nil, nil, false
	}
	return ps, perFile, true
}

// reparseFile parses the changed file f, whose previous version (if any)
// is old: its policies, and those parsed anew.
func (s *Store) reparseFile(prev *builtSet, old *builtFile, f policyFile) (policies, fresh []*cedarlang.Policy, ok bool) {
	if f.namespace != "" {
		ps, err := parseFile(f) // an object: small, and confined as a whole
		return ps, ps, err == nil
	}
	if s.Checker != nil && !plainText(f.data) {
		return nil, nil, false // the Checker's text check reports it
	}
	if old == nil || old.namespace != "" {
		old = prev.byHash[f.meta.hash] // renamed, or copied
	}
	var err error
	if old == nil {
		policies, err = cedarlang.ParsePolicies(f.name, f.data)
		fresh = policies
	} else {
		policies, fresh, err = cedarlang.Reparse(f.name, f.data, old.name, old.data, old.policies)
	}
	return policies, fresh, err == nil
}

// setOrder is the set's policies in the full build's order: with a
// Checker, the files' before the namespaced sources'; else file by file.
func (s *Store) setOrder(files []policyFile, perFile [][]*cedarlang.Policy) []*cedarlang.Policy {
	n := 0
	for _, ps := range perFile {
		n += len(ps)
	}
	out := make([]*cedarlang.Policy, 0, n)
	for pass := range 2 {
		for i, f := range files {
			plain := f.namespace == ""
			if s.Checker == nil && pass == 0 || s.Checker != nil && plain == (pass == 0) {
				out = append(out, perFile[i]...)
			}
		}
	}
	return out
}

// plainText: data is UTF-8 text without control characters other than
// tab, newline and carriage return, and without U+FFFD (what the
// Checker's text check accepts, or less).
func plainText(data []byte) bool {
	if !utf8.Valid(data) || bytes.Contains(data, []byte("\uFFFD")) {
		return false
	}
	for _, c := range data {
		if c < 0x20 && c != '\n' && c != '\r' && c != '\t' {
			return false
		}
	}
	return true
}

// perFileOf splits all, the policies a Checker returned for the files
// plain in order, by file (policies carry their file's name); nil if they
// do not line up.
func perFileOf(plain []cedarlang.SourceFile, all []*cedarlang.Policy) [][]*cedarlang.Policy {
	out := make([][]*cedarlang.Policy, len(plain))
	j := 0
	for i, f := range plain {
		start := j
		for j < len(all) && all[j].AST.Position.Filename == f.Name {
			j++
		}
		out[i] = all[start:j:j]
	}
	if j != len(all) {
		return nil
	}
	return out
}

// mergePerFile is the policies of each of files: with a Checker, those of
// the plain files from plainPer and those of the namespaced sources from
// parsed, each in order; without, parsed's. nil if not known.
func mergePerFile(files []policyFile, plainPer, parsed [][]*cedarlang.Policy, checker bool) [][]*cedarlang.Policy {
	if !checker {
		return parsed
	}
	out := make([][]*cedarlang.Policy, len(files))
	pi, ri := 0, 0
	for i, f := range files {
		if f.namespace != "" {
			out[i], ri = parsed[ri], ri+1
			continue
		}
		if pi >= len(plainPer) {
			return nil
		}
		out[i], pi = plainPer[pi], pi+1
	}
	return out
}

// buildFrom builds the set of files: by the change from the serving set
// cur where it can (buildDelta), else from scratch (build).
func (s *Store) buildFrom(cur *cedarlang.PolicySet, files []policyFile) (ps *cedarlang.PolicySet, perFile [][]*cedarlang.Policy, incremental bool, err error) {
	if ps, perFile, ok := s.buildDelta(s.built, cur, files); ok {
		return ps, perFile, true, nil
	}
	ps, perFile, err = s.build(files)
	return ps, perFile, false, err
}

// readAllSized reads f (at most MaxPolicyFileBytes+1 bytes) into a buffer
// of the size its status gave (when known), so a large file is not copied
// through ever larger buffers; a file that grew meanwhile is read whole all
// the same.
func readAllSized(f io.Reader, size int64, known bool) ([]byte, error) {
	r := io.LimitReader(f, cedarlang.MaxPolicyFileBytes+1)
	if !known || size <= 0 || size > cedarlang.MaxPolicyFileBytes {
		return io.ReadAll(r)
	}
	buf := make([]byte, size+1)
	n, err := io.ReadFull(r, buf)
	switch {
	case err == io.ErrUnexpectedEOF || err == io.EOF:
		return buf[:n], nil
	case err != nil:
		return nil, err
	}
	rest, err := io.ReadAll(r) // it grew since
	return append(buf, rest...), err
}

// servingFile is the file n as the serving set's read left it, without
// reading it again, when its status shows it unchanged by the rule of
// unchanged (the same size, times, device and inode, both times at least
// a second before that read began): a change to one file of many reads
// that one file.
func (s *Store) servingFile(n listed) (policyFile, bool) {
	m, served := s.serving[n.name]
	if !served || !m.consistent || m.snapshot != n.snapshot || s.built == nil {
		return policyFile{}, false
	}
	b := s.built.files[fileKey(n.name, "")]
	if b == nil || b.hash != m.hash {
		return policyFile{}, false
	}
	st, err := statPath(n.path)
	limit := s.servingRead.Add(-time.Second).UnixNano()
	if err != nil || st != m.stat || !st.changeTimes() || st.mtime >= limit || st.ctime >= limit {
		return policyFile{}, false
	}
	return policyFile{name: n.name, data: b.data, meta: m}, true
}
