package format

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// randomFile is a few random policies, their tokens separated by random
// whitespace and comments (line, block, inline, own-line, blank lines).
func randomFile(rng *rand.Rand) string {
	var toks []string
	for i := rng.IntN(4); i >= 0; i-- {
		toks = append(toks, randomPolicy(rng, i)...)
	}
	var b strings.Builder
	for i, t := range toks {
		if i > 0 {
			b.WriteString(separator(rng, i))
		}
		b.WriteString(t)
	}
	if rng.IntN(3) == 0 {
		b.WriteString("\n// the end\n")
	}
	return b.String()
}

// separator is what goes between two tokens: mostly a space.
func separator(rng *rand.Rand, i int) string {
	switch rng.IntN(14) {
	case 0:
		return fmt.Sprintf(" // c%d\n", i)
	case 1:
		return fmt.Sprintf(" /* b%d */ ", i)
	case 2:
		return fmt.Sprintf("\n// own %d\n\n", i)
	case 3:
		return fmt.Sprintf(" /* multi\n   line %d */\n", i)
	case 4:
		return "\n  "
	case 5:
		return "\t"
	}
	return " "
}

// randomPolicy is the tokens of one policy, with @id unless i is 0.
func randomPolicy(rng *rand.Rand, i int) []string {
	var t []string
	if i > 0 || rng.IntN(2) == 0 {
		t = append(t, "@", "id", "(", fmt.Sprintf("%q", fmt.Sprintf("p%d-%d", i, rng.IntN(1000))), ")")
	}
	if rng.IntN(3) == 0 {
		t = append(t, "@", "reason", "(", `"because \"so\""`, ")")
	}
	t = append(t, pick(rng, "permit", "forbid"), "(")
	t = append(t, pick(rng, []string{"principal"}, []string{"principal", "==", "k8s", "::", "User", "::", `"al\"ice"`},
		[]string{"principal", "in", "k8s", "::", "Group", "::", `"system:masters"`},
		[]string{"principal", "is", "k8s", "::", "ServiceAccount", "in", "k8s", "::", "Group", "::", `"g"`})...)
	t = append(t, ",")
	t = append(t, pick(rng, []string{"action"}, []string{"action", "==", "k8s", "::", "Action", "::", `"get"`},
		[]string{"action", "in", "[", "k8s", "::", "Action", "::", `"get"`, ",", "k8s", "::", "Action", "::", `"list"`, "]"})...)
	t = append(t, ",")
	t = append(t, pick(rng, []string{"resource"}, []string{"resource", "is", "core", "::", "pods"})...)
	t = append(t, ")")
	for j := rng.IntN(3); j > 0; j-- {
		t = append(t, pick(rng, "when", "unless"), "{")
		t = append(t, randomExpr(rng, 3)...)
		t = append(t, "}")
	}
	return append(t, ";")
}

// randomExpr is the tokens of an expression up to depth levels deep.
func randomExpr(rng *rand.Rand, depth int) []string {
	if depth == 0 || rng.IntN(4) == 0 {
		return randomLeaf(rng)
	}
	l, r := randomExpr(rng, depth-1), randomExpr(rng, depth-1)
	switch rng.IntN(6) {
	case 0:
		return join(l, "&&", r)
	case 1:
		return join(l, "||", r)
	case 2:
		return append([]string{"!", "("}, append(l, ")")...)
	case 3:
		ite := append(append([]string{"(", "if"}, l...), append(append([]string{"then"}, r...), "else")...)
		return append(append(ite, randomLeaf(rng)...), ")")
	case 4:
		return append([]string{"("}, append(join(l, "||", r), ")")...)
	}
	return join(l, "&&", join(randomLeaf(rng), "||", r))
}

// join is l op r.
func join(l []string, op string, r []string) []string {
	return append(append(append([]string{}, l...), op), r...)
}

// randomLeaf is a boolean expression without && or ||.
func randomLeaf(rng *rand.Rand) []string {
	return pick(rng,
		[]string{"resource", ".", "namespace", "==", `"kube-system"`},
		[]string{"principal", ".", "name", "like", `"system:\*serviceaccount*"`},
		[]string{"resource", "has", "object"},
		[]string{"resource", ".", "object", ".", "v1", ".", "spec", "has", `"x-y"`},
		[]string{"resource", ".", "object", ".", "v1", ".", "spec", "[", `"x-y"`, "]", "==", "-", "1"},
		[]string{"context", "has", "x", "&&", "context", ".", "x", "<", "-", "5", "+", "2", "*", "3"},
		[]string{"principal", "is", "k8s", "::", "User", "in", "k8s", "::", "Group", "::", `"a\\b"`},
		[]string{"[", "1", ",", "2", ",", "3", "]", ".", "contains", "(", "2", ")"},
		[]string{"{", "a", ":", "1", ",", `"b c"`, ":", "[", "true", "]", "}", "has", "a"},
		[]string{"ip", "(", `"10.0.0.1"`, ")", ".", "isInRange", "(", "ip", "(", `"10.0.0.0/8"`, ")", ")"},
		[]string{"decimal", "(", `"1.5"`, ")", ".", "lessThan", "(", "decimal", "(", `"2.25"`, ")", ")"},
		[]string{"principal", ".", "name", "==", `"é\u{1F600}\n\t\"q\""`},
		[]string{"principal", "in", "k8s", "::", "Group", "::", `"team-\"x\""`},
		[]string{"true"},
	)
}

// pick is one of xs.
func pick[T any](rng *rand.Rand, xs ...T) T { return xs[rng.IntN(len(xs))] }
