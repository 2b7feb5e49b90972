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

// GetName is the object's name.
func (r ConditionsRecord) GetName() string { return r.Name }

// GetNamespace is the object's namespace, "" for a cluster-scoped one.
func (r ConditionsRecord) GetNamespace() string { return r.Namespace }

// GetResource is the request's resource.
func (r ConditionsRecord) GetResource() schema.GroupVersionResource { return r.Resource }

// GetSubresource is the request's subresource, "" for none.
func (r ConditionsRecord) GetSubresource() string { return r.Subresource }

// GetOperation is the admission operation: CREATE, UPDATE, DELETE or CONNECT.
func (r ConditionsRecord) GetOperation() authorizer.AdmissionOperation { return r.Operation }

// GetOperationOptions are the operation's options (CreateOptions, ...).
func (r ConditionsRecord) GetOperationOptions() runtime.Object { return r.OperationOptions }

// IsDryRun reports whether the request is a dry run.
func (r ConditionsRecord) IsDryRun() bool { return r.DryRun }

// GetObject is the request's object; nil for a DELETE.
func (r ConditionsRecord) GetObject() runtime.Object { return r.Object }

// GetOldObject is the object as it was, for an UPDATE or a DELETE.
func (r ConditionsRecord) GetOldObject() runtime.Object { return r.OldObject }

// GetKind is the object's kind.
func (r ConditionsRecord) GetKind() schema.GroupVersionKind { return r.Kind }

// GetUserInfo is the requesting user.
func (r ConditionsRecord) GetUserInfo() user.Info { return r.UserInfo }
