package kube138

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	authzconfig "k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/kcedar/kcedar/cedar"
	"github.com/kcedar/kcedar/schemagen"
)

// kcedar's in-process authorizer is a Kubernetes 1.38 authorizer:
// conditions-aware (ConditionsAwareAuthorize, EvaluateConditions) as
// k8s.io/apiserver v0.38.0-beta.0 defines it.
var _ authorizer.Authorizer = (*cedar.Authorizer)(nil)

// TestInProcessAuthorizerInUnion puts the in-process cedar.Authorizer where
// the webhook was, in k8s.io/apiserver 1.38's union behind the
// conditions-aware filter and the conditions enforcer, and replays the KEP
// test files through it: each case must decide as `kcedar authorize` does
// and as the file expects.
func TestInProcessAuthorizerInUnion(t *testing.T) {
	enableConditionalAuthorization(t)
	for _, file := range []string{filepath.Join(repoRoot, "policies/library/kep5681/kep5681_test.yaml"), "testdata/kep/kep_test.yaml"} {
		t.Run(filepath.Base(file), func(t *testing.T) {
			tf, paths := readTestFile(t, file)
			replayCases(t, newInProcessHarness(t, paths), file, tf)
		})
	}
}

// newInProcessHarness is a harness whose kcedar is cedar.New on the
// policies at paths, in the union kube-apiserver builds from kcedar
// manifests' configuration (Node, kcedar, RBAC).
func newInProcessHarness(t *testing.T, paths []string) *harness {
	t.Helper()
	schema, err := schemagen.Default()
	if err != nil {
		t.Fatal(err)
	}
	kc, err := cedar.New(cedar.StaticPolicies(policyFiles(t, paths)...), schema, cedar.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := &authzconfig.AuthorizationConfiguration{Authorizers: []authzconfig.AuthorizerConfiguration{
		{Type: "Node", Name: "node"}, {Type: "Webhook", Name: kcedarWebhookName}, {Type: "RBAC", Name: "rbac"}}}
	h := &harness{webhook: kc, wire: &wireLog{}, oracle: newOracle(t, paths), stats: map[string]int{}, inProcess: true}
	h.union = unionOf(t, cfg, kcedarWebhookName, kc)
	h.enforcer = newConditionsEnforcer(t)
	return h
}

// policyFiles reads the *.cedar files of paths (files, or directories
// searched recursively).
func policyFiles(t *testing.T, paths []string) []cedar.PolicyFile {
	t.Helper()
	var out []cedar.PolicyFile
	for _, p := range paths {
		err := filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".cedar") {
				return err
			}
			text, err := os.ReadFile(path)
			out = append(out, cedar.PolicyFile{Name: path, Text: text})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}
