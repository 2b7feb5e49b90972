// Package engine is the decision engine, the one place where a decision is
// made: it picks candidates, evaluates them, classifies each result and
// combines the results. It decides requests whose values are partly unknown: it
// partially evaluates the policies, turns what remains (residuals) into
// integrity-protected conditions, and evaluates those conditions against the
// admission data when the API server calls back.
package engine
