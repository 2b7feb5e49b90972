// Package framework runs real etcd + kube-apiserver processes for kcedar's
// end-to-end tests, and the kcedar binary under test next to them.
//
// It is an ordinary package (vetted and compiled by `go vet ./...`), but only
// the e2e tests import it, and those carry `//go:build e2e`, so `go test ./...`
// never starts a cluster. Run them with `make e2e`, which first builds and
// caches the binaries with hack/kube-binaries.sh.
//
// Binaries: $ETCD_BIN and $KUBE_APISERVER_BIN when set, else the cache layout
// of hack/kube-binaries.sh:
//
//	$KUBE_E2E_CACHE/etcd/$ETCD_VERSION/etcd                     (default v3.7.3)
//	$KUBE_E2E_CACHE/kube-apiserver/$KUBE_VERSION/kube-apiserver (default v1.37.1)
//
// with KUBE_E2E_CACHE defaulting to ${XDG_CACHE_HOME:-$HOME/.cache}/kube-e2e.
// The tests never build them: a missing binary fails the test with a pointer
// to `make e2e` / hack/kube-binaries.sh.
//
// A cluster is one etcd (--unsafe-no-fsync) and one kube-apiserver on free
// loopback ports, with a static token file (an admin token in system:masters
// plus Options.Tokens), self-signed serving certificates (--cert-dir), RSA
// service-account keys, --service-cluster-ip-range=10.0.0.0/24 and
// --endpoint-reconciler-type=none. There is no controller-manager, scheduler
// or kubelet: nothing creates ServiceAccounts, so the ServiceAccount admission
// plugin (left enabled) rejects Pods in a namespace without a "default"
// ServiceAccount; use Cluster.EnsureNamespace / Cluster.EnsureServiceAccount.
// Pods are never scheduled or run.
//
// Without Options.AuthorizationConfig the apiserver runs with
// --authorization-mode=RBAC. Members of system:masters (the admin token) are
// always allowed, whatever the authorization configuration says.
//
// Every process runs in its own process group and gets SIGKILL when the test
// binary dies (Linux Pdeathsig), so a crashed or timed-out `go test` leaves no
// apiserver behind; normal cleanup (t.Cleanup, also after a panic) sends
// SIGTERM and, after a grace period, SIGKILL to the group.
//
// Environment knobs: KUBE_E2E_TIMEOUT (seconds to wait for /readyz, default
// 90), KCEDAR_BIN (a prebuilt kcedar binary for KcedarBinary), TMPDIR.
package framework
