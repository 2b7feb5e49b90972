package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/lib/safetext"
	"github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/tools/offline"
	"github.com/kcedar/kcedar/internal/tools/replay"
	"github.com/kcedar/kcedar/internal/upstream"
)

func init() { rootCmd.AddCommand(newReplayCmd()) }

// replayOptions are kcedar replay's flags.
type replayOptions struct {
	src schemaSource
	pol policySourceOptions
	// auditLogs are the --audit-log files ("-" for stdin).
	auditLogs []string
	// namespaceObjects is the --namespace-objects file.
	namespaceObjects string
	output           string
	changes          bool
	exitCode         bool
	maxLineBytes     int
	reach            replayReachOptions
	chain            chainOptions

	// collected are the changed requests kept for -o text and json with
	// --changes.
	collected []replay.Change
}

const replayLong = `Read kube-apiserver audit logs (audit.k8s.io/v1 or v1beta1 Event JSON lines,
gzipped or not; - is stdin; Azure kube-audit diagnostic records are
unwrapped) and decide every request again with the policies, as kcedar serve
would, comparing with what happened: the authorization.k8s.io/decision
annotation (the answer of the whole authorizer chain), or, in logs written
before Kubernetes 1.11 added it, the response code (a hint: 2xx means
authorized, 403 may be admission's). Lines that are JSON but no audit event
(GKE Cloud Audit Log records, anything else) are counted apart, by what they
are.

Each request is decided once, at its ResponseComplete or Panic event, or at
its ResponseStarted event when no ResponseComplete follows (a watch still
open, exec, attach, port-forward), paired by auditID. Requests kcedar never
sees are left out and counted: those of system:masters members, and those
the matchConditions of kcedar's webhook authorizer exclude (from
--authorization-config; by default the ones kcedar manifests writes).

The request is rebuilt as the authorizer saw it: from
requestURI and verb, with kube-apiserver's own request-info resolver (not
from objectRef: a create's name was not authorized), as the impersonated user
where there is one. A decision that needs namespaceObject needs
--namespace-objects; without the namespace it is undecidable. A conditional
decision is evaluated against the logged object only for a create logged at
Request level or above; otherwise it is reported as conditional.

Requests are decided as kube-apiserver's authorizer chain decides them,
in the order of the AuthorizationConfiguration (--authorization-config;
kcedar manifests writes kcedar first, then RBAC): kcedar's Allow or Deny is
final, and on its NoOpinion RBAC decides. With --cluster the cluster's RBAC
is read and converted (as kcedar rbac convert does); --rbac FILE takes RBAC
objects (files or directories, as kubectl get -o yaml prints them);
--kcedar-only decides with kcedar alone (without RBAC, NoOpinion counts as
not allowed, as if kcedar were the last authorizer). Passing the output of
kcedar rbac convert with -p also composes: RBAC only grants, so one set of
both decides as the chain does without admission enforcement.

--mode says how kcedar serve answers a decision left to admission: none
(folded: Deny if a deny condition remains, else NoOpinion, then RBAC),
admission-enforcement (kcedar serve --admission-enforcement: a conditional
allow on a write is Allow, as the decision annotation records it), or
conditions-review (Kubernetes 1.38 conditional authorization: the
annotation records the decision after admission, so the conditions are
evaluated against the logged object). By default: conditions-review when
the kcedar webhook of --authorization-config sets conditionsReview,
admission-enforcement when the cluster (--cluster) has kcedar's
ValidatingWebhookConfiguration, else none. The summary says which chain
and mode decided.

allow that becomes Deny or NoOpinion is newly denied; forbid that becomes
Allow is newly allowed.

Exit status: 0 done, 1 invalid policies, 2 usage or I/O error (a log that
cannot be opened or read to its end: a directory, a missing file, a
truncated gzip stream; the summary of what was read is printed first), 3
with --exit-code when a request is newly denied or newly allowed (2 wins
over 3).`

func newReplayCmd() *cobra.Command {
	var o replayOptions
	cmd := &cobra.Command{
		Use:   "replay --audit-log FILE... (--policies DIR | --policy-objects FILE | --cluster)... [--namespace-objects FILE]",
		Short: "Replay audit logs against the policies: what would change",
		Long:  replayLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Complete()
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
func (o *replayOptions) AddFlags(f *pflag.FlagSet) {
	o.src.AddFlags(f)
	o.pol.AddFlags(f, true)
	o.reach.AddFlags(f)
	o.chain.AddFlags(f, true)
	f.StringArrayVar(&o.auditLogs, "audit-log", nil, "kube-apiserver audit log: audit.k8s.io/v1 or v1beta1 Event JSON lines, gzipped or not (repeatable; - for stdin)")
	f.StringVar(&o.namespaceObjects, "namespace-objects", "", "Namespace objects (YAML or JSON; several documents or a List, as kubectl get namespaces -o yaml prints them) that fill resource.namespaceObject")
	f.StringVarP(&o.output, "output", "o", "text", "output format: text, json, or jsonl (with --changes: one line per changed request)")
	f.BoolVar(&o.changes, "changes", false, "list every changed request (auditID, was, now, deciding policies)")
	f.BoolVar(&o.exitCode, "exit-code", false, "exit 3 when a request is newly denied or newly allowed")
	f.IntVar(&o.maxLineBytes, "max-line-bytes", replay.DefaultMaxLineBytes, "longest line read; longer lines are counted as oversized and skipped")
}

// Complete lets --cluster read the cluster's schema too.
func (o *replayOptions) Complete() { o.pol.Complete(&o.src) }

// Validate checks the flags; errors are usage errors (exit 2).
func (o *replayOptions) Validate() error {
	switch o.output {
	case "text", "json":
	case "jsonl":
		if !o.changes {
			return &exitError{2, errors.New("-o jsonl writes the changed requests: give --changes")}
		}
	default:
		return &exitError{2, fmt.Errorf("--output must be text, json or jsonl, not %q", o.output)}
	}
	if err := o.chain.Validate(); err != nil {
		return err
	}
	return validateAuditLogInputs(o.auditLogs, o.maxLineBytes, &o.pol)
}

// Run loads the schema and the policies, replays the logs and prints the
// summary (exit 3 with --exit-code when something changed).
func (o *replayOptions) Run(ctx context.Context, stdout, stderr io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	checker, err := loadChecker(ctx, o.src)
	if err != nil {
		return err
	}
	seen := &unknownTypeWriter{w: stderr}
	ps, err := o.pol.policySet(ctx, seen, checker, o.pol.policies)
	if err != nil {
		return o.schemaHint(err, seen.unknownType)
	}
	ns, err := o.readNamespaces()
	if err != nil {
		return &exitError{2, err}
	}
	reach, err := o.reach.reach()
	if err != nil {
		return &exitError{2, err}
	}
	opts := replay.Options{Namespaces: ns, MaxLineBytes: o.maxLineBytes, OnChange: o.onChange(stdout), Reach: reach}
	if err := o.chainOptions(ctx, stderr, checker.Schema, reach, &opts); err != nil {
		return err
	}
	if f, ok := stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		opts.Progress = progress(stderr)
	}
	r := replay.New(checker.Schema, ps, opts)
	if err := o.readLogs(ctx, r); err != nil {
		return err
	}
	if err := r.Finish(); err != nil {
		return err
	}
	if opts.Progress != nil {
		fmt.Fprint(stderr, "\r\033[K")
	}
	sum := r.Summary()
	sum.Sort()
	if err := o.print(stdout, stderr, sum); err != nil {
		return err
	}
	if err := unreadable(sum); err != nil {
		return err
	}
	if o.exitCode && sum.Changed() {
		return &exitError{3, fmt.Errorf("%d newly denied, %d newly allowed", sum.NewlyDenied, sum.NewlyAllowed)}
	}
	return nil
}

// chainOptions sets the chain opts decides with: RBAC (the cluster's or
// --rbac's, where the AuthorizationConfiguration puts it) and the mode.
func (o *replayOptions) chainOptions(ctx context.Context, stderr io.Writer, schema *schemagen.Schema, reach *replay.Reach, opts *replay.Options) error {
	rb, err := o.chain.rbac(ctx, stderr, schema, &o.pol)
	if err != nil {
		return err
	}
	present, first := reach.RBACPosition()
	switch {
	case rb != nil && !present:
		safetext.Fprintf(stderr, "note: the AuthorizationConfiguration has no RBAC authorizer: requests are decided by kcedar alone\n")
	case rb != nil:
		if opts.RBAC, err = rb.set(); err != nil {
			return err
		}
		opts.RBACFirst, opts.RBACSource = first, rb.String()
	}
	switch {
	case o.chain.mode == "" && reach.ConditionsReview():
		opts.Mode = upstream.ServeModeConditionsReview
	default:
		if opts.Mode, _, err = o.chain.serveMode(ctx, &o.pol); err != nil {
			return err
		}
	}
	return nil
}

// schemaHint adds to a policy error naming a type the built-in schema does
// not know where the policies likely came from: policies converted
// against a live cluster (kcedar rbac convert --kubeconfig) name its CRDs.
func (o *replayOptions) schemaHint(err error, unknownType bool) error {
	if o.src.IsLive() || o.src.FromDir != "" || o.src.SchemaFile != "" || !unknownType {
		return err
	}
	const hint = "replay used the schema built into kcedar, which knows no CRD: give the --kubeconfig the policies were converted with (or --schema, --from-dir)"
	var ee *exitError
	if errors.As(err, &ee) {
		return &exitError{ee.code, fmt.Errorf("%w; %s", ee.err, hint)}
	}
	return fmt.Errorf("%w; %s", err, hint)
}

// unknownTypeWriter passes the policy diagnostics on and notes whether one
// names an unknown entity type.
type unknownTypeWriter struct {
	w           io.Writer
	unknownType bool
}

func (u *unknownTypeWriter) Write(p []byte) (int, error) {
	u.unknownType = u.unknownType || strings.Contains(string(p), "unknown entity type")
	return u.w.Write(p)
}

// readNamespaces reads --namespace-objects (nil without it).
func (o *replayOptions) readNamespaces() (entities.NamespaceLookup, error) {
	if o.namespaceObjects == "" {
		return nil, nil
	}
	data, err := os.ReadFile(o.namespaceObjects)
	if err != nil {
		return nil, fmt.Errorf("--namespace-objects: %w", err)
	}
	ns, err := offline.ParseNamespaceObjects(data)
	if err != nil {
		return nil, fmt.Errorf("--namespace-objects %s: %w", o.namespaceObjects, err)
	}
	return ns, nil
}

// readLogs replays every --audit-log in order; one that cannot be opened
// or read to its end is recorded in the summary (exit 2 after it).
func (o *replayOptions) readLogs(ctx context.Context, r *replay.Replayer) error {
	for _, path := range o.auditLogs {
		if err := readLog(ctx, r, path); err != nil {
			return err
		}
	}
	return nil
}

// readLog replays one log file, or stdin for "-". The error is the
// context's or OnChange's; an unreadable file is recorded in the summary.
func readLog(ctx context.Context, r *replay.Replayer, path string) error {
	if path == "-" {
		return r.Read(ctx, "<stdin>", os.Stdin)
	}
	f, err := os.Open(path)
	if err != nil {
		r.Unreadable(path, err)
		return nil
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.IsDir() {
		r.Unreadable(path, errors.New("is a directory, not an audit log file (give the files in it)"))
		return nil
	}
	return r.Read(ctx, path, f)
}

// unreadable is the I/O error (exit 2) of inputs not read to their end.
func unreadable(sum *replay.Summary) error {
	if sum.Unreadable == 0 {
		return nil
	}
	first := ""
	for _, p := range sum.Problems {
		if p.CutShort {
			first = p.Input + ": " + p.Message
			break
		}
	}
	return &exitError{2, fmt.Errorf("%d --audit-log input(s) not read to the end; first: %s", sum.Unreadable, first)}
}

// onChange lists the changed requests as they come with --changes -o
// jsonl (one JSON object a line); nil otherwise (text and json list them
// from the summary's groups).
func (o *replayOptions) onChange(stdout io.Writer) func(replay.Change) error {
	if !o.changes {
		return nil
	}
	if o.output != "jsonl" {
		return o.collect
	}
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	return func(c replay.Change) error { return enc.Encode(c) }
}

// collect keeps a changed request for print.
func (o *replayOptions) collect(c replay.Change) error {
	o.collected = append(o.collected, c)
	return nil
}

// print writes the summary: as text or JSON on stdout, or, with -o jsonl
// (the changes went to stdout), as text on stderr.
func (o *replayOptions) print(stdout, stderr io.Writer, sum *replay.Summary) error {
	switch o.output {
	case "jsonl":
		return sum.WriteText(stderr)
	case "json":
		doc := struct {
			*replay.Summary
			ChangedRequests []replay.Change `json:"changedRequests,omitempty"`
		}{sum, o.collected}
		return writeJSON(stdout, doc)
	}
	if err := sum.WriteText(stdout); err != nil {
		return err
	}
	if len(o.collected) > 0 {
		fmt.Fprintln(stdout, "\nchanged requests:")
	}
	// Every field comes from the log or the policies: escaped for the
	// terminal, so no name can erase or rewrite a line of the review.
	for _, c := range o.collected {
		by := ""
		if c.DecidedBy != "" {
			by = " by " + c.DecidedBy
		}
		safetext.Fprintf(stdout, "  %s  %s -> %s%s  user=%s verb=%s resource=%s namespace=%s name=%s policies=%v\n",
			c.AuditID, c.Was, c.Now, by, c.User, c.Verb, c.Resource, c.Namespace, c.Name, c.Policies)
	}
	return nil
}

// progress reports the counts on a terminal, at most every half second.
func progress(w io.Writer) func(*replay.Summary) {
	var last time.Time
	return func(s *replay.Summary) {
		if time.Since(last) < 500*time.Millisecond {
			return
		}
		last = time.Now()
		fmt.Fprintf(w, "\r\033[Kreplay: %d lines, %d requests, %d newly denied, %d newly allowed", s.Lines, s.Requests, s.NewlyDenied, s.NewlyAllowed)
	}
}

// validateAuditLogInputs checks what replay and generate read: at least one
// --audit-log, stdin at most once (and not also for policy objects), a
// --max-line-bytes that holds an event. Errors are usage errors (exit 2).
func validateAuditLogInputs(auditLogs []string, maxLineBytes int, pol *policySourceOptions) error {
	if len(auditLogs) == 0 {
		return &exitError{2, errors.New("give at least one --audit-log FILE (- for stdin)")}
	}
	if maxLineBytes < 1024 {
		return &exitError{2, errors.New("--max-line-bytes must be at least 1024")}
	}
	stdin := ""
	for _, f := range auditLogs {
		if f == "-" {
			if stdin != "" {
				return &exitError{2, errors.New("--audit-log - (stdin) can be given once")}
			}
			stdin = "--audit-log -"
		}
	}
	if err := pol.Validate(stdin); err != nil {
		return &exitError{2, err}
	}
	return nil
}
