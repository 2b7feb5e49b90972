// Package policyobjects serves Cedar policies stored as Kubernetes objects:
// the kcedar.dev/v1alpha1 CedarPolicy (cluster-scoped) and
// NamespacedCedarPolicy (confined to its namespace) kinds, their CRDs, an
// informer-based source that feeds cedar.Store, the status one elected
// replica writes back, and the admission check that refuses invalid policies
// at write time.
package policyobjects

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// API group, version and kinds.
const (
	Group   = "kcedar.dev"
	Version = "v1alpha1"

	KindCluster    = "CedarPolicy"
	KindNamespaced = "NamespacedCedarPolicy"

	ResourceCluster    = "cedarpolicies"
	ResourceNamespaced = "namespacedcedarpolicies"

	// MaxContentBytes bounds spec.content (the CRD's maxLength): well under
	// etcd's 1.5 MiB object limit, and under the webhook's 1 MiB body limit
	// with room for the AdmissionReview around it.
	MaxContentBytes = 256 << 10

	// ConditionAccepted is the status condition that says whether the
	// object's policies are valid against the schema kcedar serves.
	ConditionAccepted = "Accepted"
	// ReasonSchemaChanged: Accepted=False because the object's serving
	// policies do not validate against the cluster's new schema (a CRD
	// removed or changed); the last good set keeps serving with the
	// previous schema.
	ReasonSchemaChanged = "SchemaChanged"
)

// GroupVersion of the kinds.
var GroupVersion = schema.GroupVersion{Group: Group, Version: Version}

// Resources of the two kinds.
var (
	ClusterResource    = GroupVersion.WithResource(ResourceCluster)
	NamespacedResource = GroupVersion.WithResource(ResourceNamespaced)
)

// PolicySpec holds Cedar text: one or more policies.
type PolicySpec struct {
	Content string `json:"content"`
}

// PolicyStatus is written by the replica holding the status lease.
type PolicyStatus struct {
	ObservedGeneration int64              `json:"observedGeneration,omitempty"`
	Conditions         []metav1.Condition `json:"conditions,omitempty"`
	// Policies are the ids of the policies the object holds, as decisions
	// and the decision log name them.
	Policies []string `json:"policies,omitempty"`
	// PolicyCount is len(Policies), for the printer column.
	PolicyCount int `json:"policyCount,omitempty"`
}

// CedarPolicy is cluster-scoped Cedar text; its policies apply to every request.
type CedarPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              PolicySpec   `json:"spec"`
	Status            PolicyStatus `json:"status,omitempty"`
}

// CedarPolicyList is a list of CedarPolicy.
type CedarPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CedarPolicy `json:"items"`
}

// NamespacedCedarPolicy is Cedar text whose policies only ever apply to
// requests in the object's namespace (permits only).
type NamespacedCedarPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              PolicySpec   `json:"spec"`
	Status            PolicyStatus `json:"status,omitempty"`
}

// NamespacedCedarPolicyList is a list of NamespacedCedarPolicy.
type NamespacedCedarPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NamespacedCedarPolicy `json:"items"`
}

// DeepCopyInto copies s into out.
func (s *PolicyStatus) DeepCopyInto(out *PolicyStatus) {
	*out = *s
	if s.Conditions != nil {
		out.Conditions = make([]metav1.Condition, len(s.Conditions))
		for i := range s.Conditions {
			s.Conditions[i].DeepCopyInto(&out.Conditions[i])
		}
	}
	if s.Policies != nil {
		out.Policies = append([]string(nil), s.Policies...)
	}
}

// DeepCopyInto copies p into out.
func (p *CedarPolicy) DeepCopyInto(out *CedarPolicy) {
	*out = *p
	out.TypeMeta = p.TypeMeta
	p.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	p.Status.DeepCopyInto(&out.Status)
}

// DeepCopy returns a copy of p.
func (p *CedarPolicy) DeepCopy() *CedarPolicy {
	if p == nil {
		return nil
	}
	out := new(CedarPolicy)
	p.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (p *CedarPolicy) DeepCopyObject() runtime.Object { return p.DeepCopy() }

// DeepCopyObject implements runtime.Object.
func (l *CedarPolicyList) DeepCopyObject() runtime.Object {
	if l == nil {
		return nil
	}
	out := &CedarPolicyList{TypeMeta: l.TypeMeta}
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]CedarPolicy, len(l.Items))
		for i := range l.Items {
			l.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
	return out
}

// DeepCopyInto copies p into out.
func (p *NamespacedCedarPolicy) DeepCopyInto(out *NamespacedCedarPolicy) {
	*out = *p
	p.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	p.Status.DeepCopyInto(&out.Status)
}

// DeepCopy returns a copy of p.
func (p *NamespacedCedarPolicy) DeepCopy() *NamespacedCedarPolicy {
	if p == nil {
		return nil
	}
	out := new(NamespacedCedarPolicy)
	p.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (p *NamespacedCedarPolicy) DeepCopyObject() runtime.Object { return p.DeepCopy() }

// DeepCopyObject implements runtime.Object.
func (l *NamespacedCedarPolicyList) DeepCopyObject() runtime.Object {
	if l == nil {
		return nil
	}
	out := &NamespacedCedarPolicyList{TypeMeta: l.TypeMeta}
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]NamespacedCedarPolicy, len(l.Items))
		for i := range l.Items {
			l.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
	return out
}

// AddToScheme registers the kinds.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &CedarPolicy{}, &CedarPolicyList{}, &NamespacedCedarPolicy{}, &NamespacedCedarPolicyList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

// SourceName is how an object's policies are named in positions, default
// policy ids and diagnostics: "CedarPolicy/<name>" or
// "NamespacedCedarPolicy/<namespace>/<name>".
func SourceName(kind, namespace, name string) string {
	if namespace == "" {
		return kind + "/" + name
	}
	return kind + "/" + namespace + "/" + name
}
