// Package lint checks Cedar policy files the way kcedar loads them (strict
// parsing, unique @id, cedarlang.SchemaValidator's type checking) and explains
// what it finds: each diagnostic points into the policy (file:line:col),
// names the policy, and carries a one-line hint for the common mistakes. It
// also warns about policies that are valid but cannot do what they seem to
// (comparisons to "*", forbids that can fail to evaluate, permits that are
// conditional on objects only for reads, has tests that never hold on the
// schema). `kcedar validate` is its CLI.
package lint

import (
	"fmt"
	"log/slog"
	"regexp"
	"sort"
	"strings"

	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/lib/cedarx/schema/resolved"
	"github.com/kcedar/kcedar/internal/lib/parallel"
	"github.com/kcedar/kcedar/internal/schemagen"
)

// Severity of a diagnostic.
type Severity string

const (
	Error   Severity = "error"
	Warning Severity = "warning"
)

// Diagnostic codes: stable names for CI tools (`--output json`).
const (
	CodeSyntax          = "syntax"       // the file does not parse
	CodeIO              = "io"           // the file cannot be read or is not text
	CodeDuplicateID     = "duplicate-id" // two policies share an @id
	CodeScope           = "scope"        // a scope kcedar refuses (resource == entity)
	CodeUnknownAttr     = "unknown-attribute"
	CodeOptionalAttr    = "optional-attribute" // read without a has guard
	CodeUnknownType     = "unknown-type"
	CodeUnknownAction   = "unknown-action"
	CodeNotApplicable   = "action-not-applicable"
	CodeTypeMismatch    = "type-mismatch"
	CodeUnguardedTag    = "unguarded-tag"
	CodeExtension       = "extension-literal"
	CodeInvalid         = "invalid" // any other validator complaint
	CodeWildcardCompare = "wildcard-comparison"
	CodeLikeAll         = "like-matches-all"
	CodeForbidCanError  = "forbid-can-error"
	CodeReadConditional = "read-only-conditional"
)

// Diagnostic is one finding, pointing into a policy file.
type Diagnostic struct {
	File     string   `json:"file"`
	Line     int      `json:"line"`
	Column   int      `json:"column"`
	Policy   string   `json:"policy,omitempty"`
	Severity Severity `json:"severity"`
	Code     string   `json:"code"`
	Message  string   `json:"message"`
	Hint     string   `json:"hint,omitempty"`
}

// String renders `file:line:col: policy <id>: message`, a warning's message
// prefixed with "warning: ", and the hint on a second, indented line.
func (d Diagnostic) String() string {
	var b strings.Builder
	b.WriteString(d.File)
	if d.Line > 0 {
		fmt.Fprintf(&b, ":%d:%d", d.Line, d.Column)
	}
	b.WriteString(": ")
	if d.Policy != "" {
		fmt.Fprintf(&b, "policy %s: ", d.Policy)
	}
	if d.Severity == Warning {
		b.WriteString("warning: ")
	}
	b.WriteString(d.Message)
	if d.Hint != "" {
		b.WriteString("\n    hint: ")
		b.WriteString(d.Hint)
	}
	return b.String()
}

// Error makes a diagnostic an error: its String.
func (d Diagnostic) Error() string { return d.String() }

// LogValue logs a diagnostic as a structured record: file, line, column,
// policy, severity, code, message and hint.
func (d Diagnostic) LogValue() slog.Value {
	attrs := []slog.Attr{slog.String("file", d.File), slog.Int("line", d.Line), slog.Int("column", d.Column)}
	if d.Policy != "" {
		attrs = append(attrs, slog.String("policy", d.Policy))
	}
	attrs = append(attrs, slog.String("severity", string(d.Severity)), slog.String("code", d.Code), slog.String("message", d.Message))
	if d.Hint != "" {
		attrs = append(attrs, slog.String("hint", d.Hint))
	}
	return slog.GroupValue(attrs...)
}

// CheckFiles is Check for store.Store (store.FileChecker): the policies, or
// the error diagnostics. Serve's store then reports exactly what validate
// reports.
func (c *Checker) CheckFiles(files []cedarlang.SourceFile) ([]*cedarlang.Policy, []error) {
	in := make([]File, len(files))
	for i, f := range files {
		in[i] = File{Name: f.Name, Data: f.Data}
	}
	res := c.Check(in)
	var errs []error
	for _, d := range res.Diagnostics {
		if d.Severity == Error {
			errs = append(errs, d)
		}
	}
	return res.Policies, errs
}

// File is one policy file's name and contents.
type File struct {
	Name string
	Data []byte
}

// Result is what Check found.
type Result struct {
	Files       int
	Policies    []*cedarlang.Policy // every policy that parsed
	Diagnostics []Diagnostic        // sorted by file, position
}

// Errors counts the error diagnostics.
func (r *Result) Errors() int { return r.count(Error) }

// Warnings counts the warnings.
func (r *Result) Warnings() int { return r.count(Warning) }

func (r *Result) count(s Severity) int {
	n := 0
	for _, d := range r.Diagnostics {
		if d.Severity == s {
			n++
		}
	}
	return n
}

// Checker checks policies against one schema.
type Checker struct {
	Schema    *schemagen.Schema
	validator *cedarlang.SchemaValidator
	resolved  *resolved.Schema
	byType    map[types.EntityType]*schemagen.Resource
	typeNames []string // every entity type, for "did you mean"
	// scopes: what the actions of an action scope apply to, by scope (a
	// set has few).
	scopes scopeCache
}

// Validator is the checker's validator of policies against its schema (safe
// for concurrent use): a store checking against the same schema can share it.
func (c *Checker) Validator() *cedarlang.SchemaValidator { return c.validator }

// NewChecker prepares a checker for s.
func NewChecker(s *schemagen.Schema) (*Checker, error) {
	v, err := cedarlang.NewSchemaValidator(s)
	if err != nil {
		return nil, err
	}
	rs := v.Resolved() // resolved once, for both
	c := &Checker{Schema: s, validator: v, resolved: rs, byType: map[types.EntityType]*schemagen.Resource{}}
	for _, r := range s.Resources {
		c.byType[r.EntityType] = r
	}
	for et := range rs.Entities {
		c.typeNames = append(c.typeNames, string(et))
	}
	sort.Strings(c.typeNames)
	return c, nil
}

// policySource locates a policy in its file.
type policySource struct {
	p     *cedarlang.Policy
	file  *sourceFile
	start int // byte offset of the policy's first token
	end   int // byte offset after its text (the next policy's start or EOF)
}

// Check parses and validates files as one policy set (as `kcedar serve`
// would load them) and lints the valid policies.
func (c *Checker) Check(files []File) *Result {
	res := &Result{Files: len(files)}
	// Files are read and parsed in parallel, then assembled in order.
	out := parseFiles(files)
	var srcs []*policySource
	for fi, f := range files {
		sf := out[fi].sf
		if !out[fi].textOK {
			res.Diagnostics = append(res.Diagnostics, out[fi].textDiag)
			continue
		}
		ps, err := out[fi].ps, out[fi].err
		if err != nil {
			res.Diagnostics = append(res.Diagnostics, parseDiagnostic(f.Name, err, sf))
			continue
		}
		srcs = append(srcs, locatePolicies(sf, ps, len(f.Data))...)
		res.Policies = append(res.Policies, ps...)
	}
	res.Diagnostics = append(res.Diagnostics, duplicateIDs(srcs)...)
	errs := c.validator.ValidateEach(res.Policies)
	diags := make([][]Diagnostic, len(srcs))
	parallel.For(len(srcs), func(i int) {
		if len(errs[i]) > 0 {
			diags[i] = c.explain(srcs[i], errs[i])
			return
		}
		diags[i] = c.lint(srcs[i])
	})
	for _, d := range diags {
		res.Diagnostics = append(res.Diagnostics, d...)
	}
	sortDiagnostics(res.Diagnostics)
	return res
}

// parsedFile is one file as Check reads it: its source, its text check
// (textOK false: textDiag says what is wrong) and, when that passed, its
// policies or parse error.
type parsedFile struct {
	sf       *sourceFile
	textDiag Diagnostic
	textOK   bool
	ps       []*cedarlang.Policy
	err      error
}

// parseFiles reads and parses files in parallel.
func parseFiles(files []File) []parsedFile {
	out := make([]parsedFile, len(files))
	parallel.For(len(files), func(i int) {
		f := files[i]
		o := &out[i]
		o.sf = newSourceFile(f.Name, f.Data)
		if o.textDiag, o.textOK = checkText(f); o.textOK {
			o.ps, o.err = cedarlang.ParsePolicies(f.Name, f.Data)
		}
	})
	return out
}

// locatePolicies places each of ps, parsed from sf (size bytes long), in
// it: from its first token to the next policy's (or the end of the file).
func locatePolicies(sf *sourceFile, ps []*cedarlang.Policy, size int) []*policySource {
	srcs := make([]*policySource, 0, len(ps))
	for i, p := range ps {
		line, col := positionOf(p.Source)
		start := sf.offset(line, col)
		end := size
		if i+1 < len(ps) {
			l2, c2 := positionOf(ps[i+1].Source)
			end = sf.offset(l2, c2)
		}
		srcs = append(srcs, &policySource{p: p, file: sf, start: start, end: end})
	}
	return srcs
}

// duplicateIDs reports every policy whose id an earlier one (in any file)
// already uses.
func duplicateIDs(srcs []*policySource) []Diagnostic {
	var out []Diagnostic
	seen := map[string]*policySource{}
	for _, ps := range srcs {
		if prev, ok := seen[ps.p.ID]; ok {
			d := ps.diag(Error, CodeDuplicateID, fmt.Sprintf("policy id %q is also used at %s", ps.p.ID, prev.p.Source), "policy ids must be unique across all policy files: rename one of them", ps.find("@id("))
			out = append(out, d)
			continue
		}
		seen[ps.p.ID] = ps
	}
	return out
}

// sortDiagnostics sorts ds by file, line, column, code and message, keeping
// the order of equal ones.
func sortDiagnostics(ds []Diagnostic) {
	sort.SliceStable(ds, func(i, j int) bool {
		a, b := ds[i], ds[j]
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		if a.Column != b.Column {
			return a.Column < b.Column
		}
		if a.Code != b.Code {
			return a.Code < b.Code
		}
		return a.Message < b.Message
	})
}

// positionOf reads line and column from a Policy.Source ("file:line:col").
func positionOf(source string) (int, int) {
	i := strings.LastIndexByte(source, ':')
	j := strings.LastIndexByte(source[:max(i, 0)], ':')
	if i < 0 || j < 0 {
		return 1, 1
	}
	var line, col int
	fmt.Sscanf(source[j+1:i], "%d", &line)
	fmt.Sscanf(source[i+1:], "%d", &col)
	return max(line, 1), max(col, 1)
}

// parseDiagnostic turns a ParsePolicies error ("file:line:col: message")
// into a diagnostic. Errors without a position point at the file.
func parseDiagnostic(name string, err error, sf *sourceFile) Diagnostic {
	msg := err.Error()
	d := Diagnostic{File: name, Severity: Error, Code: CodeSyntax}
	rest, ok := strings.CutPrefix(msg, name+":")
	if !ok {
		d.Message = msg
		return d
	}
	var line, col int
	if n, _ := fmt.Sscanf(rest, "%d:%d", &line, &col); n == 2 {
		d.Line, d.Column = line, col
		if k := strings.Index(rest, ": "); k >= 0 {
			rest = rest[k+2:]
		}
	} else {
		rest = strings.TrimPrefix(rest, " ")
	}
	// ParsePolicies adds "policy <id>: " for scope errors.
	if strings.HasPrefix(rest, "policy ") {
		if id, m, ok := strings.Cut(strings.TrimPrefix(rest, "policy "), ": "); ok {
			d.Policy, rest = id, m
			d.Code = CodeScope
			d.Hint = "write `resource is <type>` in the scope and constrain resource.name / resource.namespace in a when clause"
		}
	}
	d.Message = rest
	// cedar-go's "exact got X want Y": say it in words.
	if m := reExact.FindStringSubmatch(rest); m != nil {
		d.Message = fmt.Sprintf("expected %s, found %s", m[2], m[1])
		if m[2] == ";" {
			d.Hint = "a policy ends with `;`"
		}
		if m[1] == "@" && d.Column > 1 {
			d.Column-- // cedar-go points after the @ of an annotation
		} else if d.Line > 0 && d.Column > 1 && sf.at(d.Line, d.Column-1) == '@' {
			d.Column--
		}
	}
	// "unexpected effect: garbage": point at the word, not what follows it.
	if m := reEffect.FindStringSubmatch(rest); m != nil && d.Line > 0 {
		if c := sf.lastIndexInLine(d.Line, d.Column, m[1]); c > 0 {
			d.Column = c
		}
	}
	switch {
	case strings.Contains(rest, "@id is empty"):
		d.Hint = `give the policy a name: @id("team-a-reads-pods")`
	case strings.Contains(rest, "nested too deeply"), strings.Contains(rest, "nesting deeper"):
		d.Hint = "split the policy, or use a set: [\"a\", \"b\"].contains(x)"
	case strings.Contains(rest, "unexpected effect"):
		d.Hint = "a policy starts with permit or forbid (after its annotations) and ends with `;`"
	case d.Hint != "":
	case strings.Contains(rest, "string literal not terminated"):
		d.Hint = "close the string with \" on the same line"
	case strings.Contains(rest, "over the limit"):
		d.Hint = "split the policies into several files"
	}
	return d
}

var (
	reExact  = regexp.MustCompile(`^exact got (.*) want (\S+)( \(at .*\))?$`)
	reEffect = regexp.MustCompile(`^unexpected effect: (\S+)`)
)

// checkText refuses files that are not text before the parser sees them.
func checkText(f File) (Diagnostic, bool) {
	if len(f.Data) > cedarlang.MaxPolicyFileBytes {
		return Diagnostic{File: f.Name, Severity: Error, Code: CodeIO, Message: fmt.Sprintf("%d bytes is over the limit of %d", len(f.Data), cedarlang.MaxPolicyFileBytes), Hint: "split the policies into several files"}, false
	}
	line, col := 1, 1
	for i := 0; i < len(f.Data); {
		r, size := decodeRune(f.Data[i:])
		if r == 0 || (r < 0x20 && r != '\n' && r != '\r' && r != '\t') || r == badRune {
			return Diagnostic{File: f.Name, Line: line, Column: col, Severity: Error, Code: CodeIO,
				Message: fmt.Sprintf("not a Cedar text file: byte 0x%02x at offset %d", f.Data[i], i),
				Hint:    "policy files are UTF-8 text; is this a binary file in the policy directory?"}, false
		}
		if r == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
		i += size
	}
	return Diagnostic{}, true
}
