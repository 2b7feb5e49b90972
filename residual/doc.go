// Package residual handles what Cedar partial evaluation leaves: the
// residual of a policy that depends on the object of a request, which
// authorization cannot see yet. kcedar sends each residual to the API server
// as an opaque condition (KEP-5681, conditional authorization) and evaluates
// it when the API server calls back in admission with the object.
//
// A condition is a Cedar expression, signed with an HMAC key of a [Keyring]
// and bound to the request it was issued for, so a condition moved to
// another request, list or authorizer, or altered, is refused (fail closed:
// a deny condition that does not verify denies). Its format carries a
// version ([ConditionType]); a condition of another version is refused, not
// guessed at. Policies of one form (differing only in their constants) share
// one condition ([GroupConditionType]), evaluated policy by policy.
//
// An [Evaluator] decodes ([Evaluator.Explain]) and evaluates conditions with
// the schema and the keys alone:
// it needs no policy set, so a condition issued before a policy change is
// judged by the policies that issued it, and the callback answers even
// before any policy set has loaded. Package cedar writes the conditions
// (cedar.Authorizer.ConditionsAwareAuthorize) with the same keys.
//
// The in-process types are k8s.io/apiserver's alpha conditions types
// (authorizer.ConditionsAwareDecision, authorizer.ConditionsData): they pin
// an embedder to the k8s.io/apiserver minor version kcedar requires.
package residual
