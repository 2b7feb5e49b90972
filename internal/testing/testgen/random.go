package testgen

import (
	"fmt"
	"math/rand"
	"strings"
)

// RandomPolicies writes n policies p0..p<n-1>, a third of them forbids, each
// with the scope scope draws ("principal..., action..., resource...") and up
// to two when/unless clauses (a quarter unless) that cond draws.
func RandomPolicies(rng *rand.Rand, n int, scope, cond func(*rand.Rand) string) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		effect := "permit"
		if rng.Intn(3) == 0 {
			effect = "forbid"
		}
		fmt.Fprintf(&b, "@id(\"p%d\")\n%s(%s)", i, effect, scope(rng))
		for j := rng.Intn(3); j > 0; j-- {
			clause := "when"
			if rng.Intn(4) == 0 {
				clause = "unless"
			}
			fmt.Fprintf(&b, "\n%s { %s }", clause, cond(rng))
		}
		b.WriteString(";\n")
	}
	return b.String()
}

// RandomTree combines leaves with &&, || and ! up to depth levels.
func RandomTree(rng *rand.Rand, depth int, leaf func(*rand.Rand) string) string {
	if depth > 0 && rng.Intn(3) == 0 {
		l, r := RandomTree(rng, depth-1, leaf), RandomTree(rng, depth-1, leaf)
		switch rng.Intn(3) {
		case 0:
			return "(" + l + " && " + r + ")"
		case 1:
			return "(" + l + " || " + r + ")"
		}
		return "!(" + l + ")"
	}
	return leaf(rng)
}
