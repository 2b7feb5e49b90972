// Package store holds the policy sources: policy files and directories
// (settled reads, stat-only polls, atomic reload) and composed sources such
// as policy objects, each load checked against the schema. A load that fails
// keeps the last good set serving and is reported (LastError, OnReload).
package store
