package kube138

import (
	"encoding/json"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/kcedar/kcedar/internal/conditions"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/tools/offline"
)

// requestCase is one request: the SubjectAccessReview kube-apiserver sends
// kcedar for it, and what admission sees of it (nil: admission does not
// see the request, e.g. a read).
type requestCase struct {
	name      string
	spec      authorizationv1.SubjectAccessReviewSpec
	admission *admissionData
	// expect, for the cases of a library test file, is what the file
	// expects (nil for generated cases).
	expect *offline.TestCase
}

// admissionData is what the admission chain sees of a request: the
// operation and the objects, in their external version (as admission
// versions them for a webhook); for CONNECT the object is the options
// (PodExecOptions).
type admissionData struct {
	operation         admission.Operation
	object, oldObject runtime.Object
}

// attributes are what kube-apiserver's authorization filter hands the
// authorizers for the request c describes (the webhook authorizer turns
// them back into c.spec).
func (c *requestCase) attributes() authorizer.AttributesRecord {
	s := c.spec
	u := &user.DefaultInfo{Name: s.User, UID: s.UID, Groups: s.Groups}
	for k, v := range s.Extra {
		if u.Extra == nil {
			u.Extra = map[string][]string{}
		}
		u.Extra[k] = v
	}
	a := authorizer.AttributesRecord{User: u}
	if na := s.NonResourceAttributes; na != nil {
		a.Verb, a.Path = na.Verb, na.Path
		return a
	}
	ra := s.ResourceAttributes
	a.ResourceRequest, a.Verb, a.Namespace, a.Name = true, ra.Verb, ra.Namespace, ra.Name
	a.APIGroup, a.APIVersion, a.Resource, a.Subresource = ra.Group, ra.Version, ra.Resource, ra.Subresource
	if fs := ra.FieldSelector; fs != nil {
		for _, r := range fs.Requirements {
			op := selection.Equals
			if r.Operator == metav1.FieldSelectorOpNotIn {
				op = selection.NotEquals
			}
			for _, v := range r.Values {
				a.FieldSelectorRequirements = append(a.FieldSelectorRequirements, fields.Requirement{Operator: op, Field: r.Key, Value: v})
			}
		}
	}
	if ls := ra.LabelSelector; ls != nil {
		for _, r := range ls.Requirements {
			op := map[metav1.LabelSelectorOperator]selection.Operator{metav1.LabelSelectorOpIn: selection.In, metav1.LabelSelectorOpNotIn: selection.NotIn,
				metav1.LabelSelectorOpExists: selection.Exists, metav1.LabelSelectorOpDoesNotExist: selection.DoesNotExist}[r.Operator]
			if req, err := labels.NewRequirement(r.Key, op, r.Values); err == nil {
				a.LabelSelectorRequirements = append(a.LabelSelectorRequirements, *req)
			}
		}
	}
	return a
}

// admissionAttributes are the admission attributes of c (nil without
// admission data), named as kube-apiserver names them: a create's name is
// its object's; the kind is the object's, else the resource's in s.
func (c *requestCase) admissionAttributes(s *schemagen.Schema) admission.Attributes {
	adm, ra := c.admission, c.spec.ResourceAttributes
	if adm == nil || ra == nil {
		return nil
	}
	name := ra.Name
	if name == "" && adm.object != nil && adm.operation == admission.Create {
		if u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(adm.object); err == nil {
			name, _, _ = unstructured.NestedString(u, "metadata", "name")
		}
	}
	kind := kindOf(s, ra, adm)
	version := ra.Version
	if version == "" {
		version = kind.Version
	}
	gvr := schema.GroupVersionResource{Group: ra.Group, Version: version, Resource: ra.Resource}
	return admission.NewAttributesRecord(adm.object, adm.oldObject, kind, ra.Namespace, name, gvr, ra.Subresource,
		adm.operation, operationOptions(adm.operation), false, c.attributes().User)
}

// kindOf is the kind admission names: the object's (or the stored
// object's), else the one the schema gives the resource.
func kindOf(s *schemagen.Schema, ra *authorizationv1.ResourceAttributes, adm *admissionData) schema.GroupVersionKind {
	for _, o := range []runtime.Object{adm.object, adm.oldObject} {
		if o != nil {
			return o.GetObjectKind().GroupVersionKind()
		}
	}
	if r, ok := s.Lookup(ra.Group, ra.Resource, ra.Subresource); ok {
		version := ra.Version
		if version == "" {
			version = r.Names.Version
		}
		return schema.GroupVersionKind{Group: ra.Group, Version: version, Kind: r.Names.Kind}
	}
	return schema.GroupVersionKind{Group: ra.Group, Version: ra.Version}
}

// operationOptions are the options kube-apiserver passes admission with an
// operation (a patch is admitted with UpdateOptions or CreateOptions; a
// connect's options are its object).
func operationOptions(op admission.Operation) runtime.Object {
	meta := func(kind string) metav1.TypeMeta {
		return metav1.TypeMeta{APIVersion: metav1.SchemeGroupVersion.String(), Kind: kind}
	}
	switch op {
	case admission.Create:
		return &metav1.CreateOptions{TypeMeta: meta("CreateOptions")}
	case admission.Update:
		return &metav1.UpdateOptions{TypeMeta: meta("UpdateOptions")}
	case admission.Delete:
		return &metav1.DeleteOptions{TypeMeta: meta("DeleteOptions")}
	}
	return nil
}

// oracleInput is c as `kcedar authorize` takes it: the request of its
// review, and the operation and objects (as JSON, as the callback carries
// them) of its admission data.
func (c *requestCase) oracleInput() (*entities.Request, *conditions.Admission, error) {
	req, err := entities.RequestFromSAR(&c.spec)
	if err != nil || c.admission == nil {
		return req, nil, err
	}
	adm := &conditions.Admission{Operation: string(c.admission.operation)}
	for _, o := range []struct {
		obj  runtime.Object
		into *[]byte
	}{{c.admission.object, &adm.Object}, {c.admission.oldObject, &adm.OldObject}} {
		if o.obj == nil {
			continue
		}
		if *o.into, err = json.Marshal(o.obj); err != nil {
			return nil, nil, err
		}
	}
	return req, adm, nil
}

// decodeObject reads an object as admission would hand it over: typed in
// its external version when client-go's scheme knows its kind, else
// unstructured (custom resources); apiVersion and kind set.
func decodeObject(raw []byte) (runtime.Object, error) {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(raw); err != nil {
		return nil, err
	}
	gvk := u.GroupVersionKind()
	if !scheme.Scheme.Recognizes(gvk) {
		return u, nil
	}
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(raw, nil, nil)
	if err != nil {
		return nil, err
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	return obj, nil
}
