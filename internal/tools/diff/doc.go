// Package diff finds the effect of a policy change on access: every region
// of requests whose decision changes between two policy sets, with an
// example each (kcedar diff).
//
// Only the policies that differ can change a decision, so requests are
// enumerated where they reach, as a tree: the resource type, the verb, the
// user, the namespace (or a non-resource URL's path), the name, then at
// each leaf the groups and the namespace-label worlds (enumerate.go). Each
// level's representatives are one per class of values the policies that
// may still match there cannot tell apart (their literals, strings
// matching and missing their like patterns, fresh and open values,
// subsets of the groups they name), and a branch where no differing
// policy may match is not followed: both sets decide it alike. At an open
// namespace, the groups of permits pinned to a namespace no differing
// policy names are left out: they add the same condition to both sides
// and cannot change whether the sides differ (run.onlyAddsConditions). A
// request for every verb is decided where a policy of every verb may
// change it (forEveryVerb).
//
// The leaves are decided by the engine of each set, on every core, each
// set once per subset of the groups it names and not at all where its
// decision is plain (decide.go). The differing cells are merged into
// regions from the leaves up (merge.go), a list holding every value of
// its level becoming "any" and subjects holding every principal (or every
// one of a kind) becoming anyone (or every one of the kind). Where a
// region lies is decided by walking the same tree (Result.Locate). What
// the method cannot enumerate exactly it names (Result.Inexact).
package diff
