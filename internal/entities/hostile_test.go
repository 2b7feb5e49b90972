package entities

import (
	"strings"
	"testing"

	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/schemagen"
)

// Quantities an attacker writes into a CRD (which stores them as strings
// matching the quantity pattern) are read quickly: resource.ParseQuantity
// does not return for some huge exponents, so kcedar never hands it one.
// A hang here is a test timeout.
func TestHostileQuantities(t *testing.T) {
	for _, tc := range []struct {
		in    string
		valid bool
		milli bool
	}{
		{"1E-999999999", true, false},
		{"1e999999999", true, false},
		{"0e-999999999", true, true},
		{"1e99999999999", true, false},
		{strings.Repeat("9", 100000), false, false},
		{"1.5e3", true, true},
		{"2E", true, false}, // 2 exa: a suffix, not an exponent
	} {
		r := quantityReading(tc.in)
		valid, _ := r.Get(schemagen.AttrValid)
		_, milli := r.Get(schemagen.AttrMilli)
		if valid != types.Boolean(tc.valid) || milli != tc.milli {
			t.Errorf("%.20s: valid %v milli %v, want %v %v", tc.in, valid, milli, tc.valid, tc.milli)
		}
	}
}
