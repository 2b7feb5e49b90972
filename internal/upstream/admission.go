package upstream

import (
	"encoding/json"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/kcedar/kcedar/internal/engine"
)

// AdmissionData is what conditions see of data: the request's operation,
// resource, names and user (strings as the callback's JSON carries them,
// wireString), and its objects as the JSON an AdmissionReview carries. In
// process, objects are runtime.Objects: an unstructured object is its
// content; a typed one is marshalled by its JSON tags, so it must be the
// versioned (external) type the resource is served as, not an internal one.
func AdmissionData(data authorizer.ConditionsData) (*engine.AdmissionData, error) {
	if data == nil {
		return nil, fmt.Errorf("no admission data")
	}
	gvr := data.GetResource()
	d := &engine.AdmissionData{
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
