package entities

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/schemagen"
)

// ObjectConverter turns Kubernetes objects (JSON decoded with UseNumber) into
// Cedar values by walking the schema's type model. Fields the schema does not
// type are dropped. A field whose value does not fit its type is kept as an
// invalid value (see invalidValue) and reported: a policy that reads it gets
// an evaluation error, which kcedar treats as fail-closed, and `has` still
// sees it. Typed readings (schemagen's readings.go) read the field named by
// their From.
//
// Maps become entities whose tags hold the values. Their ids are a hash of the
// map's canonical JSON, so two equal maps are the same entity and compare equal.
type ObjectConverter struct {
	Schema *schemagen.Schema
	// Maps collects the map entities of every converted object.
	Maps     map[types.EntityUID]types.Entity
	Warnings []string
}

// NewObjectConverter returns a converter for s.
func NewObjectConverter(s *schemagen.Schema) *ObjectConverter {
	return &ObjectConverter{Schema: s, Maps: map[types.EntityUID]types.Entity{}}
}

// Object converts obj, an object of res, into the record
// {apiVersion, kind, metadata, <version>: fields}. The version attribute is
// present only when obj's apiVersion is one res serves. apiVersion, kind and
// metadata are always there (empty when the object lacks them, as connect
// options objects do), so the value conforms to the schema.
func (c *ObjectConverter) Object(res *schemagen.Resource, obj map[string]any) types.Record {
	return c.ObjectPaths(res, obj, nil)
}

// Paths is a set of attribute paths into an object. A node with All needs
// its whole value; otherwise only the children listed (a node without
// children still needs its presence). nil means everything.
type Paths struct {
	All      bool
	Children map[string]*Paths
}

// Child returns the node for attribute name, creating it.
func (p *Paths) Child(name string) *Paths {
	if p.Children == nil {
		p.Children = map[string]*Paths{}
	}
	c, ok := p.Children[name]
	if !ok {
		c = &Paths{}
		p.Children[name] = c
	}
	return c
}

// Merge adds q's paths to p.
func (p *Paths) Merge(q *Paths) {
	if q == nil {
		return
	}
	p.All = p.All || q.All
	for name, c := range q.Children {
		p.Child(name).Merge(c)
	}
}

func (p *Paths) next(name string) (*Paths, bool) {
	if p == nil || p.All {
		return p, true
	}
	c, ok := p.Children[name]
	return c, ok
}

// ObjectPaths is Object converting only the paths in need (nil: all): what
// a condition cannot read is left out, which it cannot observe.
func (c *ObjectConverter) ObjectPaths(res *schemagen.Resource, obj map[string]any, need *Paths) types.Record {
	m := types.RecordMap{}
	apiVersion, _ := obj[schemagen.AttrAPIVersion].(string)
	kind, _ := obj[schemagen.AttrKind].(string)
	m[schemagen.AttrAPIVersion] = types.String(apiVersion)
	m[schemagen.AttrKind] = types.String(kind)
	if mdNeed, ok := need.next(schemagen.AttrMetadata); ok && c.Schema.ObjectMeta != nil {
		md, _ := obj[schemagen.AttrMetadata].(map[string]any)
		if md == nil {
			md = map[string]any{}
		}
		if v, ok := c.convertPaths(c.Schema.ObjectMeta, md, "metadata", mdNeed); ok {
			m[schemagen.AttrMetadata] = v
		} else {
			m[schemagen.AttrMetadata] = c.zero(c.Schema.ObjectMeta)
		}
	}
	if _, wanted := need.next(schemagen.AttrEffectiveResources); wanted && c.Schema.HasEffectiveResources(res) && (kind == "" || kind == "Pod") {
		if v := c.effectiveResources(obj, schemagen.AttrEffectiveResources); v != nil {
			m[schemagen.AttrEffectiveResources] = v
		}
	}
	attr, ok := res.VersionOf(apiVersion, kind, "")
	if !ok && kind == "" {
		attr, ok = versionByAPIVersion(res, apiVersion)
	}
	vNeed, wanted := need.next(attr)
	if ov := res.Versions[attr]; ok && wanted && ov.Fields != nil {
		fields := make(map[string]any, len(obj))
		for k, v := range obj {
			switch k {
			case schemagen.AttrAPIVersion, schemagen.AttrKind, schemagen.AttrMetadata:
			default:
				fields[k] = v
			}
		}
		if v, ok := c.convertPaths(ov.Fields, fields, attr, vNeed); ok {
			m[types.String(attr)] = v
		}
	}
	return types.NewRecord(m)
}

// versionByAPIVersion finds the version of an object that does not say its
// kind (the first, in order, serving apiVersion).
func versionByAPIVersion(res *schemagen.Resource, apiVersion string) (string, bool) {
	names := make([]string, 0, len(res.Versions))
	for name, ov := range res.Versions {
		if ov.APIVersion == apiVersion {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return "", false
	}
	slices.Sort(names)
	return names[0], true
}

func (c *ObjectConverter) warn(path, format string, args ...any) {
	if len(c.Warnings) < 32 {
		c.Warnings = append(c.Warnings, path+": "+fmt.Sprintf(format, args...))
	}
}

// convert returns the Cedar value of v as type t; ok is false when v is null or
// does not fit t.
func (c *ObjectConverter) convert(t schemagen.Type, v any, path string) (types.Value, bool) {
	return c.convertPaths(t, v, path, nil)
}

// convertPaths is convert limited to the paths in need (records only; other
// values are converted whole).
func (c *ObjectConverter) convertPaths(t schemagen.Type, v any, path string, need *Paths) (types.Value, bool) {
	if v == nil {
		return nil, false
	}
	switch tt := t.(type) {
	case schemagen.StringType:
		if s, ok := stringValue(v); ok {
			return s, true
		}
	case schemagen.LongType:
		if l, ok := longValue(v); ok {
			return l, true
		}
	case schemagen.BoolType:
		if b, ok := v.(bool); ok {
			return types.Boolean(b), true
		}
	case schemagen.DecimalType:
		if d, ok := c.decimalValue(v, path); ok {
			return d, true
		}
		return invalidValue(t, v), true
	case schemagen.QuantityReadingType:
		return quantityReading(v), true
	case schemagen.IntOrStringReadingType:
		return intOrStringReading(v), true
	case schemagen.DatetimeType:
		if d, ok := datetimeValue(v); ok {
			return d, true
		}
	case *schemagen.RecordType:
		if obj, ok := v.(map[string]any); ok {
			return c.record(tt, obj, path, need), true
		}
	case *schemagen.SetType:
		if arr, ok := v.([]any); ok {
			return c.set(tt, arr, path), true
		}
	case *schemagen.MapType:
		if obj, ok := v.(map[string]any); ok {
			return c.mapEntity(tt, obj, path), true
		}
	case *schemagen.RefType:
		def, ok := c.Schema.Definitions[tt.Name]
		if !ok {
			c.warn(path, "type %s is not defined", tt.Name)
			return nil, false
		}
		return c.convertPaths(def, v, path, need)
	default:
		c.warn(path, "unsupported type %T", t)
		return nil, false
	}
	c.warn(path, "%T value does not fit %s", v, typeName(t))
	return invalidValue(t, v), true
}

// stringValue is v as a String: a string, or a number (int-or-string,
// quantities written as numbers) in its decimal form.
func stringValue(v any) (types.String, bool) {
	switch x := v.(type) {
	case string:
		return types.String(x), true
	case json.Number:
		return types.String(x.String()), true
	case float64:
		return types.String(strconv.FormatFloat(x, 'f', -1, 64)), true
	}
	return "", false
}

// longValue is v as a Long: a number that is a whole int64.
func longValue(v any) (types.Long, bool) {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return types.Long(i), true
		}
		if f, err := x.Float64(); err == nil && f == math.Trunc(f) && math.Abs(f) < 1<<63 {
			return types.Long(int64(f)), true
		}
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<63 {
			return types.Long(int64(x)), true
		}
	}
	return 0, false
}

// decimalValue is v as a Decimal, warning (at path) when v is not a number
// a Decimal holds.
func (c *ObjectConverter) decimalValue(v any, path string) (types.Value, bool) {
	var f float64
	var err error
	switch x := v.(type) {
	case json.Number:
		f, err = x.Float64()
	case float64:
		f = x
	default:
		err = fmt.Errorf("not a number")
	}
	if err == nil {
		d, derr := types.NewDecimalFromFloat(f)
		if derr == nil {
			return d, true
		}
		err = derr
	}
	c.warn(path, "%v", err)
	return nil, false
}

// datetimeValue is v as a Datetime: an RFC 3339 string.
func datetimeValue(v any) (types.Datetime, bool) {
	if s, ok := v.(string); ok {
		if ts, err := time.Parse(time.RFC3339Nano, s); err == nil {
			return types.NewDatetime(ts), true
		}
	}
	return types.Datetime{}, false
}

// record converts obj to record type t, keeping the attributes in need. A
// required attribute obj lacks (or whose value does not fit) is its zero
// value.
func (c *ObjectConverter) record(t *schemagen.RecordType, obj map[string]any, path string, need *Paths) types.Record {
	m := make(types.RecordMap, len(t.Attributes))
	for name, attr := range t.Attributes {
		childNeed, wanted := need.next(name)
		if !wanted {
			continue
		}
		field := name
		if attr.From != "" {
			field = attr.From
		}
		if fv, present := obj[field]; present && fv != nil {
			if cv, ok := c.convertPaths(attr.Type, fv, path+"."+name, childNeed); ok {
				m[types.String(name)] = cv
				continue
			}
		}
		if !attr.Optional {
			// A required field the object lacks reads as its zero
			// value, so the record conforms and a validated policy
			// never fails on it.
			m[types.String(name)] = c.zero(attr.Type)
		}
	}
	return types.NewRecord(m)
}

// set converts arr to set type t (an element that does not fit is an
// invalid value; a null element is left out).
func (c *ObjectConverter) set(t *schemagen.SetType, arr []any, path string) types.Set {
	vals := make([]types.Value, 0, len(arr))
	for i, el := range arr {
		if cv, ok := c.convert(t.Element, el, path+"["+strconv.Itoa(i)+"]"); ok {
			vals = append(vals, cv)
		}
	}
	return types.NewSet(vals...)
}

// zero is the zero value of t: "", 0, false, an empty set, record or map
// (with the required attributes of records zero too).
func (c *ObjectConverter) zero(t schemagen.Type) types.Value {
	switch tt := t.(type) {
	case schemagen.LongType:
		return types.Long(0)
	case schemagen.BoolType:
		return types.False
	case schemagen.DecimalType:
		d, _ := types.NewDecimalFromInt(0)
		return d
	case schemagen.DatetimeType:
		return types.NewDatetimeFromMillis(0)
	case *schemagen.RecordType:
		v, _ := c.convert(tt, map[string]any{}, "")
		return v
	case *schemagen.SetType:
		return types.NewSet()
	case *schemagen.MapType:
		return c.mapEntity(tt, map[string]any{}, "")
	case *schemagen.RefType:
		if def, ok := c.Schema.Definitions[tt.Name]; ok {
			return c.zero(def)
		}
	}
	return types.String("")
}

func (c *ObjectConverter) mapEntity(t *schemagen.MapType, obj map[string]any, path string) types.EntityUID {
	tags := make(types.RecordMap, len(obj))
	for k, v := range obj {
		if cv, ok := c.convert(t.Value, v, path+"["+strconv.Quote(k)+"]"); ok {
			tags[types.String(k)] = cv
		}
	}
	// The id hashes the converted tags (in key order), so maps that are equal
	// as Cedar values are the same entity: {"cpu": 1} and {"cpu": "1"} both
	// hold the string "1".
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, string(k))
	}
	slices.Sort(keys)
	h := sha256.New()
	for _, k := range keys {
		fmt.Fprintf(h, "%d:%s=", len(k), k)
		h.Write(tags[types.String(k)].MarshalCedar())
		h.Write([]byte{0})
	}
	sum := h.Sum(nil)
	uid := types.NewEntityUID(t.EntityType, types.String("sha256:"+hex.EncodeToString(sum[:16])))
	if _, seen := c.Maps[uid]; !seen {
		c.Maps[uid] = types.Entity{UID: uid, Tags: types.NewRecord(tags)}
	}
	return uid
}

func typeName(t schemagen.Type) string {
	name := fmt.Sprintf("%T", t)
	name = strings.TrimPrefix(name, "*")
	return strings.TrimSuffix(strings.TrimPrefix(name, "schemagen."), "Type")
}
