package offline

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	"sigs.k8s.io/yaml"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/conditions"
	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/wire"
)

// MaxTestFileBytes bounds a decision test file.
const MaxTestFileBytes = 8 << 20

// TestFile is a YAML file of expected decisions (`kcedar test`).
type TestFile struct {
	// Policies are files or directories, relative to the test file; empty
	// means the *.cedar files next to it.
	Policies []string   `json:"policies,omitempty"`
	Tests    []TestCase `json:"tests"`
	// Namespaces are the Namespace objects namespaceObject is filled from
	// in every test (as kcedar serve's informer knows them); a namespace not
	// listed is unknown.
	Namespaces []json.RawMessage `json:"namespaces,omitempty"`
}

// TestCase is one request and what the policies must answer.
type TestCase struct {
	Name string `json:"name"`
	// Request, or a SubjectAccessReview (its spec is read).
	Request *RequestSpec              `json:"request,omitempty"`
	SAR     *wire.SubjectAccessReview `json:"sar,omitempty"`
	// Admission data: the operation (default: from the verb) and objects.
	Operation string          `json:"operation,omitempty"`
	Object    json.RawMessage `json:"object,omitempty"`
	OldObject json.RawMessage `json:"oldObject,omitempty"`
	// NamespaceObject, if set, is the request's Namespace object for this
	// test (replacing the file's namespaces of that name).
	NamespaceObject json.RawMessage `json:"namespaceObject,omitempty"`
	// Expect is Allow, Deny, NoOpinion or Conditional.
	Expect string `json:"expect"`
	// Outcome is the decision after admission (the conditions evaluated
	// against object/oldObject); required for Conditional.
	Outcome string `json:"outcome,omitempty"`
	// WithoutConditions, if set, is the answer for a caller that cannot take
	// conditions.
	WithoutConditions string `json:"withoutConditions,omitempty"`
	// Audit, if set, is every audit finding the test expects (an empty
	// list: none): audit policies that would have changed the decision.
	Audit []AuditExpectation `json:"audit,omitempty"`
}

// AuditExpectation is an audit policy expected to have changed a decision
// had it been enforced, and the decision it would have made: deny, allow or
// conditional.
type AuditExpectation struct {
	Policy string `json:"policy"`
	Would  string `json:"would"`
}

// String is "<policy> would <would>".
func (a AuditExpectation) String() string { return a.Policy + " would " + a.Would }

// RequestSpec is a request in the terms of `kcedar authorize`'s flags.
type RequestSpec struct {
	User        string              `json:"user,omitempty"`
	Groups      []string            `json:"groups,omitempty"`
	UID         string              `json:"uid,omitempty"`
	Extra       map[string][]string `json:"extra,omitempty"`
	Verb        string              `json:"verb"`
	APIGroup    string              `json:"apiGroup,omitempty"`
	APIVersion  string              `json:"apiVersion,omitempty"`
	Resource    string              `json:"resource,omitempty"`
	Subresource string              `json:"subresource,omitempty"`
	Namespace   string              `json:"namespace,omitempty"`
	Name        string              `json:"name,omitempty"`
	Path        string              `json:"path,omitempty"`
	// Raw takes APIGroup, Resource, Subresource and Verb literally, as a
	// SubjectAccessReview carries them; otherwise they resolve as kubectl
	// resolves resource arguments (Resolve), as `kcedar authorize` does.
	Raw bool `json:"raw,omitempty"`
}

// Resolve resolves the request the way kubectl resolves resource arguments
// (pods, po, pod, Pod, deployments.apps, deployments.v1.apps, pods/exec,
// deploy/scale; APIGroup narrows, "core" for the core group; for an
// impersonate:<mode> verb it defaults to authentication.k8s.io) and checks the
// verb, then rewrites r to the resolved group, version, resource and
// subresource. It returns what the resource resolved to (nil for a
// non-resource request, or resource "*": every resource). An unknown resource or verb is an error with a
// "did you mean" hint.
func (r *RequestSpec) Resolve(s *schemagen.Schema) (*schemagen.Resolved, error) {
	if r.Path != "" {
		if r.Verb != schemagen.AllVerbs && !schemagen.IsNonResourceAction(r.Verb) {
			msg := fmt.Sprintf("verb %q is not an HTTP verb of a non-resource request", r.Verb)
			if m := schemagen.Closest(r.Verb, schemagen.NonResourceVerbs); m != "" {
				msg += fmt.Sprintf(" (did you mean %s?)", m)
			}
			return nil, errors.New(msg)
		}
		return nil, nil
	}
	if r.Resource == entities.Wildcard {
		return nil, nil // "*": every resource, as a SubjectAccessReview says it
	}
	arg := r.Resource
	if r.Subresource != "" {
		if strings.Contains(arg, "/") {
			return nil, fmt.Errorf("resource %q already names a subresource; drop subresource %q", arg, r.Subresource)
		}
		arg += "/" + r.Subresource
	}
	res, err := s.ResolveResource(arg, r.APIGroup)
	if r.APIGroup == "" && strings.HasPrefix(r.Verb, schemagen.ImpersonatePrefix) {
		// impersonate:<mode> asks about the identities of
		// authentication.k8s.io (users, nodes, ...), not core nodes.
		if id, idErr := s.ResolveResource(arg, schemagen.AuthenticationGroup); idErr == nil {
			res, err = id, nil
		}
	}
	if err != nil {
		return nil, err
	}
	if err := s.CheckVerb(r.Verb, res.Resource); err != nil {
		return nil, err
	}
	r.APIGroup, r.Resource, r.Subresource = res.Key.Group, res.Key.Resource, res.Subresource
	if r.APIVersion == "" {
		r.APIVersion = res.Version
	}
	return res, nil
}

// SAR converts the spec into a SubjectAccessReview spec: a non-resource
// request when Path is set.
func (r *RequestSpec) SAR() *authorizationv1.SubjectAccessReviewSpec {
	spec := &authorizationv1.SubjectAccessReviewSpec{User: r.User, Groups: r.Groups, UID: r.UID}
	if len(r.Extra) > 0 {
		spec.Extra = map[string]authorizationv1.ExtraValue{}
		for k, v := range r.Extra {
			spec.Extra[k] = v
		}
	}
	if r.Path != "" {
		spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: r.Path, Verb: r.Verb}
		return spec
	}
	spec.ResourceAttributes = &authorizationv1.ResourceAttributes{
		Verb: r.Verb, Group: r.APIGroup, Version: r.APIVersion, Resource: r.Resource,
		Subresource: r.Subresource, Namespace: r.Namespace, Name: r.Name,
	}
	return spec
}

// ParseTestFile reads a test file (YAML or JSON), strictly: unknown fields
// are errors, so a typo does not silently drop an expectation.
func ParseTestFile(data []byte) (*TestFile, error) {
	if len(data) > MaxTestFileBytes {
		return nil, fmt.Errorf("%d bytes is over the limit of %d", len(data), MaxTestFileBytes)
	}
	var tf TestFile
	if err := yaml.UnmarshalStrict(data, &tf); err != nil {
		return nil, err
	}
	if len(tf.Tests) == 0 {
		return nil, errors.New("no tests")
	}
	for i, tc := range tf.Tests {
		name := tc.Name
		if name == "" {
			name = fmt.Sprintf("#%d", i+1)
		}
		if (tc.Request == nil) == (tc.SAR == nil) {
			return nil, fmt.Errorf("test %s: give exactly one of request and sar", name)
		}
		switch tc.Expect {
		case "Allow", "Deny", "NoOpinion", "Conditional":
		default:
			return nil, fmt.Errorf("test %s: expect must be Allow, Deny, NoOpinion or Conditional, not %q", name, tc.Expect)
		}
		if tc.Expect == "Conditional" && tc.Outcome == "" {
			return nil, fmt.Errorf("test %s: a Conditional expectation needs outcome (Allow, Deny or NoOpinion given the objects)", name)
		}
		for _, a := range tc.Audit {
			switch a.Would {
			case "deny", "allow", "conditional":
			default:
				return nil, fmt.Errorf("test %s: audit policy %q: would must be deny, allow or conditional, not %q", name, a.Policy, a.Would)
			}
		}
	}
	return &tf, nil
}

// Request builds the cedar request and admission data of a test case, the
// way the server reads a SubjectAccessReview.
func (tc *TestCase) Build() (*entities.Request, *conditions.Admission, error) {
	var spec *authorizationv1.SubjectAccessReviewSpec
	if tc.SAR != nil {
		spec = &tc.SAR.Spec.SubjectAccessReviewSpec
	} else {
		spec = tc.Request.SAR()
	}
	req, err := entities.RequestFromSAR(spec)
	if err != nil {
		return nil, nil, err
	}
	var adm *conditions.Admission
	if len(tc.Object) > 0 || len(tc.OldObject) > 0 || tc.Operation != "" {
		adm = &conditions.Admission{Operation: tc.Operation, Object: nullIsAbsent(tc.Object), OldObject: nullIsAbsent(tc.OldObject)}
		if adm.Operation == "" {
			adm.Operation = DefaultOperation(req.Verb, req.Subresource)
		}
	}
	return req, adm, nil
}

func nullIsAbsent(raw json.RawMessage) []byte {
	if t := bytes.TrimSpace(raw); len(t) == 0 || string(t) == "null" {
		return nil
	}
	return raw
}

// TestResult is one test's verdict.
type TestResult struct {
	Name     string        `json:"name"`
	Passed   bool          `json:"passed"`
	Failures []string      `json:"failures,omitempty"`
	Got      engine.Report `json:"got"`
}

// Run checks every test case against the decider.
func (tf *TestFile) Run(d *Decider) []TestResult {
	out := make([]TestResult, len(tf.Tests))
	for i, tc := range tf.Tests {
		r := &out[i]
		r.Name = tc.Name
		if r.Name == "" {
			r.Name = fmt.Sprintf("#%d", i+1)
		}
		if tc.Request != nil && !tc.Request.Raw {
			resolved := *tc.Request
			if _, err := resolved.Resolve(d.schema); err != nil {
				r.Failures = append(r.Failures, "invalid request: "+strings.ReplaceAll(err.Error(), "--raw", "raw: true"))
				continue
			}
			tc.Request = &resolved
		}
		req, adm, err := tc.Build()
		if err != nil {
			r.Failures = append(r.Failures, "invalid request: "+err.Error())
			continue
		}
		dd, err := tf.deciderFor(d, &tc)
		if err != nil {
			r.Failures = append(r.Failures, "invalid namespaceObject: "+err.Error())
			continue
		}
		got := dd.Decide(req, adm)
		r.Got = got
		if got.Decision != tc.Expect {
			r.Failures = append(r.Failures, fmt.Sprintf("decision: got %s, want %s%s", got.Decision, tc.Expect, because(got.Reason, got.EvaluationError)))
		}
		if tc.Outcome != "" {
			switch {
			case adm == nil && got.Decision == "Conditional":
				r.Failures = append(r.Failures, "outcome: the decision is Conditional but the test gives no object, oldObject or operation to evaluate it against")
			case got.Outcome != tc.Outcome:
				r.Failures = append(r.Failures, fmt.Sprintf("outcome: got %s, want %s%s", got.Outcome, tc.Outcome, because(got.OutcomeReason, got.OutcomeError)))
			}
		}
		if tc.WithoutConditions != "" && got.WithoutConditions != tc.WithoutConditions {
			r.Failures = append(r.Failures, fmt.Sprintf("without conditions: got %s, want %s", got.WithoutConditions, tc.WithoutConditions))
		}
		r.Failures = append(r.Failures, checkAudit(tc.Audit, got.Audit)...)
		r.Passed = len(r.Failures) == 0
	}
	return out
}

// checkAudit compares the audit findings a test expects (nil: not checked)
// with the ones reported.
func checkAudit(want []AuditExpectation, got []engine.AuditReport) []string {
	if want == nil {
		return nil
	}
	w := make([]string, len(want))
	for i, a := range want {
		w[i] = a.String()
	}
	g := make([]string, len(got))
	for i, a := range got {
		g[i] = AuditExpectation{Policy: a.Policy, Would: a.Would}.String()
	}
	slices.Sort(w)
	slices.Sort(g)
	if slices.Equal(w, g) {
		return nil
	}
	none := func(s []string) string {
		if len(s) == 0 {
			return "none"
		}
		return strings.Join(s, ", ")
	}
	return []string{fmt.Sprintf("audit: got %s, want %s", none(g), none(w))}
}

func because(reason, evalErr string) string {
	s := ""
	if reason != "" {
		s = " (" + reason + ")"
	}
	if evalErr != "" {
		s += " [evaluation error: " + evalErr + "]"
	}
	return s
}

// PolicyPaths resolves the test file's policy paths.
func (tf *TestFile) PolicyPaths(testFile string) ([]string, error) {
	dir := filepath.Dir(testFile)
	if len(tf.Policies) == 0 {
		matches, err := filepath.Glob(filepath.Join(dir, "*.cedar"))
		if err != nil {
			return nil, err
		}
		if len(matches) == 0 {
			return nil, fmt.Errorf("%s: no policies: list them under policies:, or put *.cedar files next to the test file", testFile)
		}
		return matches, nil
	}
	var out []string
	for _, p := range tf.Policies {
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		out = append(out, p)
	}
	return out, nil
}

// FindTestFiles expands paths: files as they are, directories searched
// recursively for *_test.yaml and *.test.yaml files.
func FindTestFiles(paths []string) ([]string, error) {
	var out []string
	for _, root := range paths {
		info, err := os.Stat(root)
		if err != nil {
			return nil, err
		}
		if !info.IsDir() {
			out = append(out, root)
			continue
		}
		err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			n := d.Name()
			if d.IsDir() && path != root && strings.HasPrefix(n, ".") {
				return filepath.SkipDir
			}
			if !d.IsDir() && (strings.HasSuffix(n, "_test.yaml") || strings.HasSuffix(n, ".test.yaml")) {
				out = append(out, path)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// PolicyLoader loads and checks the policy files a test file names
// (lint.Checker is one); an invalid set is an error.
type PolicyLoader interface {
	LoadPolicies(paths []string) (*cedarlang.PolicySet, error)
}

// RunTestFile reads a test file, loads its policies with loader and runs the
// tests against them, deciding as kcedar serve does.
func RunTestFile(file string, s *schemagen.Schema, loader PolicyLoader) ([]TestResult, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	tf, err := ParseTestFile(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	paths, err := tf.PolicyPaths(file)
	if err != nil {
		return nil, err
	}
	ps, err := loader.LoadPolicies(paths)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	ns, err := tf.namespaces()
	if err != nil {
		return nil, fmt.Errorf("%s: namespaces: %w", file, err)
	}
	return tf.Run(NewDeciderWithNamespaces(s, ps, ns)), nil
}
