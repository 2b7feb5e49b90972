// Package testgen generates synthetic workloads for kcedar's tests,
// benchmarks and the load test (test/load) only: policy sets shaped like RBAC
// (RBACLike), seeded RBAC configurations (RBACConfig) and the
// SubjectAccessReviews that exercise them (SubjectAccessReviews), and a
// reference RBAC authorizer to decide them with (RBACObjects.Allows). Nothing in
// a production binary imports it.
package testgen
