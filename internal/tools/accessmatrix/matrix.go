package accessmatrix

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/kcedar/kcedar/internal/accessreview"
	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/schemagen"
)

// DefaultVerbs are the columns of a matrix unless the caller names others:
// the verbs of kubectl auth can-i --list and rakkess.
var DefaultVerbs = []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}

// Kind is what one who-can entry says of its subject.
type Kind string

const (
	// Allowed: a permit applies to the subject without a condition.
	Allowed Kind = "allowed"
	// Conditional: a permit applies to the subject under a condition.
	Conditional Kind = "conditional"
	// Denied: a forbid applies to the subject without a condition.
	Denied Kind = "denied"
	// DeniedWhen: a forbid applies to the subject under a condition.
	DeniedWhen Kind = "denied-when"
)

// State is a cell's summary, the way who-can's rule reads its entries.
type State string

const (
	// StateNone: no policy allows or denies the subject.
	StateNone State = "none"
	// StateAllowed: allowed without a condition in every case of the
	// request, and no unconditional forbid.
	StateAllowed State = "allowed"
	// StateConditional: some permit applies only under a condition (or only
	// in some cases), and no unconditional forbid.
	StateConditional State = "conditional"
	// StateDenied: an unconditional forbid applies.
	StateDenied State = "denied"
	// StateForbidOnly: only forbids with conditions apply; nothing allows.
	StateForbidOnly State = "forbid-only"
)

// Entry is one who-can entry of a cell's subject.
type Entry struct {
	Kind Kind `json:"kind"`
	// Via is the selector of a forbid that applies to the subject through
	// it (every principal, every User, a username pattern...); empty for
	// the subject's own entries.
	Via       string   `json:"via,omitempty"`
	Condition string   `json:"condition,omitempty"`
	Case      string   `json:"case,omitempty"`
	Policies  []string `json:"policies"`
}

// Cell is what the policies say of one subject, resource and verb.
type Cell struct {
	Resource string  `json:"resource"`
	Verb     string  `json:"verb"`
	State    State   `json:"state"`
	Entries  []Entry `json:"entries"`
}

// Policies are the ids of the policies behind the cell, sorted, once each.
func (c *Cell) Policies() []string {
	var ids []string
	for _, e := range c.Entries {
		ids = append(ids, e.Policies...)
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// Has reports whether the cell has an entry of kind k.
func (c *Cell) Has(k Kind) bool {
	return slices.ContainsFunc(c.Entries, func(e Entry) bool { return e.Kind == k })
}

// Row is one subject (a name or a selector, as who-can lists it) in one
// namespace scope, and its cells, by resource then verb; cells without
// entries are left out.
type Row struct {
	Subject engine.Subject `json:"subject"`
	// Label is the subject as who-can prints it.
	Label string `json:"label"`
	// Namespaces is the row's scope in the cluster's matrix: the
	// namespaces its entries hold in ("dev", "team-a-*", "dev, prod"), as a
	// RoleBinding or a condition on resource.namespace restricts them;
	// empty for every namespace (and in a namespace's matrix).
	Namespaces string  `json:"namespaces,omitempty"`
	Cells      []*Cell `json:"cells"`
}

// rowKey is a row's subject and scope.
type rowKey struct {
	sub   engine.Subject
	scope string
}

// Cell returns the row's cell for resource and verb (nil when none).
func (r *Row) Cell(resource, verb string) *Cell {
	for _, c := range r.Cells {
		if c.Resource == resource && c.Verb == verb {
			return c
		}
	}
	return nil
}

// Matrix is who can do what in a namespace ("" for the cluster).
type Matrix struct {
	Namespace string   `json:"namespace,omitempty"`
	Verbs     []string `json:"verbs"`
	// Resources are the columns' resources as kubectl writes them, in
	// the schema's order.
	Resources []string `json:"resources"`
	// Applies lists, per resource, the verbs the schema gives it; a verb
	// that does not apply has no cell.
	Applies map[string][]string `json:"applies"`
	Rows    []*Row              `json:"subjects"`
	// Errors are the reviews' errors (policies who-can cannot analyse).
	Errors []string `json:"evaluationErrors,omitempty"`
	// Chain names the authorizer chain the matrix answers for ("kcedar,
	// then RBAC ...", "kcedar alone"); set by the caller.
	Chain string `json:"chain,omitempty"`
}

// Query says which matrix to draw.
type Query struct {
	// Namespace limits the matrix to one namespace (its namespaced
	// resources); empty asks about the cluster: every namespace, and the
	// cluster-scoped resources too.
	Namespace string
	// Resources are the resources to draw; empty: every resource of the
	// schema without a subresource, and Subresources (namespaced only, with
	// a Namespace).
	Resources []*schemagen.Resource
	// Subresources are drawn with the default resources, when some policy
	// mentions them (NamedSubresources: pods/exec, pods/log).
	Subresources []*schemagen.Resource
	// Verbs are the columns; empty: DefaultVerbs.
	Verbs []string
	// KeepEmpty keeps resources no policy mentions.
	KeepEmpty bool
}

// Build answers one access review per resource and verb with az and
// gathers the entries by subject.
func Build(ctx context.Context, az engine.RuleResolver, s *schemagen.Schema, q Query) (*Matrix, error) {
	verbs := q.Verbs
	if len(verbs) == 0 {
		verbs = DefaultVerbs
	}
	resources := q.Resources
	if len(resources) == 0 {
		resources = SchemaResources(s, q.Namespace != "")
		for _, r := range q.Subresources {
			if q.Namespace == "" || r.Namespaced {
				resources = append(resources, r)
			}
		}
	}
	m := &Matrix{Namespace: q.Namespace, Verbs: verbs, Applies: map[string][]string{}}
	rows := map[rowKey]*Row{}
	for _, r := range resources {
		name := ResourceName(r.Key)
		found := false
		for _, verb := range verbs {
			if !slices.Contains(r.Verbs, verb) {
				continue
			}
			m.Applies[name] = append(m.Applies[name], verb)
			resp, err := accessreview.WhoCan(ctx, az, review(q.Namespace, r.Key, verb))
			if err != nil {
				return nil, fmt.Errorf("who can %s %s: %w", verb, name, err)
			}
			found = addReview(rows, name, verb, &resp.AccessReview, q.Namespace == "") || found
			for _, e := range resp.Errors {
				m.Errors = append(m.Errors, fmt.Sprintf("%s %s: %s", verb, name, e))
			}
		}
		if found || q.KeepEmpty && (r.Key.Subresource == "" || len(q.Resources) > 0) {
			m.Resources = append(m.Resources, name)
		} else {
			delete(m.Applies, name)
		}
	}
	m.Rows = sortedRows(rows)
	return m, nil
}

// SchemaResources lists the schema's resources without a subresource,
// namespaced ones only when namespacedOnly, in the schema's order.
func SchemaResources(s *schemagen.Schema, namespacedOnly bool) []*schemagen.Resource {
	var out []*schemagen.Resource
	for _, k := range s.SortedResourceKeys() {
		r := s.Resources[k]
		if k.Subresource != "" || namespacedOnly && !r.Namespaced {
			continue
		}
		out = append(out, r)
	}
	return out
}

// ResourceName is the resource as kubectl writes it: pods,
// deployments.apps, pods/exec.
func ResourceName(k schemagen.ResourceKey) string {
	name := k.Resource
	if k.Group != "" {
		name += "." + k.Group
	}
	if k.Subresource != "" {
		name += "/" + k.Subresource
	}
	return name
}

// review is the ResourceAccessReview who-can sends for verb on the
// resource in namespace ns ("" every namespace).
func review(ns string, k schemagen.ResourceKey, verb string) *accessreview.ResourceAccessReview {
	rar := &accessreview.ResourceAccessReview{APIVersion: accessreview.APIVersion, Kind: "ResourceAccessReview"}
	rar.AuthorizationAttributes = accessreview.AuthorizationAttributes{
		Verb: verb, ResourceGroup: k.Group, Resource: k.Resource, Subresource: k.Subresource, Namespace: ns,
	}
	if ns != "" {
		rar.Kind = "LocalResourceAccessReview"
	}
	return rar
}

// addReview files the review's entries under their subjects' rows and
// reports whether it had any. In the cluster's matrix (scoped), an
// entry's namespace restriction is its row's scope (namespaceScope).
func addReview(rows map[rowKey]*Row, resource, verb string, rv *engine.AccessReview, scoped bool) bool {
	cells := map[rowKey]*Cell{}
	var forbids []scopedEntry
	add := func(list []engine.SubjectAccess, forbid bool) {
		for _, a := range list {
			e := scopedEntry{sub: a.Subject, Entry: Entry{Condition: a.Condition, Case: a.Case, Policies: a.Policies}}
			if scoped && a.Condition != "" {
				if scope, rest, ok := namespaceScope(a.Condition); ok {
					e.scope, e.Condition = scope, rest
				}
			}
			e.Kind = entryKind(forbid, e.Condition)
			k := rowKey{e.sub, e.scope}
			c := cells[k]
			if c == nil {
				c = &Cell{Resource: resource, Verb: verb}
				cells[k] = c
				row := rows[k]
				if row == nil {
					row = &Row{Subject: k.sub, Label: k.sub.String(), Namespaces: k.scope}
					rows[k] = row
				}
				row.Cells = append(row.Cells, c)
			}
			c.Entries = append(c.Entries, e.Entry)
			if forbid {
				forbids = append(forbids, e)
			}
		}
	}
	add(rv.Allowed, false)
	add(rv.Conditional, false)
	add(rv.Denied, true)
	addForbidsVia(cells, forbids)
	cases := max(len(rv.Cases), 1)
	for _, c := range cells {
		c.State = summarize(c.Entries, cases)
	}
	return len(cells) > 0
}

// scopedEntry is an entry with its subject and namespace scope.
type scopedEntry struct {
	Entry
	sub   engine.Subject
	scope string
}

// entryKind is an entry's kind from its effect and what is left of its
// condition once its scope is taken out.
func entryKind(forbid bool, cond string) Kind {
	switch {
	case forbid && cond == "":
		return Denied
	case forbid:
		return DeniedWhen
	case cond == "":
		return Allowed
	}
	return Conditional
}

// addForbidsVia adds to each cell the forbids that reach it from another
// row: an unconditional forbid on another subject that covers the cell's
// (engine.Subject.Covers: a forbid on every principal denies alice too, as
// who-can's users list says), and the subject's own forbids in another
// namespace scope. A forbid whose scope is the cell's, or every namespace,
// denies there as it is; one in other namespaces that may overlap the
// cell's applies under a condition (in those namespaces).
func addForbidsVia(cells map[rowKey]*Cell, forbids []scopedEntry) {
	for k, c := range cells {
		for _, f := range forbids {
			own := f.sub == k.sub
			switch {
			case own && f.scope == k.scope:
				continue // the cell's own entry
			case !own && (f.Condition != "" || !f.sub.Covers(k.sub)):
				continue
			case !mayOverlap(f.scope, k.scope):
				continue
			}
			e := f.Entry
			e.Via = f.sub.String()
			switch {
			case f.scope != "" && f.scope != k.scope:
				e.Via += " in namespaces " + f.scope
				e.Kind = DeniedWhen
			case own:
				e.Via += " in every namespace"
			}
			c.Entries = append(c.Entries, e)
		}
	}
}

// summarize reads a cell's entries as who-can's rule does: an
// unconditional forbid in any case denies; a permit without a condition in
// every case allows; any other permit leaves a condition.
func summarize(entries []Entry, cases int) State {
	allowedIn := map[string]bool{}
	permits := false
	for _, e := range entries {
		switch e.Kind {
		case Denied:
			return StateDenied
		case Allowed:
			allowedIn[e.Case] = true
			permits = true
		case Conditional:
			permits = true
		}
	}
	switch {
	case len(allowedIn) == cases:
		return StateAllowed
	case permits:
		return StateConditional
	}
	return StateForbidOnly
}

// sortedRows orders the subjects by kind, then name, then scope (every
// namespace first).
func sortedRows(rows map[rowKey]*Row) []*Row {
	out := make([]*Row, 0, len(rows))
	for _, r := range rows {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].Subject, out[j].Subject
		if a.Kind != b.Kind {
			return kindOrder(a.Kind) < kindOrder(b.Kind)
		}
		return strings.Join([]string{a.Name, a.Namespace, a.PrincipalType, out[i].Namespaces}, "\x00") < strings.Join([]string{b.Name, b.Namespace, b.PrincipalType, out[j].Namespaces}, "\x00")
	})
	return out
}

// kindOrder puts people first, then groups, then wider selectors.
func kindOrder(k engine.SubjectKind) int {
	order := []engine.SubjectKind{engine.SubjectUser, engine.SubjectGroup, engine.SubjectServiceAccount,
		engine.SubjectServiceAccounts, engine.SubjectNode, engine.SubjectUsernamePattern, engine.SubjectPrincipalType, engine.SubjectAll}
	if i := slices.Index(order, k); i >= 0 {
		return i
	}
	return len(order)
}
