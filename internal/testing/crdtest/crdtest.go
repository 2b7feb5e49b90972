// Package crdtest turns CustomResourceDefinitions into the discovery and
// OpenAPI v3 documents kube-apiserver publishes for them, so that tests can
// generate schemas for CRDs without an apiserver. It uses the apiserver's own
// OpenAPI builder (k8s.io/apiextensions-apiserver) with the options of its
// openapiv3 controller. Only tests import it: it is not linked into kcedar.
package crdtest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kube-openapi/pkg/spec3"
	"sigs.k8s.io/yaml"
)

// Load reads every *.yaml file of dir as one CRD (apiextensions.k8s.io/v1),
// in file name order. Unknown fields are errors.
func Load(dir string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(data, &crd); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		out = append(out, &crd)
	}
	return out, nil
}

// Publish returns the aggregated discovery groups and the OpenAPI v3 documents
// (by /openapi/v3 path, "apis/<group>/<version>") the apiserver serves for the
// CRDs' served versions.
func Publish(crds []*apiextensionsv1.CustomResourceDefinition) ([]apidiscoveryv2.APIGroupDiscovery, map[string][]byte, error) {
	specs := map[string][]*spec3.OpenAPI{}
	groups := map[string]*apidiscoveryv2.APIGroupDiscovery{}
	var order []string
	for _, crd := range crds {
		g := crd.Spec.Group
		if _, ok := groups[g]; !ok {
			groups[g] = &apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: g}}
			order = append(order, g)
		}
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			spec, err := builder.BuildOpenAPIV3(crd, v.Name, builder.Options{IncludeSelectableFields: true})
			if err != nil {
				return nil, nil, fmt.Errorf("%s %s: %w", crd.Name, v.Name, err)
			}
			p := "apis/" + g + "/" + v.Name
			specs[p] = append(specs[p], spec)

			scope := apidiscoveryv2.ScopeCluster
			if crd.Spec.Scope == apiextensionsv1.NamespaceScoped {
				scope = apidiscoveryv2.ScopeNamespace
			}
			res := apidiscoveryv2.APIResourceDiscovery{
				Resource:         crd.Spec.Names.Plural,
				ResponseKind:     &metav1.GroupVersionKind{Kind: crd.Spec.Names.Kind},
				Scope:            scope,
				SingularResource: crd.Spec.Names.Singular,
				Verbs:            []string{"delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"},
				ShortNames:       crd.Spec.Names.ShortNames,
				Categories:       crd.Spec.Names.Categories,
			}
			if sr := v.Subresources; sr != nil {
				if sr.Status != nil {
					res.Subresources = append(res.Subresources, apidiscoveryv2.APISubresourceDiscovery{
						Subresource: "status", ResponseKind: &metav1.GroupVersionKind{Kind: crd.Spec.Names.Kind},
						Verbs: []string{"get", "patch", "update"},
					})
				}
				if sr.Scale != nil {
					res.Subresources = append(res.Subresources, apidiscoveryv2.APISubresourceDiscovery{
						Subresource: "scale", ResponseKind: &metav1.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"},
						Verbs: []string{"get", "patch", "update"},
					})
				}
			}
			ag := groups[g]
			vi := slices.IndexFunc(ag.Versions, func(x apidiscoveryv2.APIVersionDiscovery) bool { return x.Version == v.Name })
			if vi < 0 {
				ag.Versions = append(ag.Versions, apidiscoveryv2.APIVersionDiscovery{Version: v.Name, Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent})
				vi = len(ag.Versions) - 1
			}
			ag.Versions[vi].Resources = append(ag.Versions[vi].Resources, res)
		}
	}
	docs := map[string][]byte{}
	for p, list := range specs {
		merged, err := builder.MergeSpecsV3(list...)
		if err != nil {
			return nil, nil, err
		}
		data, err := json.Marshal(merged)
		if err != nil {
			return nil, nil, err
		}
		docs[p] = data
	}
	out := make([]apidiscoveryv2.APIGroupDiscovery, 0, len(order))
	for _, g := range order {
		out = append(out, *groups[g])
	}
	return out, docs, nil
}
