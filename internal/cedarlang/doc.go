// Package cedar is kcedar's policy engine: it loads, validates and indexes Cedar
// policy sets (with atomic hot reload), builds the Cedar entities of a Kubernetes
// request and its objects, and decides fully known requests.
package cedarlang
