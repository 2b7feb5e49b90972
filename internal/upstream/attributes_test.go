package upstream

import (
	"encoding/json"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"k8s.io/apiserver/pkg/authentication/user"
)

// randomBytes is a short string of ASCII, valid multi-byte runes (U+FFFD
// among them), stray continuation and lead bytes, surrogate halves and
// overlong encodings.
func randomBytes(rng *rand.Rand) string {
	parts := []string{"a", "/", "-", "é", "\u2028", "\uFFFD", "日", "\U0001F600", "\xff", "\xfe", "\x80", "\xc3", "\xc3(", "\xed\xa0\x80", "\xc0\xaf", "\xf0\x9f\x98"}
	var s string
	for range rng.IntN(6) {
		s += parts[rng.IntN(len(parts))]
	}
	return s
}

// The oracle of wireString is what it stands for: the string after the
// webhook's JSON, encoded and decoded.
func TestWireStringIsTheJSONRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 5000 {
		s := randomBytes(rng)
		raw, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		var want string
		if err := json.Unmarshal(raw, &want); err != nil {
			t.Fatal(err)
		}
		if got := wireString(s); got != want {
			t.Fatalf("wireString(%q) = %q, the JSON round trip gives %q", s, got, want)
		}
	}
}

// userInfo's extra, keys merged included, is the JSON round trip of the
// review's extra.
func TestUserInfoExtraIsTheJSONRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		extra := map[string][]string{}
		for range rng.IntN(4) {
			var vs []string
			for range rng.IntN(3) {
				vs = append(vs, randomBytes(rng))
			}
			extra[randomBytes(rng)] = vs
		}
		raw, err := json.Marshal(extra)
		if err != nil {
			t.Fatal(err)
		}
		var want map[string][]string
		if err := json.Unmarshal(raw, &want); err != nil {
			t.Fatal(err)
		}
		got := userInfo(&user.DefaultInfo{Name: "u", Extra: extra}).Extra
		if len(want) == 0 {
			want = nil
		}
		if !maps.EqualFunc(got, want, slices.Equal) {
			t.Fatalf("userInfo's extra of %q = %q, the JSON round trip gives %q", extra, got, want)
		}
	}
}
