package accessreview

import (
	"context"
	"fmt"

	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/entities"
)

// APIVersion is the apiVersion of the review kinds.
const APIVersion = "authorization.kubernetes.io/v1"

// AuthorizationAttributes are the action of a ResourceAccessReview. Path
// (kcedar's addition) asks about a non-resource URL instead of a resource.
type AuthorizationAttributes struct {
	Namespace       string `json:"namespace,omitempty"`
	Verb            string `json:"verb"`
	ResourceGroup   string `json:"resourceGroup,omitempty"`
	ResourceVersion string `json:"resourceVersion,omitempty"`
	Resource        string `json:"resource,omitempty"`
	ResourceName    string `json:"resourceName,omitempty"`
	Subresource     string `json:"subresource,omitempty"`
	Path            string `json:"path,omitempty"`
}

// Request is the attributes as a request without a user. An empty name or
// namespace is open, as in a SubjectAccessReview.
func (a AuthorizationAttributes) Request() (*entities.Request, error) {
	if a.Verb == "" {
		return nil, fmt.Errorf("authorizationAttributes.verb is empty")
	}
	if a.Path != "" {
		if a.Resource != "" || a.ResourceGroup != "" || a.Subresource != "" || a.ResourceName != "" || a.Namespace != "" {
			return nil, fmt.Errorf("authorizationAttributes has both a path and resource attributes")
		}
		return &entities.Request{Verb: a.Verb, Path: a.Path}, nil
	}
	if a.Resource == "" {
		return nil, fmt.Errorf("authorizationAttributes has neither a resource nor a path")
	}
	return &entities.Request{
		ResourceRequest: true, Verb: a.Verb,
		APIGroup: a.ResourceGroup, APIVersion: a.ResourceVersion, Resource: a.Resource, Subresource: a.Subresource,
		Namespace: a.Namespace, Name: a.ResourceName,
	}, nil
}

// ResourceAccessReview asks who can perform an action. A
// LocalResourceAccessReview (or a top-level namespace) asks within one
// namespace.
type ResourceAccessReview struct {
	APIVersion              string                  `json:"apiVersion"`
	Kind                    string                  `json:"kind"`
	Namespace               string                  `json:"namespace,omitempty"`
	AuthorizationAttributes AuthorizationAttributes `json:"authorizationAttributes"`
}

// ResourceAccessReviewResponse is the design's response (namespace, users,
// groups) plus kcedar's entries.
type ResourceAccessReviewResponse struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	engine.AccessReview
}

// Request is the review's question: the top-level namespace wins.
func (r *ResourceAccessReview) Request() (*entities.Request, error) {
	a := r.AuthorizationAttributes
	if r.Namespace != "" {
		if a.Namespace != "" && a.Namespace != r.Namespace {
			return nil, fmt.Errorf("namespace %q and authorizationAttributes.namespace %q differ", r.Namespace, a.Namespace)
		}
		a.Namespace = r.Namespace
	}
	return a.Request()
}

// WhoCan answers a ResourceAccessReview with az. An invalid review is a
// *RequestError; a cancelled ctx is ctx's error.
func WhoCan(ctx context.Context, az engine.RuleResolver, r *ResourceAccessReview) (*ResourceAccessReviewResponse, error) {
	req, err := r.Request()
	if err != nil {
		return nil, &RequestError{Err: err}
	}
	kind := "ResourceAccessReviewResponse"
	if r.Kind == "LocalResourceAccessReview" {
		kind = "LocalResourceAccessReviewResponse"
	}
	rv, err := az.WhoCan(ctx, req)
	if err != nil {
		return nil, err
	}
	return &ResourceAccessReviewResponse{APIVersion: APIVersion, Kind: kind, Namespace: req.Namespace, AccessReview: rv}, nil
}

// RequestError is a review that cannot be answered as it is.
type RequestError struct{ Err error }

func (e *RequestError) Error() string { return e.Err.Error() }
func (e *RequestError) Unwrap() error { return e.Err }

// SubjectRulesReview asks what a subject can do in a namespace (all
// namespaces when empty): a SelfSubjectRulesReview for any subject.
type SubjectRulesReview struct {
	APIVersion string                 `json:"apiVersion"`
	Kind       string                 `json:"kind"`
	Spec       SubjectRulesReviewSpec `json:"spec"`
	Status     *engine.RulesReview    `json:"status,omitempty"`
}

// SubjectRulesReviewSpec is the subject and the namespace.
type SubjectRulesReviewSpec struct {
	User      string              `json:"user"`
	Groups    []string            `json:"groups,omitempty"`
	UID       string              `json:"uid,omitempty"`
	Extra     map[string][]string `json:"extra,omitempty"`
	Namespace string              `json:"namespace,omitempty"`
}

// WhatCan answers a SubjectRulesReview with az. An invalid review is a
// *RequestError; a cancelled ctx is ctx's error.
func WhatCan(ctx context.Context, az engine.RuleResolver, r *SubjectRulesReview) (*SubjectRulesReview, error) {
	if r.Spec.User == "" && len(r.Spec.Groups) == 0 {
		return nil, &RequestError{Err: fmt.Errorf("spec.user and spec.groups are empty")}
	}
	u := entities.UserInfo{Name: r.Spec.User, UID: r.Spec.UID, Groups: r.Spec.Groups, Extra: r.Spec.Extra}
	st, err := az.WhatCan(ctx, u, r.Spec.Namespace)
	if err != nil {
		return nil, err
	}
	return &SubjectRulesReview{APIVersion: APIVersion, Kind: "SubjectRulesReview", Spec: r.Spec, Status: &st}, nil
}

// Check refuses a review of another kind, or a local one without a namespace.
func (rar *ResourceAccessReview) Check() error {
	if rar.Kind != "ResourceAccessReview" && rar.Kind != "LocalResourceAccessReview" || rar.APIVersion != APIVersion {
		return fmt.Errorf("apiVersion %q kind %q is not accepted here; send %s ResourceAccessReview or LocalResourceAccessReview", rar.APIVersion, rar.Kind, APIVersion)
	}
	if rar.Kind == "LocalResourceAccessReview" && rar.Namespace == "" && rar.AuthorizationAttributes.Namespace == "" {
		return fmt.Errorf("a LocalResourceAccessReview needs a namespace")
	}
	return nil
}
