package upstream

import (
	"encoding/json"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/entities"
)

// AdmissionData is what conditions see of data: the request's operation,
// resource, names and user, and its objects as the JSON an AdmissionReview
// carries. In process, objects are runtime.Objects: an unstructured object
// is its content; a typed one is marshalled by its JSON tags, so it must be
// the versioned (external) type the resource is served as, not an internal
// one.
func AdmissionData(data authorizer.ConditionsData) (*engine.AdmissionData, error) {
	if data == nil {
		return nil, fmt.Errorf("no admission data")
	}
	gvr := data.GetResource()
	d := &engine.AdmissionData{
		Operation: string(data.GetOperation()),
		APIGroup:  gvr.Group, APIVersion: gvr.Version, Resource: gvr.Resource, Subresource: data.GetSubresource(),
		Namespace: data.GetNamespace(), Name: data.GetName(),
	}
	if u := data.GetUserInfo(); u != nil {
		d.User = &entities.UserInfo{Name: u.GetName(), UID: u.GetUID(), Groups: u.GetGroups()}
		if extra := u.GetExtra(); len(extra) > 0 {
			d.User.Extra = make(map[string][]string, len(extra))
			for k, v := range extra {
				d.User.Extra[k] = v
			}
		}
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
