package webhooks

import (
	"context"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
)

// APIServiceResource is the APIService kind (kube-aggregator's
// apiregistration.k8s.io/v1), read as unstructured objects: kcedar needs
// only spec.group, spec.version and whether spec.service is set.
var APIServiceResource = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// APIServices follows the cluster's APIServices with an informer, to tell
// the group versions kube-apiserver serves itself (a Local APIService: no
// spec.service; the built-in groups and those of CRDs) from those its
// aggregator proxies to an aggregated API server (spec.service set). A
// request proxied there passes none of kube-apiserver's admission webhooks,
// so kcedar's admission webhook never sees it: under --admission-enforcement
// a conditional allow on such a group version must not be answered Allow
// (MayBeAggregated). Until the informer has listed the APIServices, every
// group version may be aggregated.
type APIServices struct {
	// ConnectRetry is how often Run retries a connection that failed
	// (DefaultConnectRetry if 0).
	ConnectRetry time.Duration

	logger *slog.Logger
	// view is the informer's store and sync state; nil until Run has a
	// client.
	view atomic.Pointer[apiServiceView]
}

// apiServiceView is what MayBeAggregated reads: the informer's store of
// APIServices (unstructured, keyed by name) and whether it has synced.
type apiServiceView struct {
	store  cache.Store
	synced func() bool
}

// NewAPIServices returns an APIServices that knows nothing yet (every group
// version may be aggregated); Run it.
func NewAPIServices(logger *slog.Logger) *APIServices {
	if logger == nil {
		logger = slog.Default()
	}
	return &APIServices{logger: logger}
}

// MayBeAggregated reports whether requests of group and version may be
// served by an aggregated API server rather than by kube-apiserver itself:
// before the informer has synced, for a group version no APIService
// registers (a request for it is served by nobody, or by one registered
// since), and for one whose APIService has spec.service. A version of ""
// or "*" stands for every version of the group, a group of "*" for every
// group: then any aggregated match, or no match at all, counts.
func (a *APIServices) MayBeAggregated(group, version string) bool {
	v := a.view.Load()
	if v == nil || !v.synced() {
		return true
	}
	if group != "*" && version != "" && version != "*" {
		// An APIService's name is VERSION.GROUP (v1. for the core group);
		// kube-apiserver validates it so.
		obj, exists, err := v.store.GetByKey(version + "." + group)
		return err != nil || !exists || !localAPIService(obj)
	}
	matched := false
	for _, obj := range v.store.List() {
		g, ver := apiServiceGroupVersion(obj)
		if (group == "*" || g == group) && (version == "" || version == "*" || ver == version) {
			if !localAPIService(obj) {
				return true
			}
			matched = true
		}
	}
	return !matched
}

// localAPIService reports whether obj is an APIService that kube-apiserver
// serves itself: spec.service absent or null. Anything unreadable counts
// as aggregated.
func localAPIService(obj any) bool {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return false
	}
	svc, found, err := unstructured.NestedFieldNoCopy(u.Object, "spec", "service")
	return err == nil && (!found || svc == nil)
}

// apiServiceGroupVersion is obj's spec.group and spec.version ("" when
// unreadable).
func apiServiceGroupVersion(obj any) (group, version string) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return "", ""
	}
	group, _, _ = unstructured.NestedString(u.Object, "spec", "group")
	version, _, _ = unstructured.NestedString(u.Object, "spec", "version")
	return group, version
}

// Run follows the APIServices until ctx ends. connect builds the client;
// Run retries it until it succeeds (the kubeconfig may appear, or the API
// server come up, after kcedar starts), and until then every group version
// may be aggregated.
func (a *APIServices) Run(ctx context.Context, connect func() (dynamic.Interface, error)) {
	client, err := a.connect(ctx, connect)
	if err != nil {
		return // ctx ended
	}
	factory := dynamicinformer.NewDynamicSharedInformerFactory(client, 0)
	informer := factory.ForResource(APIServiceResource).Informer()
	aggregated := func(obj any) {
		g, v := apiServiceGroupVersion(obj)
		a.logger.Info("aggregated API: its requests bypass kube-apiserver's admission webhooks, so conditional allows on it are folded", "group", g, "version", v)
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			if !initial && !localAPIService(obj) {
				aggregated(obj)
			}
		},
		UpdateFunc: func(old, obj any) {
			if localAPIService(old) && !localAPIService(obj) {
				aggregated(obj)
			}
		},
	}); err != nil {
		a.logger.Error("APIServices: cannot watch them; conditional allows stay folded", "err", err)
		return
	}
	a.view.Store(&apiServiceView{store: informer.GetStore(), synced: informer.HasSynced})
	factory.Start(ctx.Done())
	if cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		a.logger.Info("APIServices listed: conditional allows are answered Allow only on the group versions kube-apiserver serves itself",
			"aggregated", aggregatedNames(informer.GetStore()))
	}
	<-ctx.Done()
	factory.Shutdown()
}

// connect calls connect until it succeeds or ctx ends, logging each new
// error.
func (a *APIServices) connect(ctx context.Context, connect func() (dynamic.Interface, error)) (dynamic.Interface, error) {
	interval := a.ConnectRetry
	if interval <= 0 {
		interval = DefaultConnectRetry
	}
	var client dynamic.Interface
	last := ""
	err := wait.PollUntilContextCancel(ctx, interval, true, func(context.Context) (bool, error) {
		c, err := connect()
		if err != nil {
			if err.Error() != last {
				last = err.Error()
				a.logger.Error("APIServices: connecting to the cluster; until connected, conditional allows are folded", "err", err)
			}
			return false, nil
		}
		client = c
		return true, nil
	})
	return client, err
}

// aggregatedNames lists the aggregated APIServices in store, sorted.
func aggregatedNames(store cache.Store) []string {
	out := []string{}
	for _, obj := range store.List() {
		if u, ok := obj.(*unstructured.Unstructured); ok && !localAPIService(obj) {
			out = append(out, u.GetName())
		}
	}
	slices.Sort(out)
	return out
}
