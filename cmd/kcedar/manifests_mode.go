package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/clientcmd"
)

// How the API servers enforce the conditions of kcedar's conditional
// permits. Kubernetes 1.38 ships KEP-5681's conditional authorization
// (alpha, feature gate ConditionalAuthorization): the webhook authorizer
// takes kcedar's conditions (conditionsReview in the
// AuthorizationConfiguration, through the webhook kubeconfig's second
// context) and the AuthorizationConditionsEnforcer admission plugin calls
// kcedar back to evaluate them. Earlier releases cannot: kcedar serve
// --admission-enforcement answers a conditional allow Allow and its
// validating webhook enforces the conditions.

// conditionalAuthorizationSince is the first Kubernetes release with
// conditional authorization.
var conditionalAuthorizationSince = version.MajorMinor(1, 38)

// conditionalAuthorizationGate is the feature gate kube-apiserver needs
// for conditionsReview (1.38: alpha, off by default).
const conditionalAuthorizationGate = "ConditionalAuthorization"

// versionProbeTimeout bounds reading the cluster's version.
const versionProbeTimeout = 5 * time.Second

// chooseMode settles how conditions are enforced. --conditions-review and
// --admission-enforcement, when given (true or false), decide; otherwise
// the Kubernetes version does: --kubernetes-version, else the cluster's,
// read through the kubeconfig (--kubeconfig, --context, KUBECONFIG,
// ~/.kube/config). 1.38 and later: conditionsReview; earlier: the admission
// webhook. A version that cannot be read leaves both off (conditional
// permits then do not allow), with a note. The notes for the operator go to
// o.notes.
func (o *manifestOptions) chooseMode(ctx context.Context, flags *pflag.FlagSet) error {
	var v *version.Version
	if o.kubernetesVersion != "" {
		var err error
		if v, err = version.ParseGeneric(o.kubernetesVersion); err != nil {
			return fmt.Errorf("--kubernetes-version %q: want a version such as 1.37 or v1.38.0", o.kubernetesVersion)
		}
	}
	if flags.Changed("conditions-review") || flags.Changed("admission-enforcement") {
		if v != nil && o.conditionsReview && !v.AtLeast(conditionalAuthorizationSince) {
			return fmt.Errorf("--conditions-review: Kubernetes %s has no conditional authorization (it came in 1.38), and its kube-apiserver refuses the field; use --admission-enforcement", o.kubernetesVersion)
		}
		return nil
	}
	source, shown := "--kubernetes-version", o.kubernetesVersion
	if v == nil {
		read := o.serverVersion
		if read == nil {
			read = o.readServerVersion
		}
		probe, cancel := context.WithTimeout(ctx, versionProbeTimeout)
		defer cancel()
		gitVersion, err := read(probe)
		if err == nil {
			v, err = version.ParseGeneric(gitVersion)
		}
		if err != nil {
			o.notes = append(o.notes, fmt.Sprintf("the cluster's Kubernetes version could not be read (%v): no enforcement of conditions is configured, so conditional permits do not allow. Give --kubernetes-version, or choose with --conditions-review (1.38 and later) or --admission-enforcement.", err))
			return nil
		}
		source, shown = "the cluster", gitVersion
	}
	if v.AtLeast(conditionalAuthorizationSince) {
		o.conditionsReview = true
	} else {
		o.admissionEnforcement = true
	}
	o.notes = append(o.notes, fmt.Sprintf("Kubernetes %s (from %s): conditions are enforced %s.", strings.TrimPrefix(shown, "v"), source, o.modeDescription()))
	return nil
}

// modeDescription says how conditions are enforced with the chosen flags.
func (o *manifestOptions) modeDescription() string {
	switch {
	case o.conditionsReview && o.admissionEnforcement:
		return "by both the API server (conditionsReview) and kcedar's admission webhook"
	case o.conditionsReview:
		return "by the API server (conditionsReview)"
	case o.admissionEnforcement:
		return "by kcedar's admission webhook (validating-webhook.yaml)"
	}
	return "by nothing: conditional permits do not allow"
}

// modeNotes are the steps the chosen mode needs outside the written files.
func (o *manifestOptions) modeNotes() []string {
	var notes []string
	if o.conditionsReview {
		notes = append(notes, "start every kube-apiserver with --feature-gates="+conditionalAuthorizationGate+"=true: without the gate it refuses conditionsReview "+
			"(the whole AuthorizationConfiguration). Keep the AuthorizationConditionsEnforcer admission plugin on: it is on with the gate unless "+
			"--disable-admission-plugins names it or the deprecated --admission-control lists the plugins without it.")
	}
	if o.admissionEnforcement {
		notes = append(notes, "run kcedar serve with --admission-enforcement, and apply validating-webhook.yaml once it serves.")
	}
	return notes
}

// readServerVersion reads the cluster's version (its /version) through the
// kubeconfig: --kubeconfig or the default loading rules, and --context. It
// never falls back to the in-cluster configuration: manifests are for the
// cluster the operator names.
func (o *manifestOptions) readServerVersion(ctx context.Context) (string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if o.kubeconfig != "" {
		rules.ExplicitPath = o.kubeconfig
	}
	raw, err := rules.Load()
	if err != nil {
		return "", err
	}
	if len(raw.Contexts) == 0 {
		return "", errors.New("no kubeconfig")
	}
	cfg, err := clientcmd.NewDefaultClientConfig(*raw, &clientcmd.ConfigOverrides{CurrentContext: o.context}).ClientConfig()
	if err != nil {
		return "", err
	}
	if deadline, ok := ctx.Deadline(); ok {
		cfg.Timeout = time.Until(deadline)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return "", err
	}
	info, err := dc.ServerVersion()
	if err != nil {
		return "", err
	}
	return info.GitVersion, nil
}

// writeNotes prints the mode's notes on w, one per paragraph.
func (o *manifestOptions) writeNotes(w io.Writer) {
	for _, n := range append(o.notes, o.modeNotes()...) {
		fmt.Fprintln(w, "kcedar manifests:", n)
	}
}
