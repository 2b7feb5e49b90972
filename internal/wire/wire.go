// Package wire holds the KEP-5681 (conditional authorization) API types that
// no released k8s.io/api has yet, named as upstream names them so they can be
// swapped for the real ones: the SubjectAccessReview additions of
// authorization.k8s.io/v1 and the AuthorizationConditionsReview of
// authorization.k8s.io/v1alpha1, in both the upstream shape and the seed
// draft's shape.
package wire

import (
	admissionv1 "k8s.io/api/admission/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// DecisionType is the kind of a ConditionsAwareDecision; as a list in
// AuthorizationOptions it says which kinds the caller handles.
type DecisionType string

const (
	DecisionTypeAllow         DecisionType = "Allow"
	DecisionTypeDeny          DecisionType = "Deny"
	DecisionTypeNoOpinion     DecisionType = "NoOpinion"
	DecisionTypeConditionsMap DecisionType = "ConditionsMap"
	DecisionTypeUnion         DecisionType = "Union"
)

// AuthorizationOptions is spec.authorizationOptions of a SubjectAccessReview.
type AuthorizationOptions struct {
	HandledDecisionTypes []DecisionType `json:"handledDecisionTypes,omitempty"`
}

// Handles reports whether the caller handles decisions of type t.
func (o *AuthorizationOptions) Handles(t DecisionType) bool {
	if o == nil {
		return false
	}
	for _, h := range o.HandledDecisionTypes {
		if h == t {
			return true
		}
	}
	return false
}

// SubjectAccessReviewSpec is authorization.k8s.io/v1's spec with the KEP's
// fields (upstream's authorizationOptions and the draft's conditionalAuthorization).
type SubjectAccessReviewSpec struct {
	authorizationv1.SubjectAccessReviewSpec
	AuthorizationOptions     *AuthorizationOptions                  `json:"authorizationOptions,omitempty"`
	ConditionalAuthorization *ConditionalAuthorizationConfiguration `json:"conditionalAuthorization,omitempty"`
}

// SubjectAccessReviewStatus is authorization.k8s.io/v1's status with the KEP's
// fields. A conditional answer has Allowed and Denied false.
type SubjectAccessReviewStatus struct {
	authorizationv1.SubjectAccessReviewStatus
	ConditionalDecision *ConditionsAwareDecision          `json:"conditionalDecision,omitempty"`
	ConditionsChain     []SubjectAccessReviewConditionSet `json:"conditionsChain,omitempty"`
}

// SubjectAccessReview is a SubjectAccessReview with the KEP's fields.
type SubjectAccessReview struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              SubjectAccessReviewSpec   `json:"spec"`
	Status            SubjectAccessReviewStatus `json:"status,omitempty"`
}

// ConditionsAwareDecision is an authorizer's decision: concrete (Allow, Deny,
// NoOpinion), a ConditionsMap, or an ordered Union of authorizers' decisions.
type ConditionsAwareDecision struct {
	Type          DecisionType     `json:"type"`
	Allow         *DecisionDetails `json:"allow,omitempty"`
	Deny          *DecisionDetails `json:"deny,omitempty"`
	NoOpinion     *DecisionDetails `json:"noOpinion,omitempty"`
	ConditionsMap *ConditionsMap   `json:"conditionsMap,omitempty"`
	Union         []UnionMember    `json:"union,omitempty"`
}

// DecisionDetails explains a concrete decision.
type DecisionDetails struct {
	Reason          string `json:"reason,omitempty"`
	EvaluationError string `json:"evaluationError,omitempty"`
}

// ConditionsMap holds conditions by effect: the list a condition sits in is
// its effect.
type ConditionsMap struct {
	DenyConditions      []Condition `json:"denyConditions,omitempty"`
	NoOpinionConditions []Condition `json:"noOpinionConditions,omitempty"`
	AllowConditions     []Condition `json:"allowConditions,omitempty"`
}

// Condition is one opaque condition.
type Condition struct {
	ID          string `json:"id"`
	Type        string `json:"type"`
	Condition   string `json:"condition"`
	Description string `json:"description,omitempty"`
}

// UnionMember is one authorizer's decision in an ordered union.
type UnionMember struct {
	AuthorizerName string                  `json:"authorizerName"`
	Decision       ConditionsAwareDecision `json:"decision"`
}

// Limits from the upstream API.
const (
	MaxConditions           = 128
	MaxConditionBytes       = 10240
	MaxDescriptionBytes     = 1024
	DraftMaxConditionBytes  = 1024
	ConditionsReviewVersion = "authorization.k8s.io/v1alpha1"
	ConditionsReviewKind    = "AuthorizationConditionsReview"
)

// AuthorizationConditionsReview (authorization.k8s.io/v1alpha1) is the
// callback: the API server sends the decision back with the admission data.
// Request and Response carry both the upstream and the draft fields.
type AuthorizationConditionsReview struct {
	metav1.TypeMeta `json:",inline"`
	Request         *AuthorizationConditionsRequest  `json:"request,omitempty"`
	Response        *AuthorizationConditionsResponse `json:"response,omitempty"`
}

// AuthorizationConditionsRequest: upstream sets Decision and AdmissionRequest;
// the draft sets ConditionSets and the ConditionData fields.
type AuthorizationConditionsRequest struct {
	Decision         *ConditionsAwareDecision      `json:"decision,omitempty"`
	AdmissionRequest *admissionv1.AdmissionRequest `json:"admissionRequest,omitempty"`

	ConditionSets []SubjectAccessReviewConditionSet `json:"conditionSets,omitempty"`
	Operation     string                            `json:"operation,omitempty"`
	Object        runtime.RawExtension              `json:"object,omitempty"`
	OldObject     runtime.RawExtension              `json:"oldObject,omitempty"`
	Options       runtime.RawExtension              `json:"options,omitempty"`
	// Name and Namespace are not in the draft's ConditionData; kcedar reads
	// them when a caller sends them, else takes them from the objects.
	Name      string `json:"name,omitempty"`
	Namespace string `json:"namespace,omitempty"`
}

// AuthorizationConditionsResponse: upstream sets UID and Decision; the draft
// sets Allowed, Denied, Reason and EvaluationError.
type AuthorizationConditionsResponse struct {
	UID      types.UID                `json:"uid,omitempty"`
	Decision *ConditionsAwareDecision `json:"decision,omitempty"`

	Allowed         bool   `json:"allowed"`
	Denied          bool   `json:"denied,omitempty"`
	Reason          string `json:"reason,omitempty"`
	EvaluationError string `json:"evaluationError,omitempty"`
}

// Draft shapes (the seed's KEP text).

// ConditionsMode is the draft's spec.conditionalAuthorization.mode.
type ConditionsMode string

const (
	ConditionsModeNone          ConditionsMode = ""
	ConditionsModeHumanReadable ConditionsMode = "HumanReadable"
	ConditionsModeOptimized     ConditionsMode = "Optimized"
)

// ConditionalAuthorizationConfiguration is the draft's spec.conditionalAuthorization.
type ConditionalAuthorizationConfiguration struct {
	Mode ConditionsMode `json:"mode,omitempty"`
}

// SubjectAccessReviewConditionSet is one authorizer's entry in the draft's
// status.conditionsChain.
type SubjectAccessReviewConditionSet struct {
	Allowed        bool                           `json:"allowed,omitempty"`
	Denied         bool                           `json:"denied,omitempty"`
	FailureMode    string                         `json:"failureMode,omitempty"`
	AuthorizerName string                         `json:"authorizerName"`
	Conditions     []SubjectAccessReviewCondition `json:"conditions,omitempty"`
}

// SubjectAccessReviewConditionEffect is a draft condition's effect.
type SubjectAccessReviewConditionEffect string

const (
	ConditionEffectAllow     SubjectAccessReviewConditionEffect = "Allow"
	ConditionEffectDeny      SubjectAccessReviewConditionEffect = "Deny"
	ConditionEffectNoOpinion SubjectAccessReviewConditionEffect = "NoOpinion"
)

// SubjectAccessReviewCondition is a draft condition.
type SubjectAccessReviewCondition struct {
	ID          string                             `json:"id"`
	Effect      SubjectAccessReviewConditionEffect `json:"effect"`
	Type        string                             `json:"type"`
	Condition   string                             `json:"condition"`
	Description string                             `json:"description,omitempty"`
}
