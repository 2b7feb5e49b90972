package entities

import (
	"encoding/json"
	"testing"

	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/schemagen"
)

func recordOf(t *testing.T, v types.Value) types.Record {
	t.Helper()
	r, ok := v.(types.Record)
	if !ok {
		t.Fatalf("%v is not a record", v)
	}
	return r
}

func TestQuantityReading(t *testing.T) {
	for _, tc := range []struct {
		in    any
		valid bool
		milli int64 // -1: absent
	}{
		{"2", true, 2000}, {"500m", true, 500}, {"1Gi", true, 1 << 30 * 1000}, {"1e3", true, 1000000},
		{"12E-3", true, 12}, {"-1.5", true, -1500}, {json.Number("0.25"), true, 250}, {json.Number("3"), true, 3000},
		{"1u", true, -1}, {"100n", true, -1}, {"16Ei", true, -1}, {"9223372036854775", true, 9223372036854775000},
		{"9223372036854776", true, -1}, {"abc", false, -1}, {"", false, -1}, {true, false, -1},
	} {
		r := quantityReading(tc.in)
		valid, _ := r.Get(schemagen.AttrValid)
		if valid != types.Boolean(tc.valid) {
			t.Errorf("%v: valid %v, want %v", tc.in, valid, tc.valid)
		}
		milli, has := r.Get(schemagen.AttrMilli)
		switch {
		case tc.milli == -1 && has:
			t.Errorf("%v: milli %v, want absent", tc.in, milli)
		case tc.milli != -1 && milli != types.Long(tc.milli):
			t.Errorf("%v: milli %v, want %d", tc.in, milli, tc.milli)
		}
	}
}

func TestIntOrStringReading(t *testing.T) {
	for _, tc := range []struct {
		in      any
		isInt   bool
		intVal  int64 // -1: absent
		strVal  string
		percent int64 // -1: absent
	}{
		{json.Number("8080"), true, 8080, "8080", -1},
		{"8080", false, -1, "8080", -1},
		{"http", false, -1, "http", -1},
		{"25%", false, -1, "25%", 25},
		{"x%", false, -1, "x%", -1},
		{json.Number("1.5"), false, -1, "1.5", -1},
		{json.Number("1e3"), false, -1, "1e3", -1},
		{true, false, -1, "true", -1},
	} {
		r := intOrStringReading(tc.in)
		if v, _ := r.Get(schemagen.AttrIsInt); v != types.Boolean(tc.isInt) {
			t.Errorf("%v: isInt %v", tc.in, v)
		}
		if v, _ := r.Get(schemagen.AttrStrVal); v != types.String(tc.strVal) {
			t.Errorf("%v: strVal %v, want %q", tc.in, v, tc.strVal)
		}
		for _, opt := range []struct {
			name types.String
			want int64
		}{{schemagen.AttrIntVal, tc.intVal}, {schemagen.AttrPercent, tc.percent}} {
			v, has := r.Get(opt.name)
			if (opt.want == -1) == has || has && v != types.Long(opt.want) {
				t.Errorf("%v: %s = %v (present %v), want %d", tc.in, opt.name, v, has, opt.want)
			}
		}
	}
}

// A reading attribute reads the field its From names, and a map of
// readings converts every entry.
func TestReadingAttributesReadTheirField(t *testing.T) {
	qmap := &schemagen.MapType{EntityType: schemagen.QuantityMapType, Value: schemagen.QuantityReadingType{}}
	rec := &schemagen.RecordType{Attributes: map[string]*schemagen.Attribute{
		"size":            {Type: schemagen.StringType{}, Optional: true},
		"sizeQuantity":    {Type: schemagen.QuantityReadingType{}, Optional: true, From: "size"},
		"port":            {Type: schemagen.StringType{}, Optional: true},
		"portIntOrString": {Type: schemagen.IntOrStringReadingType{}, Optional: true, From: "port"},
		"limitsQuantity":  {Type: qmap, Optional: true, From: "limits"},
		"missingQuantity": {Type: schemagen.QuantityReadingType{}, Optional: true, From: "missing"},
		"createdAt":       {Type: schemagen.DatetimeType{}, Optional: true},
		"tags":            {Type: &schemagen.SetType{Element: schemagen.LongType{}}, Optional: true},
	}}
	c := NewObjectConverter(&schemagen.Schema{Maps: map[types.EntityType]*schemagen.MapType{qmap.EntityType: qmap}})
	obj := decodeUseNumber(t, `{"size": "1Gi", "port": 8080, "limits": {"cpu": "250m", "gpu": "1u"}, "createdAt": "yesterday", "tags": [1, "two"]}`)
	v := c.record(rec, obj, "x", nil)
	if got := attr(t, v, "sizeQuantity", "milli"); got != types.Long(1<<30*1000) {
		t.Errorf("sizeQuantity.milli = %v", got)
	}
	if got := attr(t, v, "size"); got != types.String("1Gi") {
		t.Errorf("size = %v: the string reading must stay", got)
	}
	if got := attr(t, v, "portIntOrString", "intVal"); got != types.Long(8080) {
		t.Errorf("portIntOrString.intVal = %v", got)
	}
	if hasAttr(v, "missingQuantity") {
		t.Error("a reading of an absent field must be absent")
	}
	limits := c.Maps[attr(t, v, "limitsQuantity").(types.EntityUID)]
	cpu, _ := limits.Tags.Get("cpu")
	if m, _ := recordOf(t, cpu).Get(schemagen.AttrMilli); m != types.Long(250) {
		t.Errorf("limitsQuantity cpu = %v", cpu)
	}
	gpu, _ := limits.Tags.Get("gpu")
	if _, has := recordOf(t, gpu).Get(schemagen.AttrMilli); has {
		t.Errorf("1u has a milli reading: %v", gpu)
	}
	// No silent drops: a date-time that does not parse and a set element
	// that is not a Long are present, as values of another type.
	if got, ok := attr(t, v, "createdAt").(types.String); !ok || got != `"yesterday"` {
		t.Errorf("createdAt = %v, want the invalid value \"yesterday\" (a String)", attr(t, v, "createdAt"))
	}
	if tags := attr(t, v, "tags").(types.Set); tags.Len() != 2 || !tags.Contains(types.String(`"two"`)) {
		t.Errorf("tags = %v, want 1 and the invalid value \"two\"", tags)
	}
}

func TestInvalidValueOfAStringFieldIsNotAString(t *testing.T) {
	if _, isString := invalidValue(schemagen.StringType{}, true).(types.String); isString {
		t.Error("an invalid value of a String field must not be a String: policies could not tell it from a valid one")
	}
	if _, isString := invalidValue(schemagen.LongType{}, "x").(types.String); !isString {
		t.Error("an invalid value of a Long field is its JSON text")
	}
}
