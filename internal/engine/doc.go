// Package engine is the decision engine, the one place where a decision is
// made: it picks candidates, evaluates them, classifies each result and
// combines the results. It decides requests whose values are partly unknown: it
// partially evaluates the policies and leaves what remains (residuals) in the
// decision; package conditions turns those into integrity-protected
// conditions and evaluates them against the admission data when the API
// server calls back. It also answers the access reviews (who-can, what-can)
// and explains decisions.
package engine
