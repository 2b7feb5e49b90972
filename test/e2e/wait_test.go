//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// waitAllowed polls a SubjectAccessReview until spec is allowed (RBAC
// objects just written reach the authorizer's cache within a moment).
func waitAllowed(ctx context.Context, t *testing.T, admin kubernetes.Interface, spec authorizationv1.SubjectAccessReviewSpec) {
	t.Helper()
	for ctx.Err() == nil {
		sar, err := admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
		if err == nil && sar.Status.Allowed {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("never allowed: %+v", spec)
}
