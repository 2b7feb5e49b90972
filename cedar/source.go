package cedar

import (
	"errors"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/cedarlang/lint"
	"github.com/kcedar/kcedar/internal/engine"
	gen "github.com/kcedar/kcedar/internal/schemagen"
)

// PolicySource is where an Authorizer's policies come from: StaticPolicies,
// a fixed set, or a FileSource, which reloads. Only this package implements
// it.
type PolicySource interface {
	// policies is the source's sets as the engine reads them, checked
	// against schema where the source holds them fixed.
	policies(schema *gen.Schema) (engine.PolicySource, error)
	// follow has the source call moved after each set it loads (the
	// Authorizer moves to it at once); a fixed source never calls it.
	follow(moved func())
}

// PolicyFile is one file of Cedar policies: its name (for messages) and
// text.
type PolicyFile struct {
	Name string
	Text []byte
}

// StaticPolicies is the fixed set of policies in files:
//
//	authz, err := cedar.New(cedar.StaticPolicies(cedar.PolicyFile{Name: "team.cedar", Text: text}), schema, cedar.Options{})
//
// New validates them; it refuses an invalid policy with an error naming
// its file and position.
func StaticPolicies(files ...PolicyFile) PolicySource { return staticPolicies(files) }

type staticPolicies []PolicyFile

func (files staticPolicies) policies(schema *gen.Schema) (engine.PolicySource, error) {
	checker, err := lint.NewChecker(schema)
	if err != nil {
		return nil, err
	}
	src := make([]cedarlang.SourceFile, len(files))
	for i, f := range files {
		src[i] = cedarlang.SourceFile{Name: f.Name, Data: f.Text}
	}
	policies, findings := checker.CheckFiles(src)
	if len(findings) > 0 {
		return nil, errors.Join(findings...)
	}
	set, err := cedarlang.NewPolicySet(policies)
	if err != nil {
		return nil, err
	}
	return engine.FixedPolicies{Set: set}, nil
}

func (staticPolicies) follow(func()) {}
