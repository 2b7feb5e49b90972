package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/conditions"
	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/lib/safetext"
	"github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/tools/rbacconvert"
	"github.com/kcedar/kcedar/internal/upstream"
)

// The access tools (replay, who-can, can-i, why, access-matrix) answer for
// kube-apiserver's authorizer chain, not for kcedar alone: kcedar's webhook
// first (its Allow or Deny is final), then RBAC on its NoOpinion, as the
// AuthorizationConfiguration kcedar manifests writes orders them. RBAC is
// read from the cluster when the policies are (--cluster, the kubectl
// plugin), or from --rbac files, and converted to Cedar permits with
// rbacconvert; --kcedar-only answers for kcedar alone.

// defaultAdmissionWebhook is the ValidatingWebhookConfiguration kcedar
// manifests --admission-enforcement writes (serve's
// --admission-webhook-name).
const defaultAdmissionWebhook = "kcedar-conditions"

// chainOptions say which chain the access tools answer for.
type chainOptions struct {
	// kcedarOnly answers for kcedar alone.
	kcedarOnly bool
	// rbacPaths are the --rbac files and directories of RBAC objects.
	rbacPaths []string
	// mode is --mode ("": found from the cluster, else none).
	mode string
}

// AddFlags registers --kcedar-only and --rbac, and --mode when withMode.
func (o *chainOptions) AddFlags(f *pflag.FlagSet, withMode bool) {
	f.BoolVar(&o.kcedarOnly, "kcedar-only", false, "answer for kcedar alone, not for kube-apiserver's authorizer chain (kcedar, then RBAC)")
	f.StringArrayVar(&o.rbacPaths, "rbac", nil, "RBAC objects (Roles, ClusterRoles and their bindings: a YAML or JSON file or a directory, as kcedar rbac convert -f reads them; repeatable): answer for kcedar, then this RBAC (default with the cluster's policies: the cluster's RBAC)")
	if withMode {
		f.StringVar(&o.mode, "mode", "", "how kcedar serve answers a decision left to admission: none, admission-enforcement (Kubernetes 1.37, kcedar serve --admission-enforcement) or conditions-review (Kubernetes 1.38 conditional authorization); default: admission-enforcement when the cluster has kcedar's ValidatingWebhookConfiguration "+defaultAdmissionWebhook+", else none")
	}
}

// Validate checks the flags (a usage error, exit 2).
func (o *chainOptions) Validate() error {
	if o.kcedarOnly && len(o.rbacPaths) > 0 {
		return &exitError{2, errors.New("give --kcedar-only or --rbac, not both")}
	}
	if o.mode != "" {
		if _, err := upstream.ParseServeMode(o.mode); err != nil {
			return &exitError{2, fmt.Errorf("--mode: %w", err)}
		}
	}
	return nil
}

// chainRBAC is the RBAC of a chain: its grants as Cedar permits, and where
// they came from.
type chainRBAC struct {
	policies []*cedarlang.Policy
	from     string
	bindings int
}

// rbac reads and converts the chain's RBAC against schema: the --rbac
// objects, else the cluster's when the policies come from the cluster
// (pol), else none (nil): kcedar alone. Conversion warnings on the user's
// own roles are counted on errw.
func (o *chainOptions) rbac(ctx context.Context, errw io.Writer, schema *schemagen.Schema, pol *policySourceOptions) (*chainRBAC, error) {
	in := &rbacconvert.Input{}
	var from string
	switch {
	case o.kcedarOnly:
		return nil, nil
	case len(o.rbacPaths) > 0:
		if err := in.ReadPaths(o.rbacPaths); err != nil {
			return nil, &exitError{2, fmt.Errorf("--rbac: %w", err)}
		}
		from = "--rbac " + strings.Join(o.rbacPaths, ", ")
	case pol.cluster:
		cs, err := clusterClient(pol)
		if err != nil {
			return nil, err
		}
		if err := in.ReadCluster(ctx, cs); err != nil {
			return nil, &exitError{2, fmt.Errorf("reading the cluster's RBAC (--kcedar-only answers without it): %w", err)}
		}
		from = "the cluster's"
	default:
		return nil, nil
	}
	res, err := rbacconvert.Convert(schema, in)
	if err != nil {
		return nil, &exitError{2, fmt.Errorf("converting RBAC: %w", err)}
	}
	if n := len(res.UserWarnings()); n > 0 {
		safetext.Fprintf(errw, "note: %s on converting %s RBAC (kcedar rbac convert lists them): the answer may differ from RBAC's there\n", plural(n, "warning"), from)
	}
	return &chainRBAC{policies: res.Parsed, from: from, bindings: res.Bindings}, nil
}

// String says where the RBAC came from and what it holds.
func (rb *chainRBAC) String() string {
	return fmt.Sprintf("%s RBAC: %s from %s", rb.from, plural(len(rb.policies), "permit"), plural(rb.bindings, "binding"))
}

// set is the RBAC permits as a policy set.
func (rb *chainRBAC) set() (*cedarlang.PolicySet, error) {
	set, err := cedarlang.NewPolicySet(rb.policies)
	if err != nil {
		return nil, &exitError{2, fmt.Errorf("RBAC: %w", err)}
	}
	return set, nil
}

// clusterClient is a client of the cluster the policies are read from.
func clusterClient(pol *policySourceOptions) (kubernetes.Interface, error) {
	cfg, err := pol.conn.RESTConfig()
	if err != nil {
		return nil, &exitError{2, err}
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, &exitError{2, err}
	}
	return cs, nil
}

// describeChain names the chain an answer is for, as the outputs say it.
func describeChain(rb *chainRBAC, kcedarOnly bool) string {
	switch {
	case rb != nil:
		return "kcedar, then RBAC (" + rb.String() + ")"
	case kcedarOnly:
		return "kcedar alone (--kcedar-only)"
	}
	return "kcedar alone (no RBAC given: --cluster reads the cluster's, --rbac FILE takes RBAC objects)"
}

// withRBAC is an engine of e's policies and RBAC's permits in one set: for
// the questions over every principal or resource (who-can, can-i --list,
// the access matrix) the chain kcedar, then RBAC answers exactly as one
// set does when no condition is left to admission (RBAC only grants, so
// kcedar's forbids still deny and its permits still allow; on kcedar's
// NoOpinion RBAC's permits decide). A conditional entry is kcedar's.
func withRBAC(e *engine.Engine, rb *chainRBAC, ns entities.NamespaceLookup) (*engine.Engine, error) {
	if rb == nil {
		return e, nil
	}
	kcedar := e.Policies().Policies
	all := make([]*cedarlang.Policy, 0, len(kcedar)+len(rb.policies))
	all = append(append(all, kcedar...), rb.policies...)
	set, err := cedarlang.NewPolicySet(all)
	if err != nil {
		return nil, &exitError{1, fmt.Errorf("kcedar's policies with RBAC's (ids rbac/... are RBAC's): %w", err)}
	}
	return engine.NewEngine(e.Schema(), set, engine.EngineOptions{Namespaces: ns}), nil
}

// rbacEngine is the engine of RBAC's permits alone (nil without RBAC).
func rbacEngine(schema *schemagen.Schema, rb *chainRBAC) (*engine.Engine, error) {
	if rb == nil {
		return nil, nil
	}
	set, err := rb.set()
	if err != nil {
		return nil, err
	}
	return engine.NewEngine(schema, set, engine.EngineOptions{}), nil
}

// serveMode is the mode the answer is for: --mode, else found from the
// cluster when the policies come from it (kcedar's admission webhook
// installed: admission-enforcement), else none. how says where it came
// from.
func (o *chainOptions) serveMode(ctx context.Context, pol *policySourceOptions) (mode upstream.ServeMode, how string, err error) {
	if o.mode != "" {
		m, err := upstream.ParseServeMode(o.mode)
		return m, "--mode", err
	}
	if !pol.cluster {
		return upstream.ServeModeNone, "the default; --mode sets it", nil
	}
	cs, err := clusterClient(pol)
	if err != nil {
		return "", "", err
	}
	_, err = cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, defaultAdmissionWebhook, metav1.GetOptions{})
	switch {
	case err == nil:
		return upstream.ServeModeAdmissionEnforcement, "the cluster has the ValidatingWebhookConfiguration " + defaultAdmissionWebhook + "; --mode sets it", nil
	case apierrors.IsNotFound(err):
		return upstream.ServeModeNone, "the cluster has no ValidatingWebhookConfiguration " + defaultAdmissionWebhook + "; --mode sets it", nil
	}
	return upstream.ServeModeNone, "the ValidatingWebhookConfigurations could not be read (" + err.Error() + "); --mode sets it", nil
}

// chainEngine builds the engine the review tools answer with: kcedar's
// policies (reviewOptions.engine), with the chain's RBAC permits unless
// kcedar answers alone, and the chain's name for the output.
func (o *reviewOptions) chainEngine(ctx context.Context, errw io.Writer, c *chainOptions) (*schemagen.Schema, *engine.Engine, string, error) {
	schema, az, err := o.engine(ctx, errw)
	if err != nil {
		return nil, nil, "", err
	}
	withConditions, ok := az.(*conditions.Engine)
	if !ok {
		return nil, nil, "", fmt.Errorf("internal error: the review engine is a %T", az)
	}
	e := withConditions.Engine
	rb, err := c.rbac(ctx, errw, schema, &o.pol)
	if err != nil {
		return nil, nil, "", err
	}
	ns, err := o.nsObjects.lookup()
	if err != nil {
		return nil, nil, "", &exitError{2, err}
	}
	if e, err = withRBAC(e, rb, ns); err != nil {
		return nil, nil, "", err
	}
	return schema, e, describeChain(rb, c.kcedarOnly), nil
}
