package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"

	"github.com/kcedar/kcedar/internal/cedarlang/lint"
	"github.com/kcedar/kcedar/internal/cluster/policyobjects"
	"github.com/kcedar/kcedar/internal/conditions"
	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/lib/safetext"
	"github.com/kcedar/kcedar/internal/tools/offline"
	"github.com/kcedar/kcedar/internal/wire"
)

func init() { rootCmd.AddCommand(newAuthorizeCmd()) }

// authorizeOptions are kcedar authorize's flags.
type authorizeOptions struct {
	src       schemaSource
	pol       policySourceOptions
	output    string
	sarFile   string
	req       offline.RequestSpec
	identity  identityFlags
	object    string
	oldObject string
	// namespaceObjects: files of Namespace objects that fill namespaceObject.
	namespaceObjects namespaceObjects
	operation        string
	raw              bool              // take --resource etc. literally
	inputs           map[string][]byte // files read, by path: stdin ("-") is read once
}

func newAuthorizeCmd() *cobra.Command {
	var o authorizeOptions
	cmd := &cobra.Command{
		Use:   "authorize (--policies DIR | --policy-objects FILE | --cluster)... (--as U --verb V --resource R ... | -f SAR.yaml) [--object FILE] [--old-object FILE]",
		Short: "Decide one request offline, exactly as kcedar serve would",
		Long: `Decide one request against the policies, offline, with the server's code
path: the same authorizer, the same rendering of conditions and, given the
objects, the same evaluation the API server's callback (or admission) runs.

The request comes from flags (--as, --as-group, --as-uid, --as-user-extra, --verb,
--api-group, --resource, --subresource, --namespace, --name, or --path for a
non-resource URL) or from a SubjectAccessReview file (-f, YAML or JSON).
An empty namespace or name is open (all namespaces / names), as in a
SubjectAccessReview.

The policies come from files (--policies), policy objects (--policy-objects
FILE, as kubectl get -o yaml prints them, or --cluster: the cluster's
objects) or both, composed as kcedar serve composes them: a
NamespacedCedarPolicy only grants in its namespace, and objects serve would
refuse are reported and not used.

The answer is Allow, Deny, NoOpinion or Conditional (for writes whose policies
look at the object); for a Conditional answer each condition is printed and,
with --object / --old-object (YAML or JSON), evaluated, giving the outcome in
admission.

Exit status: 0 when decided (whatever the decision), 1 invalid policies,
2 usage or I/O error.`,
		Args: cobra.NoArgs,
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
func (o *authorizeOptions) AddFlags(f *pflag.FlagSet) {
	o.src.AddFlags(f)
	o.pol.AddFlags(f, true)
	f.StringVarP(&o.output, "output", "o", "text", "output format: text or json")
	f.StringVarP(&o.sarFile, "filename", "f", "", "a SubjectAccessReview (YAML or JSON; - for stdin) instead of the request flags")
	o.identity.AddFlags(f, true)
	f.StringVar(&o.req.Verb, "verb", "", "verb: get, list, create, ... (lower-case HTTP verb for --path)")
	f.StringVar(&o.req.APIGroup, "api-group", "", "API group (empty: any, resolved like kubectl; core for the core group)")
	f.StringVar(&o.req.APIVersion, "api-version", "", "API version")
	f.StringVar(&o.req.Resource, "resource", "", "resource as kubectl takes it: pods, po, pod, Pod, deployments.apps, pods/exec, deploy/scale")
	f.BoolVar(&o.raw, "raw", false, "take --api-group, --resource, --subresource and --verb literally, as a SubjectAccessReview carries them (no resolution)")
	f.StringVar(&o.req.Subresource, "subresource", "", "subresource: exec, status, ...")
	f.StringVarP(&o.req.Namespace, "namespace", "n", "", "namespace (empty: all namespaces)")
	f.StringVar(&o.req.Name, "name", "", "object name (empty: all names, or a create)")
	f.StringVar(&o.req.Path, "path", "", "non-resource URL path, e.g. /healthz")
	f.StringVar(&o.object, "object", "", "the object in admission (YAML or JSON file)")
	f.StringVar(&o.oldObject, "old-object", "", "the stored object in admission (YAML or JSON file)")
	o.namespaceObjects.AddFlag(f)
	f.StringVar(&o.operation, "operation", "", "admission operation: CREATE, UPDATE, DELETE or CONNECT (default: from the verb)")
}

// Complete lets --cluster read the cluster's schema too (see
// policySourceOptions.Complete).
func (o *authorizeOptions) Complete() {
	o.pol.Complete(&o.src)
}

// Validate checks --output, the policy sources and the request (reading
// its files); errors are usage errors (exit 2).
func (o *authorizeOptions) Validate() error {
	if err := checkOutputFormat(o.output); err != nil {
		return err
	}
	if err := o.pol.Validate(o.stdinFlag()); err != nil {
		return &exitError{2, err}
	}
	if _, _, err := o.request(); err != nil {
		return &exitError{2, err}
	}
	return nil
}

// Run loads the schema and decides the request (see runAuthorize).
func (o *authorizeOptions) Run(ctx context.Context, stdout, stderr io.Writer) error {
	checker, err := loadChecker(ctx, o.src)
	if err != nil {
		return err
	}
	return runAuthorize(ctx, stdout, stderr, checker, o)
}

// stdinFlag names the request flag that reads stdin, "" if none.
func (o *authorizeOptions) stdinFlag() string {
	for _, f := range []struct{ name, value string }{{"-f", o.sarFile}, {"--object", o.object}, {"--old-object", o.oldObject}} {
		if f.value == "-" {
			return f.name
		}
	}
	return ""
}

// runAuthorize decides the request of o against its policies and prints
// the decision on w (policy diagnostics, and policy objects not used, on
// errw).
func runAuthorize(ctx context.Context, w, errw io.Writer, checker *lint.Checker, o *authorizeOptions) error {
	req, adm, err := o.request()
	if err != nil {
		return &exitError{2, err}
	}
	if o.sarFile == "" && !o.raw {
		note := errw // what the request resolved to; json output stays one document
		if o.output == "json" {
			note = io.Discard
		}
		if err := resolveRequestFlags(checker.Schema, &o.req, note); err != nil {
			return &exitError{2, err}
		}
		if req, adm, err = o.request(); err != nil {
			return &exitError{2, err}
		}
	}
	ps, err := o.pol.policySet(ctx, errw, checker, o.pol.policies)
	if err != nil {
		return err
	}
	ns, err := o.namespaceObjects.lookup()
	if err != nil {
		return &exitError{2, err}
	}
	d := offline.NewDeciderWithNamespaces(checker.Schema, ps, ns).Decide(req, adm)
	return printDecision(w, d, o.output, o.pol.refused)
}

// request builds the cedar request and admission data from the flags.
func (o *authorizeOptions) request() (*entities.Request, *conditions.Admission, error) {
	tc := offline.TestCase{Operation: o.operation}
	stdins := 0
	for _, f := range []string{o.sarFile, o.object, o.oldObject} {
		if f == "-" {
			stdins++
		}
	}
	if stdins > 1 {
		return nil, nil, errors.New("only one of -f, --object and --old-object can be - (stdin)")
	}
	if o.sarFile != "" {
		if o.identity.given() || o.req.Verb != "" || o.req.Resource != "" || o.req.Path != "" {
			return nil, nil, errors.New("give either -f or the request flags, not both")
		}
		data, err := o.read(o.sarFile)
		if err != nil {
			return nil, nil, err
		}
		var sar wire.SubjectAccessReview
		if err := yaml.Unmarshal(data, &sar); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", o.sarFile, err)
		}
		if sar.Kind != "" && sar.Kind != "SubjectAccessReview" {
			return nil, nil, fmt.Errorf("%s: kind %s is not a SubjectAccessReview", o.sarFile, sar.Kind)
		}
		tc.SAR = &sar
	} else {
		if o.req.Verb == "" {
			return nil, nil, errors.New("--verb is required (or -f SAR)")
		}
		if o.req.Path == "" && o.req.Resource == "" {
			return nil, nil, errors.New("--resource (or --path for a non-resource URL) is required")
		}
		if o.req.Path != "" && (o.req.Resource != "" || o.req.Namespace != "" || o.req.Name != "" || o.req.APIGroup != "" || o.req.Subresource != "") {
			return nil, nil, errors.New("--path is for non-resource URLs: it does not go with --resource, --namespace, --name, --api-group or --subresource")
		}
		u, err := o.identity.userInfo()
		if err != nil {
			return nil, nil, err
		}
		r := o.req
		r.User, r.Groups, r.UID, r.Extra = u.Name, u.Groups, u.UID, u.Extra
		tc.Request = &r
	}
	for _, obj := range []struct {
		file string
		dst  *json.RawMessage
	}{{o.object, &tc.Object}, {o.oldObject, &tc.OldObject}} {
		if obj.file == "" {
			continue
		}
		data, err := o.read(obj.file)
		if err != nil {
			return nil, nil, err
		}
		js, err := yaml.YAMLToJSON(data)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", obj.file, err)
		}
		if !strings.HasPrefix(strings.TrimSpace(string(js)), "{") {
			return nil, nil, fmt.Errorf("%s: not an object", obj.file)
		}
		*obj.dst = js
	}
	return tc.Build()
}

// read reads a file (or stdin for "-") once: request() runs more than once.
func (o *authorizeOptions) read(path string) ([]byte, error) {
	if data, ok := o.inputs[path]; ok {
		return data, nil
	}
	data, err := readInput(path)
	if err != nil {
		return nil, err
	}
	if o.inputs == nil {
		o.inputs = map[string][]byte{}
	}
	o.inputs[path] = data
	return data, nil
}

// maxInputBytes bounds SubjectAccessReview and object files.
const maxInputBytes = 8 << 20

func readInput(path string) ([]byte, error) {
	var r io.Reader = os.Stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, maxInputBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxInputBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, maxInputBytes)
	}
	return data, nil
}

// printDecision prints d as text or JSON (with the policy objects not used,
// if any).
func printDecision(w io.Writer, d engine.Report, format string, refused []policyobjects.Refusal) error {
	if format == "json" {
		if len(refused) > 0 {
			return writeJSONRefusals(w, d, refused)
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(d)
	}
	// String escapes every value it quotes; Lines is the last guard of the
	// whole text (nothing but its own newlines reaches the terminal).
	_, err := io.WriteString(w, safetext.Lines(d.String()))
	return err
}
