package policies_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/store"
	"github.com/kcedar/kcedar/internal/testing/embeddedschema"
	"github.com/kcedar/kcedar/internal/testing/testgen"
)

// Every example policy file validates against the embedded schema.
func TestExamplesValidate(t *testing.T) {
	s := embeddedschema.Schema(t)
	v, err := cedarlang.NewSchemaValidator(s)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(path, ".cedar") {
			files = append(files, path)
		}
		return nil
	})
	if len(files) == 0 {
		t.Fatal("no example policies found")
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		ps, err := cedarlang.ParsePolicies(f, src)
		if err != nil {
			t.Fatal(err)
		}
		if errs := v.Validate(ps); len(errs) > 0 {
			t.Errorf("%s: %v", f, errs)
		}
	}
	// The generated RBAC-like sets used by benchmarks validate too.
	ps, err := cedarlang.ParsePolicies("rbac-like", []byte(testgen.RBACLike(300)))
	if err != nil {
		t.Fatal(err)
	}
	if errs := v.Validate(ps); len(errs) > 0 {
		t.Errorf("RBACLike: %v", errs[0])
	}
}

func TestQuickstartDecisions(t *testing.T) {
	s := embeddedschema.Schema(t)
	store := store.NewStore([]string{"quickstart"}, nil, nil)
	if err := store.Load(); err != nil {
		t.Fatal(err)
	}
	az := engine.NewEngine(s, store.Current(), engine.EngineOptions{})
	req := func(user string, groups []string, verb, resource, ns, name string) *entities.Request {
		return &entities.Request{User: entities.UserInfo{Name: user, Groups: groups}, Verb: verb, ResourceRequest: true, Resource: resource, Namespace: ns, Name: name}
	}
	cases := []struct {
		req  *entities.Request
		want engine.DecisionType
	}{
		{req("jane", []string{"dev"}, "list", "pods", "dev", ""), engine.DecisionAllow},
		{req("jane", []string{"dev"}, "list", "pods", "", ""), engine.DecisionNoOpinion},
		{req("jane", []string{"dev"}, "delete", "pods", "dev", "p"), engine.DecisionNoOpinion},
		{req("carl", []string{"contractors"}, "get", "secrets", "dev", "s"), engine.DecisionDeny},
		{req("carl", []string{"contractors", "dev"}, "list", "secrets", "", ""), engine.DecisionDeny},
		{req("system:node:n1", []string{"system:nodes"}, "get", "nodes", "", "n1"), engine.DecisionAllow},
		{req("system:node:n1", nil, "get", "nodes", "", "n1"), engine.DecisionNoOpinion}, // not a node without system:nodes
		{req("system:node:n1", []string{"system:nodes"}, "get", "nodes", "", "n2"), engine.DecisionNoOpinion},
	}
	for _, c := range cases {
		if got := az.Authorize(context.Background(), c.req).FailureDecision().Type(); got != c.want {
			t.Errorf("%s: %v, want %v", c.req, got, c.want)
		}
	}
}
