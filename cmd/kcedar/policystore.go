package main

import (
	"log/slog"

	"github.com/kcedar/kcedar/internal/cedarlang/lint"
	"github.com/kcedar/kcedar/internal/store"
)

// newPolicyStore is serve's policy store: it checks the files with the same
// engine as `kcedar validate` (cedar/lint), so a bad policy is reported with
// the same positions, wording and hints: one log record per finding, and a
// summary in /readyz. The checker's validator checks what the checker does
// not see: the namespaced policy objects (store.Store.build).
func newPolicyStore(checker *lint.Checker, paths []string, logger *slog.Logger) *store.Store {
	store := store.NewStore(paths, checker.Validator(), logger)
	store.Checker = checker
	store.Schema = checker.Schema
	return store
}
