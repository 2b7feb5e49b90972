package residual_test

import (
	"bytes"
	"context"
	"fmt"
	"log"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/kcedar/kcedar/cedar"
	"github.com/kcedar/kcedar/residual"
	"github.com/kcedar/kcedar/schemagen"
)

// Conditions are judged by the keys and the schema alone: an evaluator with
// no policies reads and evaluates what an authorizer signed, and after a
// rotation that drops the signing key it refuses it.
func Example() {
	s, err := schemagen.Default()
	if err != nil {
		log.Fatal(err)
	}
	keys, err := residual.NewKeyring(residual.Key{ID: "k1", Secret: bytes.Repeat([]byte{1}, 32)})
	if err != nil {
		log.Fatal(err)
	}
	policy := `@id("bob-on-n1") permit (principal == k8s::User::"bob", action == k8s::Action::"create", resource is core::pods)
when { resource has object && resource.object has v1 && resource.object.v1 has spec &&
       resource.object.v1.spec has nodeName && resource.object.v1.spec.nodeName == "n1" };`
	authz, err := cedar.New(cedar.StaticPolicies(cedar.PolicyFile{Name: "bob.cedar", Text: []byte(policy)}), s, cedar.Options{Keys: keys})
	if err != nil {
		log.Fatal(err)
	}
	bob := &user.DefaultInfo{Name: "bob"}
	ctx := context.Background()
	d := authz.ConditionsAwareAuthorize(ctx, authorizer.AttributesRecord{User: bob, Verb: "create", Resource: "pods", APIVersion: "v1", Namespace: "team", ResourceRequest: true})
	ev, err := residual.NewEvaluator(s, keys, nil)
	if err != nil {
		log.Fatal(err)
	}
	data := podCreate{pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team"}, Spec: corev1.PodSpec{NodeName: "n1"}}, user: bob}
	for c := range d.ConditionsMap().AllowConditions() {
		fmt.Println("condition type:", c.GetType())
		text, err := ev.Explain(c, authorizer.DecisionAllow, data)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("checks:", text)
	}
	decision, _, _ := ev.EvaluateConditions(ctx, d, data)
	fmt.Println("signed with k1:", decision == authorizer.DecisionAllow)

	if err := keys.Rotate(residual.Key{ID: "k2", Secret: bytes.Repeat([]byte{2}, 32)}); err != nil {
		log.Fatal(err)
	}
	decision, _, _ = ev.EvaluateConditions(ctx, d, data)
	fmt.Println("after k1 is dropped:", decision == authorizer.DecisionAllow)
	// Output:
	// condition type: kcedar.dev/cedar-residual-v4
	// checks: resource.object has v1 && resource.object.v1 has spec && resource.object.v1.spec has nodeName && resource.object.v1.spec.nodeName == "n1"
	// signed with k1: true
	// after k1 is dropped: false
}

// podCreate is the admission data of a pod's creation.
type podCreate struct {
	pod  *corev1.Pod
	user user.Info
}

func (p podCreate) GetName() string      { return p.pod.Name }
func (p podCreate) GetNamespace() string { return p.pod.Namespace }
func (p podCreate) GetResource() schema.GroupVersionResource {
	return schema.GroupVersionResource{Version: "v1", Resource: "pods"}
}
func (p podCreate) GetSubresource() string                      { return "" }
func (p podCreate) GetOperation() authorizer.AdmissionOperation { return "CREATE" }
func (p podCreate) GetOperationOptions() runtime.Object         { return &metav1.CreateOptions{} }
func (p podCreate) IsDryRun() bool                              { return false }
func (p podCreate) GetObject() runtime.Object                   { return p.pod }
func (p podCreate) GetOldObject() runtime.Object                { return nil }
func (p podCreate) GetKind() schema.GroupVersionKind {
	return corev1.SchemeGroupVersion.WithKind("Pod")
}
func (p podCreate) GetUserInfo() user.Info { return p.user }
