package policyobjects

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/cedarlang/lint"
	"github.com/kcedar/kcedar/internal/schemagen"
)

// Checker validates an object's policy text the way the store loads it, and
// explains what is wrong as `kcedar validate` does (line:column, hint).
type Checker struct {
	lint *lint.Checker
}

// NewChecker prepares a checker for schema s.
func NewChecker(s *schemagen.Schema) (*Checker, error) {
	c, err := lint.NewChecker(s)
	if err != nil {
		return nil, err
	}
	return &Checker{lint: c}, nil
}

// NewCheckerFrom wraps a cedar/lint checker (one per schema, shared with the
// store's file checks).
func NewCheckerFrom(l *lint.Checker) *Checker { return &Checker{lint: l} }

// Verdict is what Check found in one object.
type Verdict struct {
	Valid bool
	// IDs of the policies, as the store names them (only when Valid).
	IDs []string
	// Errors are positioned diagnostics, one per problem, as `kcedar
	// validate` prints them; Warnings are lint warnings (valid anyway).
	Errors   []string
	Warnings []string
}

// Message renders the verdict for a status condition or an admission denial.
func (v Verdict) Message() string {
	if v.Valid {
		msg := fmt.Sprintf("%d policies valid", len(v.IDs))
		if len(v.Warnings) > 0 {
			msg += "; warnings:\n" + strings.Join(v.Warnings, "\n")
		}
		return msg
	}
	return strings.Join(v.Errors, "\n")
}

// Check validates content, the spec.content of an object of kind in
// namespace ns (empty for CedarPolicy) named name.
func (c *Checker) Check(kind, ns, name, content string) Verdict {
	src := SourceName(kind, ns, name)
	if kind == KindNamespaced && ns == "" {
		return Verdict{Errors: []string{src + ": a NamespacedCedarPolicy needs a namespace"}}
	}
	if len(content) > MaxContentBytes {
		return Verdict{Errors: []string{fmt.Sprintf("%s: spec.content is %d bytes, over the limit of %d; split the policies into several objects", src, len(content), MaxContentBytes)}}
	}
	if !utf8.ValidString(content) {
		return Verdict{Errors: []string{src + ": spec.content is not UTF-8 text"}}
	}
	res := c.lint.Check([]lint.File{{Name: src, Data: []byte(content)}})
	var v Verdict
	for _, d := range res.Diagnostics {
		if d.Severity == lint.Error {
			v.Errors = append(v.Errors, d.String())
		} else {
			v.Warnings = append(v.Warnings, d.String())
		}
	}
	if len(v.Errors) > 0 {
		return v
	}
	policies := res.Policies
	if kind == KindNamespaced {
		confined, err := cedarlang.ConfineToNamespace(policies, ns, src+"/")
		if err != nil {
			v.Errors = append(v.Errors, err.Error()+"\n    hint: a NamespacedCedarPolicy grants within its namespace; ask a cluster administrator for a CedarPolicy to forbid")
			return v
		}
		policies = confined
	}
	v.Valid = true
	for _, p := range policies {
		v.IDs = append(v.IDs, p.ID)
	}
	return v
}
