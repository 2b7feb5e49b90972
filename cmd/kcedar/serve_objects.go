package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kcedar/kcedar/cedar"
	"github.com/kcedar/kcedar/internal/cluster/webhooks"
)

// objectOptions are serve's flags for policies stored as API objects.
type objectOptions struct {
	enabled        bool
	writeStatus    bool
	leaseNamespace string
	leaseName      string
	// webhookName is the ValidatingWebhookConfiguration that must guard
	// writes of policy objects; allowUnguarded serves NamespacedCedarPolicy
	// objects even while it is not verified.
	webhookName    string
	allowUnguarded bool
}

func (o *objectOptions) addFlags(f *pflag.FlagSet) {
	ns := os.Getenv("POD_NAMESPACE")
	if ns == "" {
		ns = "kcedar-system"
	}
	f.BoolVar(&o.enabled, "policy-objects", false, "also serve the policies of CedarPolicy and NamespacedCedarPolicy objects (kcedar.dev/v1alpha1), watched with informers through the cluster connection (--kubeconfig, KUBECONFIG or in-cluster); not ready until they have synced")
	f.BoolVar(&o.writeStatus, "policy-objects-status", true, "with --policy-objects: take part in the election (a Lease) of the replica that writes the objects' status; a Lease that cannot be taken shows in /readyz and kcedar_policy_status_lease_failing")
	f.StringVar(&o.leaseNamespace, "status-lease-namespace", ns, "namespace of the status Lease, which must exist (kcedar does not create it; default $POD_NAMESPACE, else kcedar-system)")
	f.StringVar(&o.leaseName, "status-lease-name", "kcedar-policy-status", "name of the status Lease")
	f.StringVar(&o.webhookName, "policy-webhook-name", "kcedar-policies", "with --policy-objects: name of the ValidatingWebhookConfiguration that sends every create, update and delete of policy objects to kcedar's /v1/validate-policy with failurePolicy Fail (kcedar manifests --policy-objects); kcedar watches it, and serves NamespacedCedarPolicy objects only while it is verified in place")
	f.BoolVar(&o.allowUnguarded, "allow-unguarded-policy-objects", false, "with --policy-objects: serve NamespacedCedarPolicy objects even while the policy webhook is not verified in place, accepting that their writes may then escape the validity and escalation checks")
}

// policyObjectsGroup is the API group of kcedar's policy objects.
const policyObjectsGroup = "kcedar.dev"

// policyObjects is serve's side of the policy objects (nil without
// --policy-objects): the cluster clients they are read and checked with,
// and the verifier of the ValidatingWebhookConfiguration guarding their
// writes.
type policyObjects struct {
	options cedar.PolicyObjects
	webhook *webhooks.PolicyVerifier
	client  kubernetes.Interface
	// changed, if set, is told when the objects' texts changed (a schema
	// the policies refused may validate now).
	changed func()
}

// newPolicyObjects prepares the policy objects; nothing runs until start.
// connect is the cluster connection, called only with --policy-objects.
func newPolicyObjects(o *objectOptions, connect func(feature string) (*rest.Config, error), logger *slog.Logger) (*policyObjects, error) {
	if !o.enabled {
		return nil, nil
	}
	cfg, err := connect("--policy-objects")
	if err != nil {
		return nil, err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 20, 40
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	po := &policyObjects{client: cs, webhook: webhooks.NewPolicyVerifier(o.webhookName, logger)}
	// Writes of policy objects are checked against the writer's own rights
	// with SubjectAccessReviews (kcedar's ServiceAccount may create them:
	// deploy/).
	po.options = cedar.PolicyObjects{Client: dyn, Kubernetes: cs, OnChange: func() {
		if po.changed != nil {
			po.changed()
		}
	}}
	// While the policy webhook is not verified, writes of policy objects may
	// bypass the escalation check, so NamespacedCedarPolicy objects (which
	// namespace users may write) are not served unless
	// --allow-unguarded-policy-objects; CedarPolicy objects are (their
	// writers are cluster administrators by RBAC on a cluster-scoped kind).
	if !o.allowUnguarded {
		po.options.ServeNamespaced = po.webhook.Verified
	}
	if o.writeStatus {
		host, _ := os.Hostname()
		var b [4]byte
		_, _ = rand.Read(b[:])
		po.options.StatusLease = &cedar.StatusLease{Namespace: o.leaseNamespace, Name: o.leaseName, Identity: host + "_" + hex.EncodeToString(b[:])}
	}
	return po, nil
}

// source is the FileSource's option for the objects (nil without them).
func (po *policyObjects) source() *cedar.PolicyObjects {
	if po == nil {
		return nil
	}
	return &po.options
}

// follow has fs load the objects again whenever the policy webhook's
// verification changes.
func (po *policyObjects) follow(fs *cedar.FileSource) {
	if po != nil && po.options.ServeNamespaced != nil {
		po.webhook.OnChange = fs.Reoffer
	}
}

// webhookProblem is /readyz's degraded detail about the policy webhook; ""
// when it is verified (or without --policy-objects).
func (po *policyObjects) webhookProblem() string {
	if po == nil {
		return ""
	}
	err := po.webhook.Problem()
	if err == nil {
		return ""
	}
	if po.options.ServeNamespaced == nil {
		return fmt.Sprintf("policy webhook not verified (%v); NamespacedCedarPolicy objects serve anyway (--allow-unguarded-policy-objects)", err)
	}
	return fmt.Sprintf("policy webhook not verified (%v); NamespacedCedarPolicy objects are not served until it is", err)
}

// registerWebhookMetrics adds kcedar_policy_webhook_verified to reg (none
// without --policy-objects).
func (po *policyObjects) registerWebhookMetrics(reg prometheus.Registerer) error {
	if po == nil {
		return nil
	}
	return reg.Register(po.webhook)
}

// webhookWait bounds how long the source waits for the policy webhook's
// first answer before it composes (without NamespacedCedarPolicy objects,
// if the webhook is not verified by then).
const webhookWait = 10 * time.Second

// start runs the policy webhook's verifier and the source: the files load
// with the objects once they have synced, so files never serve without the
// objects' policies.
func (po *policyObjects) start(ctx context.Context, fs *cedar.FileSource, logger *slog.Logger) {
	go po.webhook.Run(ctx, po.client)
	go func() {
		// The first set waits for the webhook's first answer, so a
		// guarded cluster does not start without its namespaced policies.
		select {
		case <-po.webhook.Decided():
		case <-time.After(webhookWait):
		case <-ctx.Done():
			return
		}
		if err := fs.Run(ctx); err != nil && ctx.Err() == nil {
			logger.Error("policy object source stopped; not ready", "err", err)
		}
	}()
}
