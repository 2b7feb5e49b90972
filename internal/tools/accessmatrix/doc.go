// Package accessmatrix draws who can do what: subjects × resources × verbs
// for a namespace or the whole cluster, built from the same access reviews
// as kcedar who-can (one ResourceAccessReview per resource and verb). Each
// cell holds the who-can entries of its subject for that resource and verb,
// allowed, conditional and forbidden, with their conditions and policy ids,
// and a summary state; Write prints it as a terminal table, and WriteHTML
// as a self-contained page with filters.
package accessmatrix
