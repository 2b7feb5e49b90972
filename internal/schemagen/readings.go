package schemagen

import (
	"strings"

	"github.com/cedar-policy/cedar-go/types"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// Typed readings. Some Kubernetes values are strings on the wire but numbers
// in meaning: resource.Quantity ("500m", "2Gi") and IntOrString (8080,
// "http", "25%"). Their attribute keeps its string form, so policies that
// compare strings keep working, and a sibling attribute carries the typed
// reading: for a field x, xQuantity or xIntOrString (maps and sets of them
// get a map or set of readings). docs/schema.md has the representations.
const (
	// QuantityTypeName is the common type of a quantity's reading:
	// {valid: Bool, milli?: Long}.
	QuantityTypeName = Namespace + "::Quantity"
	// IntOrStringTypeName is the common type of an int-or-string's reading:
	// {isInt: Bool, intVal?: Long, strVal: String, percent?: Long}.
	IntOrStringTypeName = Namespace + "::IntOrString"

	// QuantitySuffix and IntOrStringSuffix name a reading's attribute after
	// the field it reads.
	QuantitySuffix    = "Quantity"
	IntOrStringSuffix = "IntOrString"

	// Attributes of the readings.
	AttrValid   = "valid"
	AttrMilli   = "milli"
	AttrIsInt   = "isInt"
	AttrIntVal  = "intVal"
	AttrStrVal  = "strVal"
	AttrPercent = "percent"

	quantityDef    = "io.k8s.apimachinery.pkg.api.resource.Quantity"
	intOrStringDef = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
)

// Reading types: what a typed reading attribute holds. They print as
// references to QuantityTypeName and IntOrStringTypeName.
type (
	QuantityReadingType    struct{}
	IntOrStringReadingType struct{}
)

func (QuantityReadingType) isType()    {}
func (IntOrStringReadingType) isType() {}

// readingKind is the kind of reading a schema gets: none, quantity or
// int-or-string.
type readingKind int

const (
	noReading readingKind = iota
	quantityReading
	intOrStringReading
)

// scalarReading says which reading a scalar schema gets: a $ref (bare or in
// a single allOf) to resource.Quantity or IntOrString, an int-or-string
// whose pattern is the quantity pattern (how CRDs write quantities), or any
// other int-or-string.
func scalarReading(s *spec.Schema) readingKind {
	ref := schemaRef(s)
	if ref == "" && !hasType(s) && len(s.AllOf) == 1 {
		ref = schemaRef(&s.AllOf[0])
	}
	switch strings.TrimPrefix(ref, schemaRefPrefix) {
	case quantityDef:
		return quantityReading
	case intOrStringDef:
		return intOrStringReading
	}
	if ref != "" {
		return noReading
	}
	if isTrue(s.Extensions, extIntOrString) || s.Format == "int-or-string" {
		if isQuantityPattern(s.Pattern) {
			return quantityReading
		}
		return intOrStringReading
	}
	return noReading
}

// isQuantityPattern recognises the pattern controller-gen writes for
// resource.Quantity fields of CRDs (binary and decimal suffixes, exponents).
func isQuantityPattern(p string) bool {
	return strings.Contains(p, "[KMGTPE]i") && strings.Contains(p, "[numkMGTPE]")
}

// reading returns the type of the typed reading of a field with schema s,
// or nil when it has none: a reading for a quantity or int-or-string, a set
// of readings for an array of them, a map of readings for a map of them.
func (c *converter) reading(s *spec.Schema, l loc, depth int) Type {
	if s == nil || depth > maxDepth {
		return nil
	}
	switch scalarReading(s) {
	case quantityReading:
		return QuantityReadingType{}
	case intOrStringReading:
		return IntOrStringReadingType{}
	}
	if schemaRef(s) != "" || len(s.Properties) > 0 {
		return nil
	}
	if s.Items != nil && s.Items.Schema != nil {
		if e := c.reading(s.Items.Schema, l.child("[]"), depth+1); e != nil {
			return &SetType{Element: e}
		}
		return nil
	}
	if ap := s.AdditionalProperties; ap != nil && ap.Schema != nil {
		if v := c.reading(ap.Schema, l.child("{}"), depth+1); v != nil {
			return c.mapType(v, l)
		}
	}
	return nil
}

// readingName is the attribute holding the reading of field name.
func readingName(name string, t Type) string {
	if readingOf(t) == intOrStringReading {
		return name + IntOrStringSuffix
	}
	return name + QuantitySuffix
}

// readingOf is the kind of reading t holds (through sets and maps).
func readingOf(t Type) readingKind {
	switch t := t.(type) {
	case QuantityReadingType:
		return quantityReading
	case IntOrStringReadingType:
		return intOrStringReading
	case *SetType:
		return readingOf(t.Element)
	case *MapType:
		return readingOf(t.Value)
	}
	return noReading
}

// addReading adds the sibling reading attribute of field name (schema s) to
// rec, unless the record already has an attribute of that name.
func (c *converter) addReading(rec *RecordType, name string, s *spec.Schema, l loc, depth int) {
	t := c.reading(s, l.child(name), depth+1)
	if t == nil {
		return
	}
	sibling := readingName(name, t)
	if _, taken := rec.Attributes[sibling]; taken {
		c.warnf(l.child(name), "the typed reading's name %s is taken by a field: no typed reading", sibling)
		return
	}
	rec.Attributes[sibling] = &Attribute{Type: t, Optional: true, From: name}
}

// ReadingSource is the field a reading attribute reads: for an attribute
// named xQuantity or xIntOrString holding a reading, x; else "".
func ReadingSource(name string, t Type) string {
	suffix := QuantitySuffix
	switch readingOf(t) {
	case noReading:
		return ""
	case intOrStringReading:
		suffix = IntOrStringSuffix
	}
	if src, ok := strings.CutSuffix(name, suffix); ok && src != "" {
		return src
	}
	return ""
}

// Effective pod resources. Cedar has no quantifier over a set, so "every
// container's limit" cannot be written; Kubernetes' own reading of a pod's
// resources can. Objects of Pod resources have effectiveResources:
// {requests, limits}, maps of quantity readings computed by
// k8s.io/component-helpers/resource (containers, init and sidecar
// containers, pod-level resources and overhead, as the scheduler counts
// them). A limit is present only where it is bounded: set at pod level, or
// by every container.
const (
	AttrEffectiveResources     = "effectiveResources"
	EffectiveResourcesTypeName = Namespace + "::EffectiveResources"
	AttrRequests               = "requests"
	AttrLimits                 = "limits"
	// QuantityMapType is the map entity type of quantity readings.
	QuantityMapType types.EntityType = MapsNamespace + "::QuantityMap"
)

// HasEffectiveResources reports whether objects of r are Pods and so get
// effectiveResources (the schema must declare the quantity map type).
func (s *Schema) HasEffectiveResources(r *Resource) bool {
	if m, ok := s.Maps[QuantityMapType]; !ok || readingOf(m.Value) != quantityReading {
		return false
	}
	for _, ov := range r.Versions {
		if ov.APIVersion == "v1" && ov.Kind == "Pod" {
			return true
		}
	}
	return false
}
