// Package entities maps Kubernetes requests and objects onto Cedar data: a
// SubjectAccessReview as a Request, its principal and groups as entities,
// where the request lands in the schema (Target, open attributes, verbs),
// the request context, objects as typed Cedar values, namespace objects and
// label selectors. It supplies data; it decides nothing.
package entities
