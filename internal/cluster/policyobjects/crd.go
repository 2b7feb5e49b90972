package policyobjects

import (
	"bytes"
	_ "embed"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// CRDYAML is the CustomResourceDefinitions of both kinds, as YAML documents.
//
//go:embed crds.yaml
var CRDYAML []byte

// CRDs parses CRDYAML.
func CRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, doc := range bytes.Split(CRDYAML, []byte("\n---\n")) {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(doc, crd); err != nil {
			return nil, fmt.Errorf("kcedar's CRDs: %w", err)
		}
		out = append(out, crd)
	}
	return out, nil
}
