package engine

import (
	"context"
	"testing"

	"github.com/kcedar/kcedar/internal/testing/embeddedschema"
	"github.com/kcedar/kcedar/internal/testing/testgen"
)

func TestZZPlatformNamed(t *testing.T) {
	set := policySetOf(t, "platform", testgen.Platform(100000, 1, true))
	reqs := testgen.PlatformRequests(1000, 4096, 1, true)
	e := NewEngine(embeddedschema.Schema(t), set, NewCodec(RandomKeyring()), EngineOptions{})
	shown := 0
	for _, r := range reqs {
		if (r.Verb != "create" && r.Verb != "update") || r.Name == "" {
			continue
		}
		var st Stats
		d := e.AuthorizeWithStats(context.Background(), r, &st)
		if st.Candidates > 50 && shown < 12 {
			shown++
			t.Logf("%d cands: %s %s ns=%q name=%q user=%s groups=%v extra=%v -> %s deny=%d allow=%d", st.Candidates, r.Verb, r.Resource, r.Namespace, r.Name, r.User.Name, r.User.Groups, r.User.Extra, d.Type(), len(d.DenyConditions()), len(d.AllowConditions()))
			if shown == 1 {
				for _, c := range d.DenyConditions()[:min(3, len(d.DenyConditions()))] {
					t.Logf("   deny %s: %v", c.Policy.ID, c.Policy.AST.Conditions)
				}
			}
		}
	}
}
