package server

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// webhookBody is a SubjectAccessReview as k8s.io/apiserver's webhook
// authorizer sends it (metadata and status included), with every field the
// fast path decodes.
const webhookBody = `{"kind":"SubjectAccessReview","apiVersion":"authorization.k8s.io/v1","metadata":{"creationTimestamp":null},` +
	`"spec":{"resourceAttributes":{"namespace":"ns","verb":"list","group":"apps","version":"v1","resource":"deployments","subresource":"scale","name":"d",` +
	`"fieldSelector":{"rawSelector":"spec.nodeName=n1","requirements":[{"key":"spec.nodeName","operator":"In","values":["n1"]}]},` +
	`"labelSelector":{"requirements":[{"key":"app","operator":"Exists"},{"key":"tier","operator":"NotIn","values":[]}]}},` +
	`"user":"jane","groups":["dev","system:authenticated"],"extra":{"scopes.example.com/x":["a","b"],"empty":[]},"uid":"u-1",` +
	`"authorizationOptions":{"handledDecisionTypes":["Allow","ConditionsMap","Union"]}},` +
	"\"status\":{\"allowed\":false,\"x\":[1,2.5e3,true,null,{\"a\":\"\\\"}\"}]}}\n"

// TestDecodeSARFastTakesTheWebhooksShape: the fast path takes what
// kube-apiserver sends (were it to give up, every request would pay for
// encoding/json twice) and decodes it as encoding/json does.
func TestDecodeSARFastTakesTheWebhooksShape(t *testing.T) {
	for _, body := range []string{webhookBody, sarJSON("a", []string{"g"}, "get", "", "pods", "ns", "p"),
		`{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":{"user":"a","nonResourceAttributes":{"path":"/x","verb":"get"}}}`,
		` { "spec" : { } , "kind" : "" } `, `{}`,
	} {
		var fast sarRequest
		if !decodeSARFast([]byte(body), &fast) {
			t.Errorf("the fast path gives up on %s", body)
			continue
		}
		checkSameAsEncodingJSON(t, []byte(body), &fast)
	}
}

// TestDecodeSARFastGivesUp: what encoding/json decodes in a way of its own
// (case-folded keys, duplicates, null, escapes, invalid UTF-8) or refuses
// (invalid JSON, in a field read or in one skipped; nesting too deep) is
// left to it.
func TestDecodeSARFastGivesUp(t *testing.T) {
	for _, body := range []string{
		`{"Kind":"SubjectAccessReview"}`, `{"spec":{"USER":"a"}}`, `{"spec":{"user":"a","user":"b"}}`,
		`{"spec":{"groups":null}}`, `{"spec":{"user":"\u0061"}}`, "{\"spec\":{\"user\":\"\xff\"}}", `{"spec":{"user":1}}`,
		`{"spec":{"extra":{"a":["x"],"a":["y"]}}}`, `{"spec":{"groups":["a",null]}}`, `{"spec":{"ſ":1}}`, `[]`, `{"spec":{}} x`, `{"spec":{}`,
		// Invalid JSON.
		"{\"spec\":{\"user\":\"a\tb\"}}", "{\"x\u0001\":1}", `{"spec":{"user":"a",}}`, `{"spec":{"groups":["a",]}}`,
		`{"status":tru}`, `{"status":01}`, `{"status":1.}`, `{"status":[1,]}`, `{"status":{"a":1,}}`, `{"status":{"a" 1}}`,
		`{"status":[1}}`, `{"status":{]}`, `{"status":"\x"}`, "{\"status\":\"\x01\"}", `{"status":}`, `{"status":1 2}`, `{"status":1:2}`,
		`{"status":nul}`, `{"status":-}`, `{"status":1e}`, `{"status":{"a":[{"b":[}]}]}}`,
		`{"status":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`,
	} {
		var fast sarRequest
		if decodeSARFast([]byte(body), &fast) {
			t.Errorf("the fast path takes %.80s", body)
		}
	}
}

// TestDecodeSARFastSkipsValidJSON: a value of a field that is not read is
// skipped, whatever valid JSON it is.
func TestDecodeSARFastSkipsValidJSON(t *testing.T) {
	for _, v := range []string{`1`, `-0.5e+3`, `true`, `false`, `null`, `"a\"}\\"`, `[]`, `{}`, `[1,"x",{"a":[null]}]`,
		` { "a" : [ 1 , 2 ] } `, strings.Repeat("[", 9000) + strings.Repeat("]", 9000)} {
		body := `{"status":` + v + `,"spec":{"user":"a","x":` + v + `}}`
		var fast sarRequest
		if !decodeSARFast([]byte(body), &fast) {
			t.Errorf("the fast path gives up on %.80s", body)
			continue
		}
		checkSameAsEncodingJSON(t, []byte(body), &fast)
	}
}

// checkSameAsEncodingJSON fails unless json.Unmarshal decodes body without
// an error into what the fast path made of it.
func checkSameAsEncodingJSON(t *testing.T, body []byte, fast *sarRequest) {
	t.Helper()
	var slow sarRequest
	if err := json.Unmarshal(body, &slow); err != nil {
		t.Fatalf("the fast path takes %q, json.Unmarshal refuses it: %v", body, err)
	}
	if !reflect.DeepEqual(fast, &slow) {
		t.Fatalf("%q:\nfast path:     %+v\nencoding/json: %+v", body, fast, slow)
	}
}

// TestDecodeSARFastAgreesOnMutants: of bodies mutated from webhook-shaped
// ones with JSON's tokens and bytes it refuses (most of them invalid
// JSON), whatever the fast path takes, encoding/json decodes to the same
// value without an error; FuzzDecodeSAR searches further.
func TestDecodeSARFastAgreesOnMutants(t *testing.T) {
	seeds := []string{webhookBody, sarJSON("a", []string{"g"}, "get", "", "pods", "ns", "p"), `{"spec":{"User":"a","groups":[],"extra":{}}}`,
		`{"status":[1,"x",{"a":[null,true,false,-1.5e3]}],"spec":{"user":"a","nonResourceAttributes":{"path":"/x","verb":"get"}}}`,
		`{"metadata":{"n\u00e9":"\"\\\/\b\f\n\r\t\u20AC","x":[0,-0,0.5,1E+2,-3e-4]},"spec":{"groups":["g"],"x":{}}}`}
	tokens := []string{"{", "}", "[", "]", ",", ":", `"`, `\`, "1", "-", ".", "e", "E+", "t", "n", "f", " ", "\t", "\x01", "\xff", "null", "true",
		`"x"`, "0", "01", `\u00e9`, `\u12`, `\n`, `\q`, `"\/"`, "-0.5e-7", "[{}]"}
	r := rand.New(rand.NewPCG(1, 2))
	taken := 0
	for range 100000 {
		b := []byte(seeds[r.IntN(len(seeds))])
		for range r.IntN(4) + 1 {
			at, token := r.IntN(len(b)), tokens[r.IntN(len(tokens))]
			switch r.IntN(3) {
			case 0:
				b = slices.Insert(b, at, []byte(token)...)
			case 1:
				b = slices.Delete(b, at, at+1)
			case 2:
				b[at] = token[0]
			}
		}
		var fast sarRequest
		if decodeSARFast(b, &fast) {
			taken++
			checkSameAsEncodingJSON(t, b, &fast)
		}
	}
	if taken == 0 {
		t.Fatal("the fast path took no mutant: the test tests nothing")
	}
}

// FuzzDecodeSAR: whatever the fast path takes, encoding/json decodes to the
// same value without an error.
func FuzzDecodeSAR(f *testing.F) {
	f.Add([]byte(webhookBody))
	f.Add([]byte(sarJSON("a", []string{"fuzz-admins"}, "get", "", "pods", "ns", "p")))
	f.Add([]byte(`{"spec":{"User":"a","groups":[],"extra":{}}}`))
	f.Add([]byte(`{"spec":{"resourceAttributes":{"fieldSelector":{"requirements":[]}}}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var fast sarRequest
		if !decodeSARFast(body, &fast) {
			return
		}
		checkSameAsEncodingJSON(t, body, &fast)
	})
}

// BenchmarkDecodeSAR: a webhook's SubjectAccessReview through decodeJSON
// (the fast path) and through json.Unmarshal alone.
func BenchmarkDecodeSAR(b *testing.B) {
	body := []byte(webhookBody)
	b.Run("decodeJSON", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var sar sarRequest
			if err := decodeJSON(body, &sar); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var sar sarRequest
			if err := json.Unmarshal(body, &sar); err != nil {
				b.Fatal(err)
			}
		}
	})
}
