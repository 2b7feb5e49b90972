package schemagen

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// fidelity walks OpenAPI schemas beside the types generated from them and
// checks the typed readings: every resource.Quantity (a $ref, or a CRD's
// int-or-string with the quantity pattern), every int-or-string and every
// date-time field has its reading, and every field keeps its own type.
type fidelity struct {
	t      *testing.T
	s      *Schema
	idx    *openAPIIndex
	seen   map[*spec.Schema]bool
	counts map[string]int
}

// expectedReading is what the OpenAPI schema of a field says its reading
// is, read here independently of the generator: "Quantity", "IntOrString",
// or "".
func expectedReading(p *spec.Schema) string {
	ref := p.Ref.String()
	if ref == "" && len(p.AllOf) == 1 {
		ref = p.AllOf[0].Ref.String()
	}
	switch {
	case strings.HasSuffix(ref, "/io.k8s.apimachinery.pkg.api.resource.Quantity"):
		return "Quantity"
	case strings.HasSuffix(ref, "/io.k8s.apimachinery.pkg.util.intstr.IntOrString"):
		return "IntOrString"
	case ref != "":
		return ""
	}
	if v, _ := p.Extensions.GetBool("x-kubernetes-int-or-string"); v {
		if strings.Contains(p.Pattern, "[KMGTPE]i") {
			return "Quantity"
		}
		return "IntOrString"
	}
	return ""
}

func (f *fidelity) record(sch *spec.Schema, rec *RecordType, path string) {
	if sch == nil || rec == nil || f.seen[sch] {
		return
	}
	f.seen[sch] = true
	for name, p := range sch.Properties {
		p := p
		a, typed := rec.Attributes[name]
		if !typed {
			continue
		}
		here := path + "." + name
		want := expectedReading(&p)
		if want == "" && p.Items != nil && p.Items.Schema != nil {
			want = expectedReading(p.Items.Schema)
		}
		if want == "" && p.AdditionalProperties != nil && p.AdditionalProperties.Schema != nil {
			want = expectedReading(p.AdditionalProperties.Schema)
		}
		f.checkField(here, name, &p, a, rec, want)
		f.descend(&p, a.Type, here)
	}
}

func (f *fidelity) checkField(here, name string, p *spec.Schema, a *Attribute, rec *RecordType, want string) {
	if p.Format == "date-time" {
		f.counts["date-time"]++
		if _, ok := a.Type.(DatetimeType); !ok {
			f.t.Errorf("%s: date-time typed %T", here, a.Type)
		}
	}
	if want == "" {
		for _, suffix := range []string{QuantitySuffix, IntOrStringSuffix} {
			if r, ok := rec.Attributes[name+suffix]; ok && r.From == name {
				f.t.Errorf("%s: has a %s reading it should not", here, suffix)
			}
		}
		return
	}
	f.counts[want]++
	r, ok := rec.Attributes[name+want]
	if !ok || r.From != name || !r.Optional {
		f.t.Errorf("%s: no %s reading (%+v)", here, want, r)
		return
	}
	if got := readingOf(r.Type); (want == "Quantity") != (got == quantityReading) {
		f.t.Errorf("%s: reading %s is a %T", here, name+want, r.Type)
	}
	// The field itself keeps its string form (or a map / set of strings).
	switch at := a.Type.(type) {
	case StringType:
	case *SetType:
		if _, ok := at.Element.(StringType); !ok {
			f.t.Errorf("%s: elements typed %T, want String", here, at.Element)
		}
	case *MapType:
		if at.EntityType != StringMapType {
			f.t.Errorf("%s: map typed %s, want %s", here, at.EntityType, StringMapType)
		}
	default:
		f.t.Errorf("%s: typed %T, want its string form", here, a.Type)
	}
}

// descend follows a field into the records below it: its $ref, items,
// map values and inline properties.
func (f *fidelity) descend(p *spec.Schema, t Type, path string) {
	p = f.deref(p)
	switch tt := t.(type) {
	case *RefType:
		if rec, ok := f.s.Definitions[tt.Name].(*RecordType); ok {
			f.record(p, rec, path)
		}
	case *RecordType:
		f.record(p, tt, path)
	case *SetType:
		if p.Items != nil && p.Items.Schema != nil {
			f.descend(p.Items.Schema, tt.Element, path+"[]")
		}
	case *MapType:
		if ap := p.AdditionalProperties; ap != nil && ap.Schema != nil {
			f.descend(ap.Schema, tt.Value, path+"{}")
		}
	}
}

func (f *fidelity) deref(p *spec.Schema) *spec.Schema {
	for i := 0; i < 4; i++ {
		ref := p.Ref.String()
		if ref == "" && len(p.AllOf) == 1 && len(p.Type) == 0 {
			ref = p.AllOf[0].Ref.String()
		}
		d, ok := f.idx.defs[strings.TrimPrefix(ref, schemaRefPrefix)]
		if ref == "" || !ok {
			return p
		}
		p = d
	}
	return p
}

func TestReadingsFidelity(t *testing.T) {
	docs, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	docs = withCRDs(t, docs, loadCRDs(t))
	s, err := Generate(docs)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := parseOpenAPI(docs.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	f := &fidelity{t: t, s: s, idx: idx, seen: map[*spec.Schema]bool{}, counts: map[string]int{}}
	for _, r := range s.Resources {
		for _, ov := range r.Versions {
			gv, err := schema.ParseGroupVersion(ov.APIVersion)
			if err != nil {
				t.Fatal(err)
			}
			def, ok := idx.byGVK[gv.WithKind(ov.Kind)]
			if !ok {
				continue // connect options: query parameters, no definition
			}
			f.record(idx.defs[def], ov.Fields, ov.APIVersion+"/"+ov.Kind)
		}
	}
	t.Logf("checked %v", f.counts)
	// The CRD fixture's quantity (int-or-string with the quantity pattern).
	if _, a := objectField(t, s, postgresqlinst, "v1beta1", "spec", "parameters", "storageQuantity"); a == nil || a.From != "storage" {
		t.Errorf("the CRD quantity spec.parameters.storage has no reading: %+v", a)
	}
	for _, kind := range []string{"Quantity", "IntOrString", "date-time"} {
		if f.counts[kind] < 5 {
			t.Errorf("only %d %s fields found: the walk is not reaching them", f.counts[kind], kind)
		}
	}
}
