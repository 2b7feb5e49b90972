// Package accessreview holds the access reviews' wire shapes and answers
// them with the engine: who can make a request (ResourceAccessReview, from
// the "Enhance Pluggable Policy" design) and what a principal can do (a
// SelfSubjectRulesReview for any subject). The server serves them over
// HTTPS; kcedar who-can and can-i --list answer them offline.
package accessreview
