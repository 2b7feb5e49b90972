package schemarefresh

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
)

// What changes the cluster's API: CustomResourceDefinitions, and
// APIServices (aggregated APIs, whose availability also moves discovery).
var (
	CRDResource        = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	APIServiceResource = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}
)

// Watch triggers a check whenever a CustomResourceDefinition or an
// APIService is added, updated (spec or status) or deleted, until ctx ends.
// It watches metadata only (client-go metadata informers): a CRD's schema
// can be large and is read from discovery anyway. The objects listed at
// start trigger one check once both informers have synced (one may have
// changed between the startup's read of the schema and the list).
func (r *Refresher) Watch(ctx context.Context, client metadata.Interface) error {
	factory := metadatainformer.NewSharedInformerFactory(client, 0)
	handler := cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(_ any, initial bool) {
			if !initial {
				r.Trigger()
			}
		},
		UpdateFunc: func(any, any) { r.Trigger() },
		DeleteFunc: func(any) { r.Trigger() },
	}
	var synced []cache.InformerSynced
	for _, gvr := range []schema.GroupVersionResource{CRDResource, APIServiceResource} {
		inf := factory.ForResource(gvr).Informer()
		if _, err := inf.AddEventHandler(handler); err != nil {
			return err
		}
		synced = append(synced, inf.HasSynced)
	}
	factory.Start(ctx.Done())
	go func() {
		if cache.WaitForCacheSync(ctx.Done(), synced...) {
			kick(r.once) // one check, no follow-ups
		}
		<-ctx.Done()
		factory.Shutdown()
	}()
	return nil
}
