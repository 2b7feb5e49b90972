package webhooks

import (
	"context"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// watchConfiguration watches the ValidatingWebhookConfiguration name on
// client with an informer (list and watch by a metadata.name field
// selector) until ctx ends, and hands each version of it to observe, or
// reports why it is missing (not found once listed, or deleted). The
// verifiers of both webhooks use it.
func watchConfiguration(ctx context.Context, client kubernetes.Interface, name string, observe func(*admissionregistrationv1.ValidatingWebhookConfiguration), report func(error)) {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
	}))
	informer := factory.Admissionregistration().V1().ValidatingWebhookConfigurations().Informer()
	handle := func(obj any) {
		if vwc, ok := obj.(*admissionregistrationv1.ValidatingWebhookConfiguration); ok && vwc.Name == name {
			observe(vwc)
		}
	}
	reg, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    handle,
		UpdateFunc: func(_, obj any) { handle(obj) },
		DeleteFunc: func(any) { report(fmt.Errorf("ValidatingWebhookConfiguration %s was deleted", name)) },
	})
	if err != nil {
		report(err)
		return
	}
	go informer.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		return
	}
	if _, exists, _ := informer.GetStore().GetByKey(name); !exists {
		report(fmt.Errorf("ValidatingWebhookConfiguration %s not found", name))
	}
	<-ctx.Done()
}
