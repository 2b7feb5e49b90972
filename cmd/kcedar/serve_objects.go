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

	"github.com/kcedar/kcedar/internal/cedarlang/lint"
	"github.com/kcedar/kcedar/internal/cluster/policyobjects"
	"github.com/kcedar/kcedar/internal/cluster/webhooks"
	"github.com/kcedar/kcedar/internal/store"
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

// policyObjects is the running machinery for policy objects.
type policyObjects struct {
	source    *policyobjects.Source
	admission *policyobjects.AdmissionHandler
	status    *policyobjects.StatusWriter
	// webhook verifies the ValidatingWebhookConfiguration that guards
	// writes of policy objects (nil without --policy-objects).
	webhook *webhooks.PolicyVerifier
	client  kubernetes.Interface
}

// newPolicyObjects prepares the source, the admission handler and the status
// writer; nothing runs until start. connect is the cluster connection,
// called only with --policy-objects.
func newPolicyObjects(o *objectOptions, connect func(feature string) (*rest.Config, error), lintChecker *lint.Checker, store *store.Store, logger *slog.Logger) (*policyObjects, error) {
	checker := policyobjects.NewCheckerFrom(lintChecker)
	po := &policyObjects{admission: &policyobjects.AdmissionHandler{Checker: checker, Current: store.Current, Logger: logger}}
	if !o.enabled {
		return po, nil
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
	po.source = &policyobjects.Source{Store: store, Checker: checker, Client: dyn, Logger: logger}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	// Writes of policy objects are checked against the writer's own
	// rights with SubjectAccessReviews (kcedar's ServiceAccount may create
	// them: deploy/).
	po.admission.Escalation = &policyobjects.EscalationCheck{Reviewer: policyobjects.SARReviewer{Client: cs}}
	po.client = cs
	po.guard(o, logger)
	if o.writeStatus {
		host, _ := os.Hostname()
		var b [4]byte
		_, _ = rand.Read(b[:])
		po.status = &policyobjects.StatusWriter{Source: po.source, Client: dyn, Leases: cs.CoordinationV1(),
			Namespace: o.leaseNamespace, Name: o.leaseName, Identity: host + "_" + hex.EncodeToString(b[:]), Logger: logger}
		po.source.OnChange = po.status.Notify
	}
	return po, nil
}

// guard verifies the policy webhook. While it is not verified, writes of
// policy objects may bypass the escalation check, so NamespacedCedarPolicy
// objects (which namespace users may write) are not served unless
// --allow-unguarded-policy-objects; CedarPolicy objects are (their writers
// are cluster administrators by RBAC on a cluster-scoped kind).
func (po *policyObjects) guard(o *objectOptions, logger *slog.Logger) {
	po.webhook = webhooks.NewPolicyVerifier(o.webhookName, logger)
	if o.allowUnguarded {
		return
	}
	po.source.ServeNamespaced = po.webhook.Verified
	po.webhook.OnChange = po.source.Reoffer
}

// webhookProblem is /readyz's degraded detail about the policy webhook; ""
// when it is verified (or without --policy-objects).
func (po *policyObjects) webhookProblem() string {
	if po.webhook == nil {
		return ""
	}
	err := po.webhook.Problem()
	if err == nil {
		return ""
	}
	if po.source.ServeNamespaced == nil {
		return fmt.Sprintf("policy webhook not verified (%v); NamespacedCedarPolicy objects serve anyway (--allow-unguarded-policy-objects)", err)
	}
	return fmt.Sprintf("policy webhook not verified (%v); NamespacedCedarPolicy objects are not served until it is", err)
}

// registerWebhookMetrics adds kcedar_policy_webhook_verified to reg (none
// without --policy-objects).
func (po *policyObjects) registerWebhookMetrics(reg prometheus.Registerer) error {
	if po.webhook == nil {
		return nil
	}
	return reg.Register(po.webhook)
}

// webhookWait bounds how long the source waits for the policy webhook's
// first answer before it composes (without NamespacedCedarPolicy objects,
// if the webhook is not verified by then).
const webhookWait = 10 * time.Second

// start runs the source (and the status election); watchFiles starts the
// store's file watch once the objects have synced, so files never serve
// without the objects' policies.
func (po *policyObjects) start(ctx context.Context, watchFiles func(), logger *slog.Logger) {
	po.source.OnSynced = watchFiles
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
		if err := po.source.Run(ctx); err != nil && ctx.Err() == nil {
			logger.Error("policy object source stopped; not ready", "err", err)
		}
	}()
	if po.status != nil {
		go po.status.Run(ctx)
	}
}
