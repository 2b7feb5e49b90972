package cedarlex

import (
	"testing"

	cedarlib "github.com/cedar-policy/cedar-go"
	"github.com/cedar-policy/cedar-go/types"
)

// A quoted string reads back, through cedar-go's parser, as the same string.
func TestQuoteReadsBack(t *testing.T) {
	for _, s := range []string{"", "plain", `a"b\c`, "tab\tnew\nline\rcr", "\x00\x01\x1f\x7f", "ünï ✓ 日本", "*-app-*", "\\u{41}"} {
		src := `permit (principal, action, resource) when { context.s == ` + Quote(s) + ` };`
		var p cedarlib.Policy
		if err := p.UnmarshalCedar([]byte(src)); err != nil {
			t.Fatalf("%q: %v\n%s", s, err, src)
		}
		ctx := types.NewRecord(types.RecordMap{"s": types.String(s)})
		ps := cedarlib.NewPolicySet()
		ps.Add("p", &p)
		if d, _ := cedarlib.Authorize(ps, nil, cedarlib.Request{Context: ctx}); d != cedarlib.Allow {
			t.Errorf("%q: %s does not read back as the same string", s, Quote(s))
		}
	}
}
