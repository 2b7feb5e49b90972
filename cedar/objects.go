package cedar

import (
	"context"
	"errors"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/kcedar/kcedar/internal/cluster/policyobjects"
	"github.com/kcedar/kcedar/internal/store"
)

// The resources of the policy objects PolicyObjects reads: CedarPolicy
// (cluster-scoped) and NamespacedCedarPolicy, kcedar.dev/v1alpha1, each
// holding its Cedar text in spec.content.
var (
	CedarPolicyResource           = policyobjects.ClusterResource
	NamespacedCedarPolicyResource = policyobjects.NamespacedResource
)

// PolicyObjects are the CedarPolicy and NamespacedCedarPolicy objects
// (kcedar.dev/v1alpha1) of a cluster whose policies join a FileSource's:
// watched with informers, each object checked on its own (an invalid one
// keeps its last valid text serving, and says so in its status).
type PolicyObjects struct {
	// Client lists and watches the objects, and writes their status.
	Client dynamic.Interface
	// Kubernetes asks the cluster whether the writer of an object holds the
	// access it grants (SubjectAccessReviews, for the PolicyWebhook), and
	// holds the status Lease.
	Kubernetes kubernetes.Interface
	// ServeNamespaced, if set, is asked at every load: while it returns
	// false, the policies of NamespacedCedarPolicy objects (which namespace
	// users may write) are checked and reported but do not serve. Call
	// FileSource.Reoffer when its answer changes.
	ServeNamespaced func() bool
	// StatusLease, if set, elects through a Lease the one replica that
	// writes the objects' status; nil: this replica writes none.
	StatusLease *StatusLease
	// OnChange, if set, is called after the objects' texts changed (an
	// object written, added or deleted; not its status).
	OnChange func()
}

// StatusLease is the Lease that elects the replica writing the objects'
// status: its namespace (which must exist) and name, and this replica's
// identity in it.
type StatusLease struct {
	Namespace, Name, Identity string
}

// RefusedWrite is a write of a policy object PolicyWebhook refused.
type RefusedWrite struct {
	Operation       string // CREATE, UPDATE or DELETE
	Resource        string // cedarpolicies or namespacedcedarpolicies
	Namespace, Name string
	User            authenticationv1.UserInfo
	// Reason is invalid, duplicate-id, escalation, too-many-checks or
	// check-failed; Message says what the writer was told.
	Reason, Message string
}

// objectSource runs the policy objects of a FileSource.
type objectSource struct {
	source *policyobjects.Source
	status *policyobjects.StatusWriter // nil without a StatusLease
}

func newObjectSource(o *PolicyObjects, fs *FileSource, logger *slog.Logger) (*objectSource, error) {
	if o.Client == nil || o.Kubernetes == nil {
		return nil, errors.New("cedar.NewFileSource: PolicyObjects needs Client and Kubernetes")
	}
	ob := &objectSource{source: &policyobjects.Source{Store: fs.store, Checker: fs.serving, Client: o.Client, Logger: logger,
		ServeNamespaced: o.ServeNamespaced, OnObjectsChanged: o.OnChange}}
	// Writes of policy objects are checked against the writer's own rights
	// with SubjectAccessReviews.
	fs.admission.Escalation = &policyobjects.EscalationCheck{Reviewer: policyobjects.SARReviewer{Client: o.Kubernetes}}
	if l := o.StatusLease; l != nil {
		ob.status = &policyobjects.StatusWriter{Source: ob.source, Client: o.Client, Leases: o.Kubernetes.CoordinationV1(),
			Namespace: l.Namespace, Name: l.Name, Identity: l.Identity, Logger: logger}
		ob.source.OnChange = ob.status.Notify
	}
	return ob, nil
}

func (ob *objectSource) registerMetrics(reg prometheus.Registerer) error {
	if err := ob.source.RegisterMetrics(reg); err != nil {
		return err
	}
	if ob.status != nil {
		return ob.status.RegisterMetrics(reg)
	}
	return nil
}

// run runs the source (and the status election) until ctx ends;
// watchFiles starts the files' watch once the objects have synced.
func (ob *objectSource) run(ctx context.Context, watchFiles func()) error {
	ob.source.OnSynced = watchFiles
	if ob.status != nil {
		go ob.status.Run(ctx)
	}
	if err := ob.source.Run(ctx); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

func (ob *objectSource) rebase(sc store.SchemaCheck, checker *policyobjects.Checker) error {
	err := ob.source.Rebase(sc, checker)
	ob.notify()
	return err
}

func (ob *objectSource) dropPending() {
	ob.source.DropPending()
	ob.notify()
}

// notify asks for a status pass, if this replica may write status.
func (ob *objectSource) notify() {
	if ob.status != nil {
		ob.status.Notify()
	}
}

// leaseProblem is why the status Lease cannot be taken, "" if it can.
func (ob *objectSource) leaseProblem() string {
	if ob.status == nil {
		return ""
	}
	return ob.status.LeaseProblem()
}

// Reoffer loads the policy objects again, after ServeNamespaced changed its
// answer.
func (fs *FileSource) Reoffer() {
	if fs.objects != nil {
		fs.objects.source.Reoffer()
	}
}
