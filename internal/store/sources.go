package store

import (
	"crypto/sha256"
	"strings"

	"github.com/kcedar/kcedar/internal/cedarlang"
)

// Source is policy text that does not come from a file, such as a policy
// object in the API server. Its policies are parsed, validated and swapped in
// with the files', as one set.
type Source struct {
	// Name stands for a file name in positions and default policy ids
	// (e.g. "CedarPolicy/team-a"), so diagnostics point at the object.
	Name string
	Data []byte
	// Namespace, when set, confines the source's policies to requests in
	// that namespace (ConfineToNamespace): only permits are accepted, and
	// @id values are prefixed with Name + "/".
	Namespace string
	// Hash, when not zero, is the SHA-256 of Data, which the caller already
	// computed (so offering thousands of unchanged sources does not hash
	// them all again). It must be the hash of Data: it decides whether the
	// source changed.
	Hash [32]byte
}

// SetSources replaces the store's extra sources; they take effect with the
// next Load. Once SetSources has been called (even with none), a store
// without policy paths loads the sources alone.
func (s *Store) SetSources(srcs []Source) {
	files := make([]policyFile, 0, len(srcs))
	for _, src := range srcs {
		// An object's text is a complete snapshot: it needs no settle window.
		hash := src.Hash
		if hash == ([32]byte{}) {
			hash = sha256.Sum256(src.Data)
		}
		meta := fileMeta{hash: hash, consistent: true, snapshot: true}
		files = append(files, policyFile{name: src.Name, data: src.Data, namespace: src.Namespace, meta: meta})
	}
	s.sourcesMu.Lock()
	s.sources = files
	s.sourcesGen++
	s.sourcesMu.Unlock()
}

// extraSources is the sources set by SetSources, and whether it was called.
func (s *Store) extraSources() (files []policyFile, generation uint64, set bool) {
	s.sourcesMu.Lock()
	defer s.sourcesMu.Unlock()
	return s.sources, s.sourcesGen, s.sources != nil
}

// parseFile parses one policy file or source, confining a namespaced
// source's policies to its namespace.
func parseFile(f policyFile) ([]*cedarlang.Policy, error) {
	ps, err := cedarlang.ParsePolicies(f.name, f.data)
	if err != nil || f.namespace == "" {
		return ps, err
	}
	return cedarlang.ConfineToNamespace(ps, f.namespace, strings.TrimSuffix(f.name, "/")+"/")
}
