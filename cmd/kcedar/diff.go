package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/lib/safetext"
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
are enumerated, one representative per class of values the policies cannot
tell apart, and decided with both sets. A region is every combination of its
verbs, resources, namespaces and names made by its subject. "any other
verb" (user, namespace, name, ...) stands for any value no policy names
there, "(all)" for an open namespace (a request across namespaces) and
"(none)" for a request without a name; an example shows such a value as
<another verb>. A subject's groups are those the policies name there: "in"
groups it must be in, "not in" groups it must not be in, any others do not
matter. Where the method cannot decide exactly (principal uid or extra,
label selectors where a changed policy reads the object, many groups) it
says so and names the construct: it never reports no change where one may
exist.

A policy that reads the namespace's labels (resource.namespaceObject) is
decided in every namespace-label world: the namespace unknown, without
labels, and every assignment of the label keys the policies name; regions
list them (namespaceLabels, "labelled" in the table). --namespace-object
decides the namespaces it gives with their own labels. A name from a field
selector (a list or watch pinned to metadata.name=N: resource.named is
false) is its own name class where a policy reads resource.named. A list or
watch with a label selector is not decided exactly where a changed policy
reads resource.object.

Output (-o): table (the default); markdown, for a pull-request comment; json,
a stable document:
  changed          true when any region is reported
  removedPolicies  ids of OLD's policies whose id is not in NEW
  addedPolicies    ids of NEW's policies whose id is not in OLD
  editedPolicies   ids on both sides whose access text differs
  inexact          the constructs not decided exactly (absent when none)
  regions[]        each with:
    kind           gained, lost, conditional or inexact
    subject        {kind: user|serviceaccount|node|anyone, namespace, name,
                    inGroups, notInGroups}
    verbs          verbs ("*" is a request for every verb)
    resources      kubectl-style names (pods, deployments.apps, pods/exec)
                   or non-resource paths
    targets        the same as {entityType, apiGroup, resource, subresource, path}
    namespaces     namespaces ("" an open namespace)
    names          names ("" no name; "metadata.name=N" a request whose
                   field selector names N)
    namespaceLabels  the namespace-label worlds: label selectors (k=v, !k
                   absent), "(unknown)", "(no labels)", "(other labels)";
                   absent where no policy reads the namespace's labels
    change         {from, to}: Allow, Deny, NoOpinion or Conditional
    example        one request of the region: {user, groups, verb, apiGroup,
                   resource, subresource, namespace, name, path}
    oldPolicies    the policies deciding the example with OLD
    newPolicies    the policies deciding it with NEW
    exact          false where the region was not decided exactly
    mayWiden       conditional before and after, and the new conditions
                   may allow an object the old ones do not (kind gained)
    note           what is special about the region

--exit-code makes the exit status 3 when a region has a kind --fail-on names
(default gained: anything to Allow, Deny to anything weaker, NoOpinion to
Conditional, and Conditional to Conditional unless every new allow condition
was an old one and every old deny condition is a new one: a widened or
reworded condition counts as gained). conditional is a Conditional to
Conditional change proven no wider. A region not decided exactly counts as
every kind. In the table, "any other verb", "any other user", ... stand for
any value no policy names; in -o json those values begin with
"kcedar-other".

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
		err = writeDiffMarkdown(w, rep)
	default:
		err = writeDiffTable(w, rep)
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
	rep := &diffReport{Changed: len(res.Regions) > 0, Inexact: res.Inexact, Regions: []diffRegion{}}
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

// kubectlName is a target as kubectl names it: pods, deployments.apps,
// pods/exec; a non-resource URL by its path.
func kubectlName(t diff.Target) string {
	if t.EntityType == string(schemagen.NonResourceURLType) {
		return shown(t.Path, "", "any other path")
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

// shown is a value as the table shows it: other for a fresh value (one
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

// shownList is shown over a list, comma-separated.
func shownList(vs []string, empty, other string) string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = shown(v, empty, other)
	}
	return strings.Join(out, ",")
}

// shownNames are a region's names: "(none)" for no name, "N (field
// selector)" for a list or watch whose field selector names N.
func shownNames(vs []string) string {
	out := make([]string, len(vs))
	for i, v := range vs {
		if n, ok := strings.CutPrefix(v, "metadata.name="); ok {
			out[i] = shown(n, "", "any other name") + " (field selector)"
			continue
		}
		out[i] = shown(v, "(none)", "any other name")
	}
	return strings.Join(out, ",")
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

// namespacesText is a region's namespaces, with their labels where the
// policies read them.
func namespacesText(g diffRegion) string {
	text := shownList(g.Namespaces, "(all)", "any other namespace")
	if len(g.NamespaceLabels) == 0 {
		return text
	}
	worlds := make([]string, len(g.NamespaceLabels))
	for i, w := range g.NamespaceLabels {
		worlds[i] = labelsText(w)
	}
	return text + " labelled " + strings.Join(worlds, " or ")
}

// subjectText is a region's subject in words.
func subjectText(s diff.Subject) string {
	var b strings.Builder
	nsOther, nameOther := diff.IsOther(s.Namespace), diff.IsOther(s.Name)
	switch {
	case s.Kind == diff.KindAnyone:
		b.WriteString("anyone")
	case s.Kind == diff.KindServiceAccount && nsOther && nameOther:
		b.WriteString("any other serviceaccount")
	case s.Kind == diff.KindServiceAccount && nameOther:
		fmt.Fprintf(&b, "any other serviceaccount in %s", shown(s.Namespace, `""`, ""))
	case s.Kind == diff.KindServiceAccount && nsOther:
		fmt.Fprintf(&b, "serviceaccount %s in any other namespace", shown(s.Name, `""`, ""))
	case s.Kind == diff.KindServiceAccount:
		fmt.Fprintf(&b, "serviceaccount %s:%s", shown(s.Namespace, `""`, ""), shown(s.Name, `""`, ""))
	case nameOther:
		fmt.Fprintf(&b, "any other %s", s.Kind)
	default:
		fmt.Fprintf(&b, "%s %s", s.Kind, shown(s.Name, `""`, ""))
	}
	if len(s.InGroups) > 0 {
		fmt.Fprintf(&b, " in %s", strings.Join(s.InGroups, ","))
	}
	if len(s.NotIn) > 0 {
		fmt.Fprintf(&b, " not in %s", strings.Join(s.NotIn, ","))
	}
	return b.String()
}

// exampleValue is a value of an example: <another K> for a fresh value.
func exampleValue(v, k string) string {
	return shown(v, "", "<another "+k+">")
}

// exampleText is an example request in one line.
func exampleText(e *diff.Example) string {
	if e == nil {
		return ""
	}
	var b strings.Builder
	b.WriteString(exampleValue(e.User, "user"))
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

// policiesText is the policies on each side: "old → new".
func policiesText(g diff.Region) string {
	side := func(ids []string) string {
		if len(ids) == 0 {
			return "-"
		}
		return strings.Join(ids, ",")
	}
	return side(g.OldPolicies) + " → " + side(g.NewPolicies)
}

// regionCells are a region's table cells, in the order of diffColumns.
func regionCells(g diffRegion) []string {
	change := g.Change.From + "→" + g.Change.To
	if g.Note != "" {
		change += " (" + g.Note + ")"
	}
	names := shownNames(g.Names)
	if len(g.Names) == 1 && diff.IsOther(g.Subject.Name) && g.Names[0] == g.Subject.Name {
		names = "(the subject's name)"
	}
	return []string{change, subjectText(g.Subject), shownList(g.Verbs, "", "any other verb"), strings.Join(g.Resources, ","),
		namespacesText(g), names, policiesText(g.Region), exampleText(g.Example)}
}

// tableRows are the regions' cells, one row per change that reads the same
// but for its subject and example: the subjects are listed together (at
// most maxSubjectsShown, then a count; -o json has every region), and the
// first region's example stands for the row.
func tableRows(r *diffReport) [][]string {
	var out [][]string
	var subjects [][]string
	row := map[string]int{}
	for _, g := range r.Regions {
		cells := regionCells(g)
		key := strings.Join(append(slices.Clone(cells[:1]), cells[2:len(cells)-1]...), "\x00")
		i, seen := row[key]
		if !seen {
			i = len(out)
			row[key] = i
			out = append(out, cells)
			subjects = append(subjects, nil)
		}
		if !slices.Contains(subjects[i], cells[1]) {
			subjects[i] = append(subjects[i], cells[1])
		}
	}
	for i, subs := range subjects {
		out[i][1] = strings.Join(subs[:min(len(subs), maxSubjectsShown)], "; ")
		if len(subs) > maxSubjectsShown {
			out[i][1] += fmt.Sprintf("; and %d more", len(subs)-maxSubjectsShown)
		}
	}
	return out
}

// maxSubjectsShown bounds the subjects a table row lists.
const maxSubjectsShown = 4

var diffColumns = []string{"CHANGE", "SUBJECT", "VERBS", "RESOURCES", "NAMESPACES", "NAMES", "POLICIES (OLD → NEW)", "EXAMPLE"}

// summary is the report's closing line, each construct not decided
// exactly (policy text) rendered by name.
func (r *diffReport) summary(name func(string) string) string {
	var counts []string
	for _, c := range []struct {
		n    int
		what string
	}{{len(r.Edited), "edited"}, {len(r.Removed), "removed"}, {len(r.Added), "added"}} {
		if c.n > 0 {
			counts = append(counts, fmt.Sprintf("%d %s", c.n, c.what))
		}
	}
	policies := "policies: " + strings.Join(counts, ", ")
	if len(counts) == 0 {
		policies = "no policy changed"
	}
	if !r.Changed {
		return fmt.Sprintf("no change in access (%s)", policies)
	}
	s := fmt.Sprintf("%s changed (%s)", plural(len(r.Regions), "region"), policies)
	if len(r.Inexact) > 0 {
		inexact := make([]string, len(r.Inexact))
		for i, c := range r.Inexact {
			inexact[i] = name(c)
		}
		s += "; not decided exactly: " + strings.Join(inexact, ", ")
	}
	return s
}

// writeDiffTable writes the report as a table for a terminal. Every cell
// holds names from the policies (subjects, groups, namespaces, names,
// policy ids): each is escaped (safetext.Terminal), so none can add a
// column or a row, or act on the terminal.
func writeDiffTable(w io.Writer, r *diffReport) error {
	if r.Changed {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, strings.Join(diffColumns, "\t"))
		for _, cells := range tableRows(r) {
			for i, c := range cells {
				cells[i] = safetext.Terminal(c)
			}
			fmt.Fprintln(tw, strings.Join(cells, "\t"))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintln(w, r.summary(safetext.Terminal))
	return err
}

// writeDiffMarkdown writes the report as a pull-request comment. Every cell,
// and every construct the summary names, is inline code that no character
// of a name can break out of (safetext.MarkdownCode): a pipe cannot split
// the cell, a newline end the row, a backtick, tag or link add structure.
func writeDiffMarkdown(w io.Writer, r *diffReport) error {
	var b strings.Builder
	b.WriteString("### kcedar diff\n\n")
	b.WriteString(r.summary(safetext.MarkdownCode) + "\n")
	if r.Changed {
		b.WriteString("\n| " + strings.Join(diffColumns, " | ") + " |\n|" + strings.Repeat(" --- |", len(diffColumns)) + "\n")
		for _, cells := range tableRows(r) {
			for i, c := range cells {
				cells[i] = safetext.MarkdownCode(c)
			}
			b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
