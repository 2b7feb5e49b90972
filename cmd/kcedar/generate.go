package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/tools/generate"
	"github.com/kcedar/kcedar/internal/tools/replay"
)

func init() { rootCmd.AddCommand(newGenerateCmd()) }

// generateOptions are kcedar generate's flags.
type generateOptions struct {
	src        schemaSource
	pol        policySourceOptions
	auditLogs  []string
	groups     []string
	system     bool
	names      string
	maxNames   int
	generalize string
	reach      replayReachOptions
	// includeRBACAllowed generates requests RBAC allows too.
	includeRBACAllowed bool
	outputDir          string
	format             string
	audit              bool
	maxLineBytes       int
}

const generateLong = `Write least-privilege Cedar policies from kube-apiserver audit logs: what the
logs show was used, and nothing else. Each request is read as kcedar replay
reads it (audit.k8s.io/v1 Event JSON lines, gzipped or not; - is stdin; the
request rebuilt from requestURI and verb as the authorizer saw it, as the
impersonated user where there is one).

Only requests the cluster allowed (authorization.k8s.io/decision: allow)
become grants. Per subject (the user or ServiceAccount, or with
--group-subject the first of those groups the user is in), the verbs on one
resource in a set of namespaces with the same names become one permit. A
request names an object only where authorization saw one: a create of a
top-level object, a list, a watch and a deletecollection name none, and
their permit allows every name.

Names (--names):
  exact  list every name the requests named
  auto   list them up to --max-names distinct names per verb, resource and
         namespace; above that, allow every name (the default)
  any    allow every name
Names with a generated part (--generalize-names auto, the default) are
written as like patterns within their namespace: a generateName suffix
(build-x7k2p: build-*), a Deployment's pod (web-5d8f7c9b6-x7k2p: web-*-*),
a pod-template hash (web-5d8f7c9b6: web-*), and in a group's grant the
member's own username (alice-workspace: *-workspace); each policy's comment
shows them. --generalize-names none writes names as requested.
Widening never covers a logged forbidden request: where every name, a
pattern (or a group subject) would allow a request the same subject was
forbidden, the names stay listed as requested (and the group's grant is
written per member). Every policy is checked against a request of each
forbidden permission before it is written.

With --policies, --policy-objects or --cluster (the policies already in
force), requests they allow are not generated: the output is only what is
missing. Requests they allow on conditions (on the object, enforced in
admission) are not generated either, and no policy is written that would
allow one of them without its conditions.

Left out, and counted in the output's first comment:
  - what kcedar never sees: system:masters members' requests, and those the
    matchConditions of kcedar's webhook authorizer exclude (from
    --authorization-config; by default those kcedar manifests writes:
    kcedar's own ServiceAccount, nodes, kube-system ServiceAccounts, the
    control plane), as kcedar replay leaves them out;
  - what RBAC already allows the requester (kube-apiserver asks it after
    kcedar): with --cluster the cluster's RBAC, else the bootstrap grants
    to every user (discovery, /version, /healthz..., self reviews);
    --include-rbac-allowed generates them;
  - unless --include-system, the system identities kcedar sees: the
    control plane (system:apiserver, system:kube-controller-manager,
    system:kube-scheduler), nodes and kube-system ServiceAccounts.

Output: Cedar on stdout, laid out as kcedar fmt lays it out, each policy with
an @id (generated/<subject>/<resource>-<verbs>) and a comment with its
evidence (requests, first and last seen); with -o DIR one file per subject.
--output-format policy-objects writes policy objects instead: per subject,
a NamespacedCedarPolicy in each namespace that bounds some of its policies,
and a CedarPolicy for the rest. --audit annotates every policy
@enforcement("audit"), to roll them out in audit mode first.

Exit status: 0 done, 1 invalid existing policies, 2 usage or I/O error.`

func newGenerateCmd() *cobra.Command {
	var o generateOptions
	cmd := &cobra.Command{
		Use:   "generate --audit-log FILE... [--policies DIR | --policy-objects FILE | --cluster]... [-o DIR]",
		Short: "Write least-privilege policies from audit logs: what was used and is not allowed yet",
		Long:  generateLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.pol.Complete(&o.src)
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

// AddFlags registers the flags on f.
func (o *generateOptions) AddFlags(f *pflag.FlagSet) {
	o.src.AddFlags(f)
	o.pol.AddFlags(f, true)
	f.StringArrayVar(&o.auditLogs, "audit-log", nil, "kube-apiserver audit log: audit.k8s.io/v1 or v1beta1 Event JSON lines, gzipped or not (repeatable; - for stdin)")
	f.StringArrayVar(&o.groups, "group-subject", nil, "write policies for this group instead of its members (repeatable; a user is written as the first group given they are in)")
	f.BoolVar(&o.system, "include-system", false, "include system identities (the control plane, nodes, kube-system ServiceAccounts; never system:masters members)")
	f.StringVar(&o.names, "names", string(generate.NamesAuto), "exact: list every name; auto: list up to --max-names names, else every name; any: every name")
	f.IntVar(&o.maxNames, "max-names", generate.DefaultMaxNames, "with --names auto, the most distinct names listed per subject, verb, resource and namespace")
	f.StringVar(&o.generalize, "generalize-names", string(generate.GeneralizeAuto), "auto: write names with a generated part (build-x7k2p, a pod-template hash) or, in a group's grant, the member's username as like patterns within their namespace; none: as requested")
	f.BoolVar(&o.includeRBACAllowed, "include-rbac-allowed", false, "also generate requests RBAC allows the requester (by default left out: the cluster's RBAC with --cluster, else the bootstrap grants to every user)")
	o.reach.AddFlags(f)
	f.StringVarP(&o.outputDir, "output-dir", "o", "", "write one file per subject into this directory instead of stdout")
	f.StringVar(&o.format, "output-format", "cedar", "cedar, or policy-objects (CedarPolicy and NamespacedCedarPolicy YAML)")
	f.BoolVar(&o.audit, "audit", false, `annotate every policy @enforcement("audit"): evaluated and logged, never deciding`)
	f.IntVar(&o.maxLineBytes, "max-line-bytes", replay.DefaultMaxLineBytes, "longest line read; longer lines are skipped")
}

// Validate checks the flags; errors are usage errors (exit 2).
func (o *generateOptions) Validate() error {
	switch generate.Names(o.names) {
	case generate.NamesExact, generate.NamesAuto, generate.NamesAny:
	default:
		return &exitError{2, fmt.Errorf("--names must be exact, auto or any, not %q", o.names)}
	}
	if o.maxNames < 1 {
		return &exitError{2, errors.New("--max-names must be at least 1")}
	}
	switch generate.Generalize(o.generalize) {
	case generate.GeneralizeAuto, generate.GeneralizeNone:
	default:
		return &exitError{2, fmt.Errorf("--generalize-names must be auto or none, not %q", o.generalize)}
	}
	if o.format != "cedar" && o.format != "policy-objects" {
		return &exitError{2, fmt.Errorf("--output-format must be cedar or policy-objects, not %q", o.format)}
	}
	return validateAuditLogInputs(o.auditLogs, o.maxLineBytes, &o.pol)
}

// Run loads the schema and the existing policies, reads the logs and
// writes the policies.
func (o *generateOptions) Run(ctx context.Context, stdout, stderr io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	checker, err := loadChecker(ctx, o.src)
	if err != nil {
		return err
	}
	var existing *cedarlang.PolicySet
	if len(o.pol.policies) > 0 || o.pol.usesObjects() {
		if existing, err = o.pol.policySet(ctx, stderr, checker, o.pol.policies); err != nil {
			return err
		}
	}
	reach, err := o.reach.reach()
	if err != nil {
		return &exitError{2, err}
	}
	rbac, rbacSource, err := o.generateRBAC(ctx, checker.Schema, stderr)
	if err != nil {
		return err
	}
	g := generate.New(checker.Schema, generate.Options{Existing: existing, Reach: reach, RBAC: rbac, RBACSource: rbacSource,
		GroupSubjects: o.groups, IncludeSystem: o.system, Names: generate.Names(o.names), MaxNames: o.maxNames,
		Generalize: generate.Generalize(o.generalize), SplitNamespaces: o.format == "policy-objects", Audit: o.audit})
	if err := o.readLogs(ctx, g, stderr); err != nil {
		return err
	}
	res, err := g.Policies()
	if err != nil {
		return err
	}
	for _, w := range res.Outcome.Skipped {
		fmt.Fprintln(stderr, "warning:", w)
	}
	return o.write(stdout, stderr, res)
}

// readLogs folds every --audit-log in, in order, with a progress line on
// a terminal; an unreadable or cut-short log is an I/O error (exit 2).
func (o *generateOptions) readLogs(ctx context.Context, g *generate.Generator, stderr io.Writer) error {
	var show func()
	if f, ok := stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		var last time.Time
		show = func() {
			if time.Since(last) >= 500*time.Millisecond {
				last = time.Now()
				s := g.Stats()
				fmt.Fprintf(stderr, "\r\033[Kgenerate: %d requests (%d allowed, %d forbidden)", s.Requests, s.Allowed, s.Forbidden)
			}
		}
		defer fmt.Fprint(stderr, "\r\033[K")
	}
	add := func(recs []replay.Record) error {
		batch := make([]generate.Input, len(recs))
		for i, r := range recs {
			batch[i] = generate.Input{Request: r.Request, Allowed: r.Allowed, Time: r.Time, Review: r.Review}
		}
		g.Add(batch)
		if show != nil {
			show()
		}
		return nil
	}
	for _, path := range o.auditLogs {
		if err := readRecords(ctx, path, o.maxLineBytes, add); err != nil {
			return &exitError{2, fmt.Errorf("%s: %w", path, err)}
		}
	}
	return nil
}

// readRecords reads the records of one log file, or stdin for "-".
func readRecords(ctx context.Context, path string, maxLine int, fn func([]replay.Record) error) error {
	in := io.Reader(os.Stdin)
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	_, err := replay.ReadRecords(ctx, in, maxLine, fn)
	return err
}

// write writes the result: on stdout, or one file per subject in the
// output directory (with the counts on stderr).
func (o *generateOptions) write(stdout, stderr io.Writer, res *generate.Result) error {
	names := generatedObjectNames(res.Subjects)
	if o.outputDir == "" {
		if o.format == "policy-objects" {
			return writePolicyObjects(stdout, res.Subjects, names, headerLines(res.Text))
		}
		_, err := stdout.Write(res.Text)
		return err
	}
	if err := os.MkdirAll(o.outputDir, 0o755); err != nil {
		return &exitError{2, err}
	}
	fmt.Fprint(stderr, headerLines(res.Text))
	for i, s := range res.Subjects {
		base := names[i]
		var data strings.Builder
		var name string
		if o.format == "policy-objects" {
			name = base + ".yaml"
			if err := writePolicyObjects(&data, []generate.SubjectPolicies{s}, names[i:i+1], ""); err != nil {
				return err
			}
		} else {
			name = base + ".cedar"
			data.Write(s.Text)
		}
		if err := os.WriteFile(filepath.Join(o.outputDir, name), []byte(data.String()), 0o644); err != nil {
			return &exitError{2, err}
		}
	}
	return nil
}

// headerLines are the leading comment lines of the text.
func headerLines(text []byte) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(string(text), "\n") {
		if !strings.HasPrefix(l, "//") {
			break
		}
		b.WriteString(l)
	}
	return b.String()
}
