package wire

import (
	"strings"
	"testing"
)

// Validate names every violation with its path, whether or not the keys
// beside it were seen valid before (validKeys).
func TestValidateConditionKeys(t *testing.T) {
	valid := Condition{ID: "kcedar.dev/p1", Type: "kcedar.dev/cedar-residual-v4", Condition: "x"}
	for round := 0; round < 2; round++ { // the second with the valid keys remembered
		for _, c := range []struct {
			cond Condition
			want string // "" for valid
		}{
			{valid, ""},
			{Condition{ID: "p1", Type: valid.Type}, `allowConditions[0].id "p1": a prefix is required`},
			{Condition{ID: "k8s.io/p1", Type: valid.Type}, "the prefix k8s.io is reserved"},
			{Condition{ID: "x.kubernetes.io/p1", Type: valid.Type}, "the prefix kubernetes.io is reserved"},
			{Condition{ID: "kcedar.dev/-p1", Type: valid.Type}, `allowConditions[0].id "kcedar.dev/-p1"`},
			{Condition{ID: valid.ID, Type: "kcedar.dev/cedar residual"}, `allowConditions[0].type "kcedar.dev/cedar residual"`},
		} {
			d := ConditionsAwareDecision{Type: DecisionTypeConditionsMap, ConditionsMap: &ConditionsMap{AllowConditions: []Condition{c.cond}}}
			err := Validate(&d)
			switch {
			case c.want == "" && err != nil:
				t.Errorf("round %d, %+v: %v", round, c.cond, err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("round %d, %+v: %v, want an error with %q", round, c.cond, err, c.want)
			}
		}
	}
	d := ConditionsAwareDecision{Type: DecisionTypeConditionsMap, ConditionsMap: &ConditionsMap{AllowConditions: []Condition{valid, valid}}}
	if err := Validate(&d); err == nil || !strings.Contains(err.Error(), "allowConditions[1].id \"kcedar.dev/p1\": duplicate") {
		t.Errorf("a duplicate id: %v", err)
	}
}
