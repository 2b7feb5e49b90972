package webhooks

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
)

// waitVerified checks, once the verifier settled, that v reports want.
func waitVerified(t *testing.T, v *Verifier, want bool, what string) {
	t.Helper()
	synctest.Wait() // in the test's bubble: the verifier handled every change
	if v.Verified() != want {
		t.Fatalf("%s: verified is not %v", what, want)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(v)
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 || mfs[0].GetName() != "kcedar_admission_webhook_verified" {
		t.Fatalf("%s: metrics %v, %v", what, mfs, err)
	}
	if got := mfs[0].GetMetric()[0].GetGauge().GetValue(); (got == 1) != want {
		t.Fatalf("%s: kcedar_admission_webhook_verified %v", what, got)
	}
}

// The verifier follows the configuration as it is created, weakened,
// fixed and deleted, ignores other configurations, and retries a
// connection that fails.
func TestVerifier(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset()
		var attempts atomic.Int32
		connect := func() (kubernetes.Interface, error) {
			if attempts.Add(1) < 3 {
				return nil, errors.New("no kubeconfig yet")
			}
			return client, nil
		}
		v := NewVerifier("kcedar-conditions", nil)
		v.ConnectRetry = 10 * time.Millisecond
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		done := make(chan struct{})
		go func() { v.Run(ctx, connect); close(done) }()
		vwcs := client.AdmissionregistrationV1().ValidatingWebhookConfigurations()

		other := printedWebhook()
		other.Name = "something-else"
		if _, err := vwcs.Create(ctx, other, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// A second on the bubble's clock: the connection retries succeeded
		// and the informer saw the other configuration.
		time.Sleep(time.Second)
		synctest.Wait()
		if attempts.Load() < 3 {
			t.Fatalf("%d connection attempts in a second", attempts.Load())
		}
		if v.Verified() {
			t.Fatal("verified by another configuration")
		}
		printed := printedWebhook()
		bypass := Bypass{ServiceAccount: "kcedar-system/kcedar", ControlPlane: true}
		printed.Webhooks[0].MatchConditions, _ = bypass.AdmissionMatchConditions()
		if _, err := vwcs.Create(ctx, printed, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitVerified(t, v, true, "created")
		// The webhook sees everyone but the identities its match
		// conditions leave out.
		if !v.Sees("alice", []string{"dev"}) || v.Sees("admin", []string{"system:masters"}) || v.Sees("system:serviceaccount:kcedar-system:kcedar", nil) {
			t.Fatal("Sees does not follow the verified webhook's match conditions")
		}
		if attempts.Load() < 3 {
			t.Fatalf("connected after %d attempts", attempts.Load())
		}
		weak := printedWebhook()
		ignore := admissionregistrationv1.Ignore
		weak.Webhooks[0].FailurePolicy = &ignore
		if _, err := vwcs.Update(ctx, weak, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitVerified(t, v, false, "failurePolicy Ignore")
		if v.Sees("alice", []string{"dev"}) {
			t.Fatal("an unverified webhook sees alice")
		}
		if _, err := vwcs.Update(ctx, printedWebhook(), metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitVerified(t, v, true, "fixed")
		if !v.Sees("admin", []string{"system:masters"}) {
			t.Fatal("the webhook without match conditions does not see system:masters")
		}
		if err := vwcs.Delete(ctx, "kcedar-conditions", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitVerified(t, v, false, "deleted")
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("Run did not return after ctx ended")
		}
	})
}
