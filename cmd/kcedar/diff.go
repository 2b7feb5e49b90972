package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/tools/diff"
)

func init() { rootCmd.AddCommand(newDiffCmd()) }

// Kinds of change, for --fail-on and the json "kind" field.
const (
	changeGained      = "gained"      // more access: to Allow, or Deny to something weaker
	changeLost        = "lost"        // less access
	changeConditional = "conditional" // conditional before and after, on other conditions no wider
	changeInexact     = "inexact"     // not decided exactly: may be any of the others
)

// diffOptions are kcedar diff's flags and arguments. AddFlags registers
// the flags, Complete takes the arguments, Validate refuses bad
// combinations (exit 2) and Run compares and reports.
type diffOptions struct {
	src      schemaSource
	pol      policySourceOptions // --cluster or --policy-objects (and --policies): OLD
	output   string
	all      bool
	exitCode bool
	failOn   []string
	nsObjs   namespaceObjects
	// oldPaths and newPaths are OLD and NEW (oldPaths empty when OLD is
	// the cluster's or the objects' set).
	oldPaths, newPaths []string
	args               []string
}

const diffLong = `Show the effect of a policy change on access: every region of requests
whose decision changes between OLD and NEW, each with one concrete example
request and the policies responsible on each side.

OLD and NEW are policy files or directories of *.cedar files, as kcedar
validate takes them, checked against the schema of the schema flags (the
embedded Kubernetes schema by default). With --cluster (or --policy-objects
FILE) OLD is instead what a running kcedar serves: the policy objects of the
current kubeconfig, composed as kcedar serve composes them, plus any
--policies files, which join the OLD side (the files kcedar serve loads
beside the objects); then give NEW alone:
  kcedar diff --cluster --policies served-files/ NEW
compares (cluster objects + served-files/) with NEW.

Only the policies that differ can change a decision. The requests they reach
are enumerated as a tree (the resource, the verb, the user, the namespace,
the name, then the groups and namespace labels), each level split only by
the values the policies that may still match there tell apart, and decided
with both sets; a branch where no differing policy may match is not
followed. A region is every combination of its verbs, resources, namespaces
and names made by its subject. "any other verb" (user, namespace, name, ...)
stands for any value no policy names there, "(all namespaces)" for a request
across namespaces and "(none)" for a request without a name; an example
shows such a value as <another verb>. A dimension the change does not depend
on is left out of the row (listed in "any" in -o json). A subject is who the
change holds for, as the partition means it: anyone (members of the groups
it is in), any user, any serviceaccount, every serviceaccount of a
namespace, any node, or one user, serviceaccount or node; "in" groups it
must be in, "not in" groups it must not be in, any others do not matter.
Where the method cannot decide exactly (principal uid or extra, label
selectors where a changed policy reads the object, many groups, more than
400,000 requests) the summary says so first and names the construct: it
never reports no change where one may exist.

A policy that reads the namespace's labels (resource.namespaceObject) is
decided in every namespace-label world: the namespace unknown, without
labels, and every assignment of the label keys the policies name; regions
list them (namespaceLabels, "namespace labelled" in the table).
--namespace-object decides the namespaces it gives with their own labels. A
name from a field selector (a list or watch pinned to metadata.name=N:
resource.named is false) is its own name class where a policy reads
resource.named. A list or watch with a label selector is not decided
exactly where a changed policy reads resource.object.

Output (-o): table (the default), for a terminal: a summary (the regions and
representative requests by change and by policy, and whether the comparison
is exact), then the regions grouped by kind of change and the policies on
each side, and in a group by subject, one line each; markdown, the same for
a pull-request comment. Both show at most 12 groups of each kind, 6 subjects
of a group and 4 regions of a subject (--all shows every one). json, a
stable document with every region:
  changed          true when any region is reported
  decided          the representative requests decided with both sets
  removedPolicies  ids of OLD's policies whose id is not in NEW
  addedPolicies    ids of NEW's policies whose id is not in OLD
  editedPolicies   ids on both sides whose access text differs
  inexact          the constructs not decided exactly (absent when none)
  regions[]        each with:
    kind           gained, lost, conditional or inexact
    subject        {kind: user|serviceaccount|node|anyone, namespace, name,
                    all (every one of the kind, of the namespace for
                    serviceaccounts), inGroups, notInGroups}
    verbs          verbs ("*" is a request for every verb)
    resources      kubectl-style names (pods, deployments.apps, pods/exec)
                   or non-resource paths
    targets        the same as {entityType, apiGroup, resource, subresource,
                   path, others (standing for every resource of its shape,
                   namespaced or not, no policy names)}
    namespaces     namespaces ("" an open namespace)
    names          names ("" no name; "metadata.name=N" a request whose
                   field selector names N)
    namespaceLabels  the namespace-label worlds: label selectors (k=v, !k
                   absent), "(unknown)", "(no labels)", "(other labels)";
                   absent where no policy reads the namespace's labels
    any            the dimensions the change holds for every value of
                   (verbs, namespaces, names, paths, namespaceLabels):
                   their lists are absent
    change         {from, to}: Allow, Deny, NoOpinion or Conditional
    example        one request of the region: {user, groups, verb, apiGroup,
                   resource, subresource, namespace, name, path}
    oldPolicies    the policies deciding the example with OLD
    newPolicies    the policies deciding it with NEW
    exact          false where the region was not decided exactly
    mayWiden       conditional before and after, and the new conditions
                   may allow an object the old ones do not (kind gained)
    note           what is special about the region
    requests       the representative requests of the region

--exit-code makes the exit status 3 when a region has a kind --fail-on names
(default gained: anything to Allow, Deny to anything weaker, NoOpinion to
Conditional, and Conditional to Conditional unless every new allow condition
was an old one and every old deny condition is a new one: a widened or
reworded condition counts as gained). conditional is a Conditional to
Conditional change proven no wider. A region not decided exactly counts as
every kind. In -o json the values that stand for any value no policy names
begin with "kcedar-other".

Exit status: 0 compared (no failing change), 1 invalid policies, 2 usage or
I/O error, 3 changes --fail-on names (with --exit-code).`

func newDiffCmd() *cobra.Command {
	o := &diffOptions{}
	cmd := &cobra.Command{
		Use:   "diff [--schema FILE | --kubeconfig FILE | --from-dir DIR] (OLD NEW | --cluster NEW) [-o table|json|markdown] [--exit-code]",
		Short: "Show every region of requests whose decision a policy change changes",
		Long:  diffLong,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Complete(args)
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

// AddFlags registers kcedar diff's flags on f.
func (o *diffOptions) AddFlags(f *pflag.FlagSet) {
	o.src.AddFlags(f)
	o.pol.AddFlags(f, true)
	f.StringVarP(&o.output, "output", "o", "table", "output format: table, json or markdown")
	f.BoolVar(&o.all, "all", false, "table and markdown: show every region and every policy (by default at most 12 groups of policies for each kind of change, 6 subjects a group, 4 regions a subject; -o json always has every region)")
	f.BoolVar(&o.exitCode, "exit-code", false, "exit 3 when there are changes of the kinds --fail-on names")
	o.nsObjs.AddFlag(f)
	f.Lookup("namespace-object").Usage = "Namespace object(s) (YAML or JSON; several documents or a List): a namespace given is decided with its labels; every other namespace with every assignment of the labels the policies name (repeatable)"
	f.Lookup("policies").Usage = "with --cluster or --policy-objects only: policy files that join the cluster's (or the objects') policies on the OLD side, as kcedar serve would load them beside the objects; NEW is always the argument (repeatable)"
	f.StringSliceVar(&o.failOn, "fail-on", []string{changeGained}, "kinds of change that make --exit-code exit 3: gained, lost, conditional (comma-separated or repeated)")
}

// Complete splits the arguments into OLD and NEW and lets --cluster fill
// in the schema source.
func (o *diffOptions) Complete(args []string) {
	o.args = args
	o.pol.Complete(&o.src)
	switch {
	case o.pol.usesObjects() && len(args) == 1:
		o.newPaths = args
	case !o.pol.usesObjects() && len(args) == 2:
		o.oldPaths, o.newPaths = args[:1], args[1:]
	}
}

// Validate refuses a wrong number of arguments, an unknown --output or
// --fail-on kind and conflicting sources; its errors exit 2.
func (o *diffOptions) Validate() error {
	if len(o.newPaths) == 0 {
		if o.pol.usesObjects() {
			return &exitError{2, fmt.Errorf("with --cluster or --policy-objects give NEW alone (got %d arguments)", len(o.args))}
		}
		return &exitError{2, fmt.Errorf("give OLD and NEW (got %d arguments)", len(o.args))}
	}
	if len(o.pol.policies) > 0 && !o.pol.usesObjects() {
		return &exitError{2, fmt.Errorf("--policies joins --cluster or --policy-objects; without them give OLD as an argument")}
	}
	if !slices.Contains([]string{"table", "json", "markdown"}, o.output) {
		return &exitError{2, fmt.Errorf("--output must be table, json or markdown, not %q", o.output)}
	}
	for _, k := range o.failOn {
		if !slices.Contains([]string{changeGained, changeLost, changeConditional}, k) {
			return &exitError{2, fmt.Errorf("--fail-on takes gained, lost or conditional, not %q", k)}
		}
	}
	if err := o.pol.Validate(""); err != nil {
		return &exitError{2, err}
	}
	return nil
}

// Run loads both sets, compares them and reports on w; the returned error
// carries the exit code.
func (o *diffOptions) Run(ctx context.Context, w, errw io.Writer) error {
	checker, err := loadChecker(ctx, o.src)
	if err != nil {
		return err
	}
	var oldSet *cedarlang.PolicySet
	if o.pol.usesObjects() {
		oldSet, err = o.pol.policySet(ctx, errw, checker, o.pol.policies)
	} else {
		oldSet, err = loadPolicySet(errw, checker, o.oldPaths)
	}
	if err != nil {
		return err
	}
	newSet, err := loadPolicySet(errw, checker, o.newPaths)
	if err != nil {
		return err
	}
	ns, err := readNamespaceObjects(o.nsObjs)
	if err != nil {
		return &exitError{2, err}
	}
	rep := newDiffReport(diff.CompareWith(checker.Schema, oldSet, newSet, diff.Options{Namespaces: ns}))
	switch o.output {
	case "json":
		err = writeJSON(w, rep)
	case "markdown":
		err = writeDiffMarkdown(w, rep, o.all)
	default:
		err = writeDiffTable(w, rep, o.all)
	}
	if err != nil {
		return &exitError{2, err}
	}
	if n := rep.failing(o.failOn); o.exitCode && n > 0 {
		return &exitError{3, fmt.Errorf("%s of the kinds --fail-on names (%s)", plural(n, "changed region"), strings.Join(o.failOn, ", "))}
	}
	return nil
}

// diffReport is the -o json document (documented in diffLong).
type diffReport struct {
	Changed bool         `json:"changed"`
	Decided int          `json:"decided"`
	Removed []string     `json:"removedPolicies"`
	Added   []string     `json:"addedPolicies"`
	Edited  []string     `json:"editedPolicies"`
	Inexact []string     `json:"inexact,omitempty"`
	Regions []diffRegion `json:"regions"`
}

// diffRegion is a region with its kind and its resources' kubectl-style
// names.
type diffRegion struct {
	Kind      string   `json:"kind"`
	Resources []string `json:"resources"`
	diff.Region
}

func newDiffReport(res *diff.Result) *diffReport {
	rep := &diffReport{Changed: len(res.Regions) > 0, Decided: res.Decided, Inexact: res.Inexact, Regions: []diffRegion{}}
	// A policy of the same id on both sides whose text differs is edited.
	for _, id := range res.Removed {
		if slices.Contains(res.Added, id) {
			rep.Edited = append(rep.Edited, id)
		} else {
			rep.Removed = append(rep.Removed, id)
		}
	}
	for _, id := range res.Added {
		if !slices.Contains(rep.Edited, id) {
			rep.Added = append(rep.Added, id)
		}
	}
	rep.Removed, rep.Added, rep.Edited = nonNil(rep.Removed), nonNil(rep.Added), nonNil(rep.Edited)
	for _, g := range res.Regions {
		r := diffRegion{Kind: changeKind(g), Region: g}
		for _, t := range g.Targets {
			r.Resources = append(r.Resources, kubectlName(t))
		}
		rep.Regions = append(rep.Regions, r)
	}
	return rep
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// decisionRank orders decisions by the access they give.
var decisionRank = map[string]int{"Deny": 0, "NoOpinion": 1, "Conditional": 2, "Allow": 3}

// changeKind is the kind of a region's change.
func changeKind(g diff.Region) string {
	from, okFrom := decisionRank[g.Change.From]
	to, okTo := decisionRank[g.Change.To]
	switch {
	case !g.Exact || !okFrom || !okTo:
		return changeInexact
	case to > from:
		return changeGained
	case to < from:
		return changeLost
	case g.MayWiden:
		return changeGained
	}
	return changeConditional
}

// failing counts the regions of the kinds in kinds (a region not decided
// exactly counts as every kind).
func (r *diffReport) failing(kinds []string) int {
	n := 0
	for _, g := range r.Regions {
		if g.Kind == changeInexact || slices.Contains(kinds, g.Kind) {
			n++
		}
	}
	return n
}

// isAny reports whether the region holds every value of dimension dim
// (diff.Region.Any).
func (g diffRegion) isAny(dim string) bool { return slices.Contains(g.Any, dim) }

// kubectlName is a target as kubectl names it: pods, deployments.apps,
// pods/exec; a non-resource URL by its path; a resource standing for the
// others of its shape as such.
func kubectlName(t diff.Target) string {
	if t.EntityType == string(schemagen.NonResourceURLType) {
		return shown(t.Path, "any path", "any other path")
	}
	if t.Others {
		what := "cluster-scoped"
		if t.Namespaced {
			what = "namespaced"
		}
		if t.Subresource != "" {
			return fmt.Sprintf("any other %s resource's subresource (as %s/%s)", what, t.Resource, shown(t.Subresource, "", "any other"))
		}
		return fmt.Sprintf("any other %s resource (as %s)", what, t.Resource)
	}
	name := shown(t.Resource, "", "any other resource")
	if t.APIGroup != "" {
		name += "." + shown(t.APIGroup, "", "(any other group)")
	}
	if t.Subresource != "" {
		name += "/" + shown(t.Subresource, "", "(any other subresource)")
	}
	return name
}

// shown is a value as the views show it: other for a fresh value (one
// that stands for any value no policy names), empty as empty says.
func shown(v, empty, other string) string {
	switch {
	case v == "":
		return empty
	case diff.IsOther(v):
		return other
	}
	return v
}

// verbItems are a region's verbs: "any verb" where the change holds for
// every one.
func verbItems(g diffRegion) []string {
	if g.isAny(diff.AnyVerb) {
		return []string{"any verb"}
	}
	out := make([]string, len(g.Verbs))
	for i, v := range g.Verbs {
		out[i] = shown(v, "", "any other verb")
		if v == "*" {
			out[i] = `"*" (every verb at once)`
		}
	}
	return out
}

// namespaceItems are a region's namespaces: "(all namespaces)" for a
// request of a namespaced resource across namespaces, "(no namespace)" for
// one of a cluster-scoped resource.
func namespaceItems(g diffRegion) []string {
	open := "(all namespaces)"
	switch namespaced := slices.ContainsFunc(g.Targets, func(t diff.Target) bool { return t.Namespaced }); {
	case !namespaced:
		open = "(no namespace)"
	case slices.ContainsFunc(g.Targets, func(t diff.Target) bool { return !t.Namespaced }):
		open = "(all namespaces, or none)"
	}
	out := make([]string, len(g.Namespaces))
	for i, v := range g.Namespaces {
		out[i] = shown(v, open, "any other namespace")
	}
	return out
}

// nameItems are a region's names: "(none)" for no name, "N (field
// selector)" for a list or watch whose field selector names N.
func nameItems(vs []string) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		if n, ok := strings.CutPrefix(v, "metadata.name="); ok {
			out[i] = shown(n, "", "any other name") + " (field selector)"
			continue
		}
		out[i] = shown(v, "(none)", "any other name")
	}
	return out
}

// labelsText is a namespace-label world in words: a label selector (k=v,
// !k for a label absent), "unknown namespace", "no labels", "other labels".
func labelsText(world string) string {
	switch world {
	case "(unknown)":
		return "unknown namespace"
	case "(no labels)", "(other labels)":
		return strings.Trim(world, "()")
	}
	parts := strings.Split(world, ",")
	for i, p := range parts {
		if k, v, ok := strings.Cut(p, "="); ok && diff.IsOther(v) {
			parts[i] = k + "=(any other value)"
		}
	}
	return strings.Join(parts, ",")
}

// subjectText is a region's subject in words: who, then the groups it is
// in and not in.
func subjectText(s diff.Subject) string {
	text := principalText(s)
	switch {
	case len(s.InGroups) > 0 && s.Kind == diff.KindAnyone:
		text = "members of " + strings.Join(s.InGroups, " and ")
	case len(s.InGroups) > 0:
		text += " in " + strings.Join(s.InGroups, " and ")
	}
	if len(s.InGroups) > 0 && len(s.NotIn) > 0 {
		text += ","
	}
	switch len(s.NotIn) {
	case 0:
	case 1:
		text += " not in " + s.NotIn[0]
	default:
		text += " in none of " + strings.Join(s.NotIn, ", ")
	}
	return text
}

// principalText is who a subject is, without its groups.
func principalText(s diff.Subject) string {
	nsOther, nameOther := diff.IsOther(s.Namespace), diff.IsOther(s.Name)
	switch {
	case s.Kind == diff.KindAnyone:
		return "anyone"
	case s.All && s.Kind == diff.KindServiceAccount && s.Namespace != "":
		return "every serviceaccount of " + shown(s.Namespace, `""`, "any other namespace")
	case s.All:
		return "any " + s.Kind
	case s.Kind == diff.KindServiceAccount && nsOther && nameOther:
		return "any other serviceaccount"
	case s.Kind == diff.KindServiceAccount && nameOther:
		return "any other serviceaccount of " + s.Namespace
	case s.Kind == diff.KindServiceAccount && nsOther:
		return "serviceaccount " + s.Name + " of any other namespace"
	case s.Kind == diff.KindServiceAccount:
		return "serviceaccount " + s.Namespace + ":" + s.Name
	case s.Kind == diff.KindUser && strings.HasPrefix(s.Name, schemagen.NodeUserPrefix):
		node := strings.TrimPrefix(s.Name, schemagen.NodeUserPrefix)
		return "user " + schemagen.NodeUserPrefix + shown(node, "", "<any other>") + " (outside system:nodes)"
	case nameOther:
		return "any other " + s.Kind
	}
	return s.Kind + " " + shown(s.Name, `""`, "")
}

// exampleValue is a value of an example: <another K> for a fresh value.
func exampleValue(v, k string) string {
	return shown(v, "", "<another "+k+">")
}

// exampleUser is an example's username, <another ...> for its fresh
// parts: a user, a ServiceAccount's namespace and name, a node's name.
func exampleUser(u string) string {
	if ns, name, ok := entities.ServiceAccountName(u); ok {
		return schemagen.ServiceAccountUserPrefix + exampleValue(ns, "ns") + ":" + exampleValue(name, "name")
	}
	if node, ok := strings.CutPrefix(u, schemagen.NodeUserPrefix); ok {
		return schemagen.NodeUserPrefix + exampleValue(node, "name")
	}
	return exampleValue(u, "user")
}

// exampleText is an example request in one line.
func exampleText(e *diff.Example) string {
	if e == nil {
		return ""
	}
	var b strings.Builder
	b.WriteString(exampleUser(e.User))
	if len(e.Groups) > 0 {
		fmt.Fprintf(&b, " (groups %s)", strings.Join(e.Groups, ","))
	}
	fmt.Fprintf(&b, " %s ", exampleValue(e.Verb, "verb"))
	if e.Path != "" {
		b.WriteString(exampleValue(e.Path, "path"))
		return b.String()
	}
	b.WriteString(kubectlName(diff.Target{APIGroup: e.APIGroup, Resource: e.Resource, Subresource: e.Subresource}))
	switch {
	case e.NameFromSelector:
		b.WriteString(" --field-selector metadata.name=" + exampleValue(e.Name, "name"))
	case e.Name != "":
		b.WriteString(" " + exampleValue(e.Name, "name"))
	}
	if e.Namespace != "" {
		b.WriteString(" -n " + exampleValue(e.Namespace, "namespace"))
	}
	if e.NamespaceLabels != "" {
		b.WriteString(" (namespace: " + labelsText(e.NamespaceLabels) + ")")
	}
	return b.String()
}
