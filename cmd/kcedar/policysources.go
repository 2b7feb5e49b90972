package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/cedarlang/lint"
	"github.com/kcedar/kcedar/internal/cluster/policyobjects"
	"github.com/kcedar/kcedar/internal/lib/safetext"
	"github.com/kcedar/kcedar/internal/store"
)

// policySourceOptions are where the offline tools (authorize, test, who-can,
// can-i, validate) take their policies from: files (--policies, or the
// command's arguments), and policy objects from a file (--policy-objects) or
// the cluster (--cluster), composed exactly as kcedar serve composes them.
type policySourceOptions struct {
	// policies are the --policies paths (commands that take files as
	// arguments do not register the flag).
	policies []string
	// objects is the --policy-objects file, "-" for stdin.
	objects string
	// cluster reads the objects of the cluster of the kubeconfig.
	cluster bool
	// stdin is read for --policy-objects - (os.Stdin when nil).
	stdin io.Reader
	// conn is the connection of --cluster: the command's --kubeconfig and
	// --context (set by Complete).
	conn schemaSource

	// refused are the objects serve would not load, set by objectSources.
	refused []policyobjects.Refusal
}

// AddFlags registers --policy-objects and --cluster, and --policies when
// files is set.
func (o *policySourceOptions) AddFlags(f *pflag.FlagSet, files bool) {
	if files {
		f.StringArrayVarP(&o.policies, "policies", "p", nil, "policy file or directory of *.cedar files (repeatable)")
	}
	f.StringVar(&o.objects, "policy-objects", "", "CedarPolicy and NamespacedCedarPolicy objects (YAML or JSON: one object, several documents or a List, as kubectl get -o yaml prints them; - for stdin), composed as kcedar serve composes them; files join them")
	f.BoolVar(&o.cluster, clusterPoliciesFlag, false, "read the CedarPolicy and NamespacedCedarPolicy objects of the cluster (--kubeconfig and --context, else KUBECONFIG, ~/.kube/config, else in-cluster), and its schema unless --schema or --from-dir; composed as kcedar serve composes them")
}

// Complete makes --cluster read the cluster's schema too, as serve does,
// unless the schema comes from elsewhere (--schema, --from-dir): then
// --kubeconfig and --context are the objects' connection only.
func (o *policySourceOptions) Complete(src *schemaSource) {
	if !o.cluster {
		return
	}
	o.conn = schemaSource{Kubeconfig: src.Kubeconfig, Context: src.Context, Cluster: src.Cluster}
	if src.FromDir == "" && src.SchemaFile == "" {
		src.Live = true
	} else {
		src.Kubeconfig, src.Context, src.Cluster = "", "", ""
	}
}

// Validate checks the flags; stdinTaken names another flag that reads
// stdin ("" if none).
func (o *policySourceOptions) Validate(stdinTaken string) error {
	if o.cluster && o.objects != "" {
		return errors.New("give --policy-objects or --cluster, not both")
	}
	if o.objects == "-" && stdinTaken != "" {
		return fmt.Errorf("only one input can be - (stdin): --policy-objects and %s", stdinTaken)
	}
	return nil
}

// usesObjects reports whether policy objects are asked for.
func (o *policySourceOptions) usesObjects() bool { return o.objects != "" || o.cluster }

// readObjects reads the objects of --policy-objects or --cluster; the
// documents that are not policy objects are refused.
func (o *policySourceOptions) readObjects(ctx context.Context) ([]*unstructured.Unstructured, []policyobjects.Refusal, error) {
	if o.cluster {
		cfg, err := o.conn.RESTConfig()
		if err != nil {
			return nil, nil, fmt.Errorf("--cluster: %w (give --kubeconfig or set KUBECONFIG)", err)
		}
		client, err := dynamic.NewForConfig(cfg)
		if err != nil {
			return nil, nil, err
		}
		objs, err := policyobjects.List(ctx, client)
		return objs, nil, err
	}
	var r io.Reader = o.stdin
	name := "<stdin>"
	if o.objects != "-" {
		f, err := os.Open(o.objects)
		if err != nil {
			return nil, nil, err
		}
		defer f.Close()
		r, name = f, o.objects
	} else if r == nil {
		r = os.Stdin
	}
	return policyobjects.Decode(r, name)
}

// objectSources reads the objects and composes them as serve's policy
// object source does: the sources serve would load, and, on errw and in
// o.refused, the objects it would refuse and why. Unreadable objects are an
// exitError with code 2.
func (o *policySourceOptions) objectSources(ctx context.Context, errw io.Writer, checker *lint.Checker) ([]store.Source, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	objs, refused, err := o.readObjects(ctx)
	if err != nil {
		return nil, &exitError{2, err}
	}
	srcs, invalid := policyobjects.Compose(policyobjects.NewCheckerFrom(checker), objs)
	o.refused = append(refused, invalid...)
	for _, r := range o.refused {
		safetext.Fprintf(errw, "not used (as kcedar serve would not): %s: %s\n", r.Object, r.Reason)
	}
	return srcs, nil
}

// policySet loads the policies: the files alone as before, or, with policy
// objects, the files and the objects' sources through kcedar serve's policy
// store, so namespaced objects are confined and ids checked across objects
// and files as the server does. Invalid policies are reported on errw and
// give an exitError with code 1, unreadable inputs code 2.
func (o *policySourceOptions) policySet(ctx context.Context, errw io.Writer, checker *lint.Checker, paths []string) (*cedarlang.PolicySet, error) {
	if !o.usesObjects() {
		return loadPolicySet(errw, checker, paths)
	}
	srcs, err := o.objectSources(ctx, errw, checker)
	if err != nil {
		return nil, err
	}
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			return nil, &exitError{2, err}
		}
	}
	ps, err := composeSet(checker, paths, srcs)
	if err != nil {
		var le *store.LoadError
		if errors.As(err, &le) {
			for _, f := range le.Findings {
				fmt.Fprintln(errw, safetext.Lines(fmt.Sprint(f)))
			}
		} else {
			fmt.Fprintln(errw, safetext.Lines(err.Error()))
		}
		return nil, &exitError{1, errors.New("the policies do not load as one set (kcedar serve would not serve them); run kcedar validate")}
	}
	return ps, nil
}

// composeSet loads the files at paths and the sources as one set with
// kcedar serve's policy store (newPolicyStore): the set serve would serve,
// or the store's error.
func composeSet(checker *lint.Checker, paths []string, srcs []store.Source) (*cedarlang.PolicySet, error) {
	st := newPolicyStore(checker, paths, slog.New(slog.NewTextHandler(io.Discard, nil)))
	st.SetSources(srcs)
	if err := st.Load(); err != nil {
		return nil, err
	}
	return st.Current(), nil
}

// composedLoader loads a test file's policies together with policy object
// sources, as kcedar serve composes them (offline.PolicyLoader).
type composedLoader struct {
	checker *lint.Checker
	srcs    []store.Source
}

// LoadPolicies implements offline.PolicyLoader.
func (l composedLoader) LoadPolicies(paths []string) (*cedarlang.PolicySet, error) {
	ps, err := composeSet(l.checker, paths, l.srcs)
	if err != nil {
		return nil, fmt.Errorf("with the policy objects: %w", err)
	}
	return ps, nil
}

// writeJSONRefusals writes v as writeJSON does, with a last member
// refusedPolicyObjects listing the refused objects when there are any (v
// must encode as a JSON object).
func writeJSONRefusals(w io.Writer, v any, refused []policyobjects.Refusal) error {
	if len(refused) == 0 {
		return writeJSON(w, v)
	}
	var doc, list bytes.Buffer
	if err := writeJSON(&doc, v); err != nil {
		return err
	}
	body, ok := bytes.CutSuffix(bytes.TrimRight(doc.Bytes(), "\n"), []byte("}"))
	if !ok {
		return fmt.Errorf("not a JSON object: %.40s", doc.String())
	}
	body = bytes.TrimRight(body, "\n ")
	if err := writeJSON(&list, refused); err != nil {
		return err
	}
	sep := ","
	if bytes.HasSuffix(body, []byte("{")) {
		sep = ""
	}
	items := strings.ReplaceAll(strings.TrimRight(list.String(), "\n"), "\n", "\n  ")
	_, err := fmt.Fprintf(w, "%s%s\n  \"refusedPolicyObjects\": %s\n}\n", body, sep, items)
	return err
}
