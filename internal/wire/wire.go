// Package wire holds the KEP-5681 (conditional authorization) API types as
// Kubernetes 1.38 ships them (k8s.io/api v0.38, alpha), named as upstream
// names them so they can be swapped for the real ones once the root module
// moves to that release: the SubjectAccessReview additions of
// authorization.k8s.io/v1 and the AuthorizationConditionsReview of
// authorization.k8s.io/v1alpha1.
package wire

import (
	"encoding/json"

	admissionv1 "k8s.io/api/admission/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// conditionalDecisionTypes are the types a caller must handle to be sent
// conditions (k8s.io/api authorization/v1 SupportsConditionalAuthorization).
var conditionalDecisionTypes = []DecisionType{DecisionTypeAllow, DecisionTypeDeny, DecisionTypeNoOpinion, DecisionTypeConditionsMap, DecisionTypeUnion}

// SupportsConditions reports whether the caller handles every decision type
// of conditional authorization (Allow, Deny, NoOpinion, ConditionsMap and
// Union), as upstream requires before it sends or accepts a
// conditionalDecision.
func (o *AuthorizationOptions) SupportsConditions() bool {
	for _, t := range conditionalDecisionTypes {
		if !o.Handles(t) {
			return false
		}
	}
	return true
}

// SubjectAccessReviewSpec is authorization.k8s.io/v1's spec with the KEP's
// authorizationOptions.
type SubjectAccessReviewSpec struct {
	authorizationv1.SubjectAccessReviewSpec
	AuthorizationOptions *AuthorizationOptions `json:"authorizationOptions,omitempty"`
	// UnsupportedConditionalAuthorization is spec.conditionalAuthorization,
	// a field of an early KEP-5681 proposal that no Kubernetes release
	// sends: a review that carries it is refused.
	UnsupportedConditionalAuthorization json.RawMessage `json:"conditionalAuthorization,omitempty"`
}

// SubjectAccessReviewStatus is authorization.k8s.io/v1's status with the KEP's
// conditionalDecision. A conditional answer has Allowed and Denied false.
type SubjectAccessReviewStatus struct {
	authorizationv1.SubjectAccessReviewStatus
	ConditionalDecision *ConditionsAwareDecision `json:"conditionalDecision,omitempty"`
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
	ConditionsReviewVersion = "authorization.k8s.io/v1alpha1"
	ConditionsReviewKind    = "AuthorizationConditionsReview"
)

// AuthorizationConditionsReview (authorization.k8s.io/v1alpha1) is the
// callback: the API server sends the decision back with the admission data.
type AuthorizationConditionsReview struct {
	metav1.TypeMeta `json:",inline"`
	Request         *AuthorizationConditionsRequest  `json:"request,omitempty"`
	Response        *AuthorizationConditionsResponse `json:"response,omitempty"`
}

// AuthorizationConditionsRequest is the decision the authorizer returned and
// the request's admission data.
type AuthorizationConditionsRequest struct {
	Decision         *ConditionsAwareDecision      `json:"decision,omitempty"`
	AdmissionRequest *admissionv1.AdmissionRequest `json:"admissionRequest,omitempty"`
	// UnsupportedConditionSets is request.conditionSets, of an early
	// KEP-5681 proposal that no Kubernetes release sends: a review that
	// carries it is refused.
	UnsupportedConditionSets json.RawMessage `json:"conditionSets,omitempty"`
}

// AuthorizationConditionsResponse is the evaluated decision, for the
// admission request of UID.
type AuthorizationConditionsResponse struct {
	UID      types.UID               `json:"uid"`
	Decision ConditionsAwareDecision `json:"decision"`
}
