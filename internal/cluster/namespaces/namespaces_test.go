package namespaces

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

func labelsOf(obj map[string]any) map[string]any {
	md, _ := obj["metadata"].(map[string]any)
	l, _ := md["labels"].(map[string]any)
	return l
}

func TestInformer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewSimpleClientset(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a", ResourceVersion: "1", Labels: map[string]string{"team": "a"}}})
		n := NewInformer(client)
		if _, ok := n.Namespace("a"); ok {
			t.Fatal("answered before the first list")
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go n.Run(ctx)
		if !cache.WaitForCacheSync(ctx.Done(), n.HasSynced) {
			t.Fatal("no sync")
		}
		// In the bubble, Wait returns once the informer handled what the fake
		// client sent it: then cond must hold.
		waitFor := func(what string, cond func() bool) {
			t.Helper()
			synctest.Wait()
			if !cond() {
				t.Fatalf("not the case once the informer settled: %s", what)
			}
		}
		waitFor("namespace a", func() bool { _, ok := n.Namespace("a"); return ok })
		obj, _ := n.Namespace("a")
		if obj["apiVersion"] != "v1" || obj["kind"] != "Namespace" || labelsOf(obj)["team"] != "a" {
			t.Fatalf("namespace a: %v", obj)
		}
		ns, _ := client.CoreV1().Namespaces().Get(ctx, "a", metav1.GetOptions{})
		ns.Labels["restricted"] = "yes"
		ns.ResourceVersion = "2"
		if _, err := client.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor("the relabel", func() bool { o, _ := n.Namespace("a"); return labelsOf(o)["restricted"] == "yes" })
		if err := client.CoreV1().Namespaces().Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor("the delete", func() bool { _, ok := n.Namespace("a"); return !ok })
	})
}

// A watch that fails for longer than MaxStaleness makes every namespace
// unknown; an event after the error makes the cache fresh again.
func TestInformerStaleness(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewSimpleClientset(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a"}})
		n := NewInformer(client)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go n.Run(ctx)
		cache.WaitForCacheSync(ctx.Done(), n.HasSynced)
		synctest.Wait()
		if _, ok := n.Namespace("a"); !ok {
			t.Fatal("namespace a never appeared")
		}
		now := time.Now()
		n.now = func() time.Time { return now }
		n.lastEvent.Store(now.Add(-5 * time.Minute).UnixNano())
		n.lastError.Store(now.Add(-n.MaxStaleness / 2).UnixNano())
		if _, ok := n.Namespace("a"); !ok {
			t.Error("unknown within the staleness window")
		}
		n.lastError.Store(now.Add(-2 * n.MaxStaleness).UnixNano())
		if _, ok := n.Namespace("a"); ok {
			t.Error("answered from a cache whose watch failed longer ago than MaxStaleness")
		}
		n.lastEvent.Store(now.UnixNano())
		if _, ok := n.Namespace("a"); !ok {
			t.Error("still unknown after an event")
		}
	})
}
