// Package diff finds the effect of a policy change on access: every region
// of requests whose decision changes between two policy sets, with an
// example each (kcedar diff). Only the policies that differ can change a
// decision, so requests are enumerated where they reach, one
// representative per class of values the policies cannot tell apart (their
// literals, strings matching and missing their like patterns, fresh and
// open values, subsets of the groups they name), and decided with both
// sets by the engine. At an open namespace, the groups of permits pinned to
// a namespace no differing policy names are left out: they add the same
// condition to both sides and cannot change whether the sides differ
// (run.onlyAddsConditions). What it cannot enumerate exactly it names
// (Result.Inexact).
package diff
