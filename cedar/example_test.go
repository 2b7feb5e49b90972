package cedar_test

import (
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
	"github.com/kcedar/kcedar/schemagen"
)

const policies = `
@id("dev-reads") @reason("developers read pods in dev")
permit (principal in k8s::Group::"dev", action in [k8s::Action::"get", k8s::Action::"list"], resource is core::pods)
when { resource.namespace == "dev" };

@id("no-secrets-for-contractors")
forbid (principal in k8s::Group::"contractors", action, resource is core::secrets);

@id("bob-on-n1") @reason("bob runs pods on node n1 only")
permit (principal == k8s::User::"bob", action == k8s::Action::"create", resource is core::pods)
when { resource has object && resource.object has v1 && resource.object.v1 has spec &&
       resource.object.v1.spec has nodeName && resource.object.v1.spec.nodeName == "n1" };
`

func newAuthorizer() *cedar.Authorizer {
	s, err := schemagen.Default()
	if err != nil {
		log.Fatal(err)
	}
	a, err := cedar.New(cedar.StaticPolicies(cedar.PolicyFile{Name: "team.cedar", Text: []byte(policies)}), s, cedar.Options{})
	if err != nil {
		log.Fatal(err)
	}
	return a
}

// Decide requests as k8s.io/apiserver's authorizers do.
func Example() {
	a := newAuthorizer()
	ctx := context.Background()
	for _, r := range []authorizer.AttributesRecord{
		{User: &user.DefaultInfo{Name: "jane", Groups: []string{"dev"}}, Verb: "list", Resource: "pods", APIVersion: "v1", Namespace: "dev", ResourceRequest: true},
		{User: &user.DefaultInfo{Name: "jane", Groups: []string{"dev"}}, Verb: "list", Resource: "pods", APIVersion: "v1", Namespace: "prod", ResourceRequest: true},
		{User: &user.DefaultInfo{Name: "carl", Groups: []string{"contractors"}}, Verb: "get", Resource: "secrets", APIVersion: "v1", Namespace: "dev", Name: "db", ResourceRequest: true},
	} {
		decision, reason, _ := a.Authorize(ctx, r)
		fmt.Printf("%s %s in %s: %v (%s)\n", r.User.GetName(), r.Verb+" "+r.Resource, r.Namespace, decision == authorizer.DecisionAllow, reason)
	}
	// Output:
	// jane list pods in dev: true (kcedar: allowed by policy dev-reads (developers read pods in dev))
	// jane list pods in prod: false (no policy applies)
	// carl get secrets in dev: false (kcedar: denied by policy no-secrets-for-contractors)
}

// A policy that reads the object of a write leaves a condition, which the
// authorizer evaluates in admission, once the object is known.
func ExampleAuthorizer_EvaluateConditions() {
	a := newAuthorizer()
	ctx := context.Background()
	bob := &user.DefaultInfo{Name: "bob"}
	d := a.ConditionsAwareAuthorize(ctx, authorizer.AttributesRecord{User: bob, Verb: "create", Resource: "pods", APIVersion: "v1", Namespace: "team", ResourceRequest: true})
	fmt.Println("conditional:", d.IsConditionsMap())
	for _, node := range []string{"n1", "n2"} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team"}, Spec: corev1.PodSpec{NodeName: node}}
		decision, _, _ := a.EvaluateConditions(ctx, d, podCreate{pod: pod, user: bob})
		fmt.Printf("on %s: allowed %v\n", node, decision == authorizer.DecisionAllow)
	}
	// Output:
	// conditional: true
	// on n1: allowed true
	// on n2: allowed false
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
