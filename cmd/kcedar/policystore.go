package main

import (
	"log/slog"

	"github.com/kcedar/kcedar/cedar"
	"github.com/kcedar/kcedar/cedar/lint"
	"github.com/kcedar/kcedar/schemagen"
)

// newPolicyStore is serve's policy store: it checks the files with the same
// engine as `kcedar validate` (cedar/lint), so a bad policy is reported with
// the same positions, wording and hints: one log record per finding, and a
// summary in /readyz. validator checks what the checker does not see: the
// namespaced policy objects (cedar.Store.build).
func newPolicyStore(schema *schemagen.Schema, paths []string, validator cedar.Validator, logger *slog.Logger) (*cedar.Store, error) {
	checker, err := lint.NewChecker(schema)
	if err != nil {
		return nil, err
	}
	store := cedar.NewStore(paths, validator, logger)
	store.Checker = checker
	store.Schema = schema
	return store, nil
}
