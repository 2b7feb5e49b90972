package entities

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"

	"github.com/cedar-policy/cedar-go/types"
	"gopkg.in/inf.v0"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kcedar/kcedar/internal/schemagen"
)

// quantityReading is the k8s::Quantity reading of v: valid when v parses as
// a resource.Quantity (as the API server parses it), and milli, the value
// in milli-units, when that is a whole number that fits a Long. A value the
// reading cannot hold exactly (1u, 16Ei) is valid without milli, so a
// policy written with the fail-closed idiom denies it.
func quantityReading(v any) types.Record {
	m := types.RecordMap{schemagen.AttrValid: types.False}
	s, ok := stringValue(v)
	if !ok || len(s) > maxQuantityBytes {
		return types.NewRecord(m)
	}
	mantissa, exp, hasExp := splitExponent(string(s))
	if hasExp && (exp > maxQuantityExponent || exp < -maxQuantityExponent) {
		// resource.ParseQuantity does not return for some exponents this
		// large (1E-999999999), and the value cannot be exact in
		// milli-units unless it is zero: check the rest of the syntax only.
		q, err := resource.ParseQuantity(mantissa)
		if err == nil {
			m[schemagen.AttrValid] = types.True
			if q.IsZero() {
				m[schemagen.AttrMilli] = types.Long(0)
			}
		}
		return types.NewRecord(m)
	}
	q, err := resource.ParseQuantity(string(s))
	if err != nil {
		return types.NewRecord(m)
	}
	m[schemagen.AttrValid] = types.True
	if milli, exact := exactMilli(q); exact {
		m[schemagen.AttrMilli] = types.Long(milli)
	}
	return types.NewRecord(m)
}

// Bounds on hostile quantities: no valid quantity a person writes is longer
// or has a larger decimal exponent, and past them the reading is cheap.
const (
	maxQuantityBytes    = 256
	maxQuantityExponent = 64
)

// splitExponent splits a decimal exponent off a quantity ("12E-3" is "12"
// and -3). An exponent that does not fit an int32 is reported as huge.
func splitExponent(s string) (mantissa string, exp int64, ok bool) {
	i := strings.LastIndexAny(s, "eE")
	if i <= 0 || i == len(s)-1 {
		return s, 0, false
	}
	digits := strings.TrimLeft(s[i+1:], "+-")
	if digits == "" || strings.Trim(digits, "0123456789") != "" {
		return s, 0, false // "1E" is the exa suffix, not an exponent
	}
	exp, err := strconv.ParseInt(s[i+1:], 10, 32)
	if err != nil {
		return s[:i], math.MaxInt32 + 1, true
	}
	return s[:i], exp, true
}

// exactMilli is q in milli-units when that is a whole number within int64.
func exactMilli(q resource.Quantity) (int64, bool) {
	d := new(inf.Dec).Mul(q.AsDec(), inf.NewDec(1000, 0))
	whole := new(inf.Dec).Round(d, 0, inf.RoundDown)
	if whole.Cmp(d) != 0 {
		return 0, false
	}
	u := whole.UnscaledBig()
	if whole.Scale() != 0 || !u.IsInt64() {
		return 0, false
	}
	return u.Int64(), true
}

// intOrStringReading is the k8s::IntOrString reading of v: an integer
// (isInt, intVal) or a string (strVal, and percent for "25%", read as
// Kubernetes reads percentages). strVal is the integer's decimal form for
// integers, and the JSON text for a value that is neither (fail closed: it
// is neither an integer nor a percentage).
func intOrStringReading(v any) types.Record {
	m := types.RecordMap{schemagen.AttrIsInt: types.False}
	switch x := v.(type) {
	case string:
		m[schemagen.AttrStrVal] = types.String(x)
		if p, ok := strings.CutSuffix(x, "%"); ok {
			if n, err := strconv.Atoi(p); err == nil {
				m[schemagen.AttrPercent] = types.Long(n)
			}
		}
	default:
		if l, ok := longValue(v); ok && isIntegerLiteral(v) {
			m[schemagen.AttrIsInt] = types.True
			m[schemagen.AttrIntVal] = l
			m[schemagen.AttrStrVal] = types.String(strconv.FormatInt(int64(l), 10))
		} else {
			m[schemagen.AttrStrVal] = types.String(jsonText(v))
		}
	}
	return types.NewRecord(m)
}

// isIntegerLiteral reports whether a JSON number is written as an integer
// (8080, not 8080.0 or 8.08e3): only those are int-or-string integers.
func isIntegerLiteral(v any) bool {
	switch x := v.(type) {
	case json.Number:
		_, err := strconv.ParseInt(x.String(), 10, 64)
		return err == nil
	case float64:
		return true
	}
	return false
}

// invalidValue is the value of a field that is present but does not convert
// to its type t: never absent, so a `has` guard sees it, and of another
// type, so every read of it but == and != fails to evaluate (an erroring
// forbid denies). A string field gets a record, every other field the
// value's JSON text.
func invalidValue(t schemagen.Type, v any) types.Value {
	if _, isString := t.(schemagen.StringType); isString {
		return types.NewRecord(types.RecordMap{"invalid": types.String(jsonText(v))})
	}
	return types.String(jsonText(v))
}

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "?"
	}
	return string(b)
}
