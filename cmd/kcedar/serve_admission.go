package main

import (
	"log/slog"

	"github.com/spf13/pflag"

	"github.com/kcedar/kcedar/internal/cluster/webhooks"
)

// admissionOptions are serve's flags for --admission-enforcement.
type admissionOptions struct {
	enforcement bool
	webhookName string
	unverified  bool
}

func (o *admissionOptions) addFlags(f *pflag.FlagSet) {
	f.BoolVar(&o.enforcement, "admission-enforcement", false, "for clusters without conditional authorization: answer Allow for a conditional allow on requests admission always sees, and enforce the conditions at POST /v1/admit (install it with: kcedar manifests --admission-enforcement). Conditional allows are answered Allow only while the ValidatingWebhookConfiguration is verified in place, watched through the cluster connection (--kubeconfig, KUBECONFIG or in-cluster)")
	f.StringVar(&o.webhookName, "admission-webhook-name", "kcedar-conditions", "name of the ValidatingWebhookConfiguration that enforces conditions")
	f.BoolVar(&o.unverified, "unverified-admission-webhook", false, "with --admission-enforcement: do not verify the ValidatingWebhookConfiguration (only if something else guarantees it is installed; the APIServices are still followed through the cluster connection, to fold conditional allows on aggregated APIs)")
}

// verification returns the server's view of the admission webhook (for
// server.Options.AdmissionWebhookSees) and the verifier to run: nil
// without --admission-enforcement (nothing to verify); with
// --unverified-admission-webhook, a webhook taken to see everyone.
func (o *admissionOptions) verification(logger *slog.Logger) (func(string, []string) bool, *webhooks.Verifier) {
	switch {
	case !o.enforcement:
		return nil, nil
	case o.unverified:
		return func(string, []string) bool { return true }, nil
	}
	v := webhooks.NewVerifier(o.webhookName, logger)
	return v.Sees, v
}

// apiServices returns the follower of the cluster's APIServices (for
// server.Options.AggregatedAPI) with --admission-enforcement, verified or
// not: whatever guarantees the webhook, kube-apiserver proxies the requests
// of an aggregated API server past it. nil without the flag.
func (o *admissionOptions) apiServices(logger *slog.Logger) *webhooks.APIServices {
	if !o.enforcement {
		return nil
	}
	return webhooks.NewAPIServices(logger)
}
