package upstream

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/kcedar/kcedar/internal/conditions"
	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/entities"
)

// AdmissionData is what conditions see of data: the request's operation,
// resource, names and user (strings as the callback's JSON carries them,
// wireString), and its objects as the JSON an AdmissionReview carries. In
// process, objects are runtime.Objects: a *runtime.Unknown is the JSON it
// holds; an unstructured object is its content; a typed one is marshalled
// by its JSON tags, so it must be the versioned (external) type the
// resource is served as, not an internal one.
func AdmissionData(data authorizer.ConditionsData) (*conditions.AdmissionData, error) {
	if data == nil {
		return nil, fmt.Errorf("no admission data")
	}
	gvr := data.GetResource()
	d := &conditions.AdmissionData{
		Operation: wireString(string(data.GetOperation())),
		APIGroup:  wireString(gvr.Group), APIVersion: wireString(gvr.Version), Resource: wireString(gvr.Resource), Subresource: wireString(data.GetSubresource()),
		Namespace: wireString(data.GetNamespace()), Name: wireString(data.GetName()),
		// The user as the callback's admissionRequest carries it, as the
		// conditions were bound to it (Request).
		User: userInfo(data.GetUserInfo()),
	}
	var err error
	kind := data.GetKind()
	if d.Object, err = objectJSON(data.GetObject(), kind); err != nil {
		return nil, fmt.Errorf("object: %w", err)
	}
	if d.OldObject, err = objectJSON(data.GetOldObject(), kind); err != nil {
		return nil, fmt.Errorf("oldObject: %w", err)
	}
	return d, nil
}

// objectJSON is o as JSON, nil for no object. Conditions read an object
// under its version, so a typed object without apiVersion and kind (Go
// objects in process usually have none) gets those of kind, the request's.
func objectJSON(o runtime.Object, kind schema.GroupVersionKind) ([]byte, error) {
	if o == nil {
		return nil, nil
	}
	if v := reflect.ValueOf(o); v.Kind() == reflect.Pointer && v.IsNil() {
		return nil, nil
	}
	if u, ok := o.(*runtime.Unknown); ok {
		// The JSON as it came (the conditions callback's): read as it is.
		if u.ContentType != "" && u.ContentType != runtime.ContentTypeJSON {
			return nil, fmt.Errorf("content type %q is not JSON", u.ContentType)
		}
		if len(u.Raw) == 0 {
			return nil, nil
		}
		return u.Raw, nil
	}
	if u, ok := o.(runtime.Unstructured); ok {
		return json.Marshal(u.UnstructuredContent())
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		return nil, err
	}
	if content["apiVersion"] == nil && content["kind"] == nil && !kind.Empty() {
		content["apiVersion"], content["kind"] = kind.GroupVersion().String(), kind.Kind
	}
	return json.Marshal(content)
}

// EvaluateConditions evaluates decision (kcedar's conditions, or a union
// holding them) against data with ev: the decision in the callback's wire
// shape (Wire), data as its admission request (AdmissionData). ev nil (no
// schema yet) and data that cannot be read are errors.
func EvaluateConditions(ev *conditions.Evaluator, decision authorizer.ConditionsAwareDecision, data authorizer.ConditionsData) (engine.Decision, error) {
	if ev == nil {
		return engine.Decision{}, errors.New("no schema to evaluate conditions with")
	}
	adm, err := AdmissionData(data)
	if err != nil {
		return engine.Decision{}, fmt.Errorf("malformed admission data: %w", err)
	}
	w := Wire(decision)
	return ev.EvaluateDecision(&w, adm), nil
}

// AdmissionRequestData is what conditions see of an AdmissionRequest: its
// objects as the JSON it carries.
func AdmissionRequestData(a *admissionv1.AdmissionRequest) *conditions.AdmissionData {
	d := &conditions.AdmissionData{
		Operation: string(a.Operation),
		APIGroup:  a.Resource.Group, APIVersion: a.Resource.Version, Resource: a.Resource.Resource, Subresource: a.SubResource,
		Namespace: a.Namespace, Name: a.Name,
		Object: a.Object.Raw, OldObject: a.OldObject.Raw,
		User: &entities.UserInfo{Name: a.UserInfo.Username, UID: a.UserInfo.UID, Groups: a.UserInfo.Groups},
	}
	if len(a.UserInfo.Extra) > 0 {
		d.User.Extra = make(map[string][]string, len(a.UserInfo.Extra))
		for k, v := range a.UserInfo.Extra {
			d.User.Extra[k] = v
		}
	}
	return d
}
