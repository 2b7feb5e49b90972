package residual

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// ConditionsRecord is authorizer.ConditionsData as a record, as
// authorizer.AttributesRecord is authorizer.Attributes: what conditions
// are evaluated against in admission.
//
//	data := residual.ConditionsRecord{Operation: "CREATE", Resource: corev1.SchemeGroupVersion.WithResource("pods"),
//		Kind: corev1.SchemeGroupVersion.WithKind("Pod"), Namespace: pod.Namespace, Name: pod.Name, Object: pod, UserInfo: user}
//	decision, reason, err := evaluator.EvaluateConditions(ctx, conditions, data)
//
// Objects are read as the JSON the conditions callback carries: a typed
// object must be the versioned (external) type, unstructured, or a
// *runtime.Unknown holding JSON.
type ConditionsRecord struct {
	Operation         authorizer.AdmissionOperation
	Resource          schema.GroupVersionResource
	Subresource       string
	Kind              schema.GroupVersionKind
	Namespace, Name   string
	Object, OldObject runtime.Object
	OperationOptions  runtime.Object
	DryRun            bool
	UserInfo          user.Info
}

var _ authorizer.ConditionsData = ConditionsRecord{}

func (r ConditionsRecord) GetName() string                             { return r.Name }
func (r ConditionsRecord) GetNamespace() string                        { return r.Namespace }
func (r ConditionsRecord) GetResource() schema.GroupVersionResource    { return r.Resource }
func (r ConditionsRecord) GetSubresource() string                      { return r.Subresource }
func (r ConditionsRecord) GetOperation() authorizer.AdmissionOperation { return r.Operation }
func (r ConditionsRecord) GetOperationOptions() runtime.Object         { return r.OperationOptions }
func (r ConditionsRecord) IsDryRun() bool                              { return r.DryRun }
func (r ConditionsRecord) GetObject() runtime.Object                   { return r.Object }
func (r ConditionsRecord) GetOldObject() runtime.Object                { return r.OldObject }
func (r ConditionsRecord) GetKind() schema.GroupVersionKind            { return r.Kind }
func (r ConditionsRecord) GetUserInfo() user.Info                      { return r.UserInfo }
