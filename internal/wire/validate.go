package wire

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Validate checks a ConditionsAwareDecision against upstream's validation
// of the type (kubernetes/kubernetes staging/src/k8s.io/api/authorization/v1
// markers, KEP-5681): a known type with exactly its own member set; in a
// ConditionsMap at least one allow or deny condition, at most MaxConditions
// conditions, ids unique and prefixed label keys outside the reserved
// k8s.io and kubernetes.io prefixes, types prefixed label keys, conditions of
// at most MaxConditionBytes and descriptions of at most MaxDescriptionBytes;
// in a Union, authorizer names that are DNS-1123 subdomains and members that
// are valid themselves. It returns every violation found.
func Validate(d *ConditionsAwareDecision) error {
	return errors.Join(validateDecision("decision", d)...)
}

func validateDecision(path string, d *ConditionsAwareDecision) []error {
	if d == nil {
		return []error{fmt.Errorf("%s: missing", path)}
	}
	var errs []error
	set := 0
	for _, present := range []bool{d.Allow != nil, d.Deny != nil, d.NoOpinion != nil, d.ConditionsMap != nil, d.Union != nil} {
		if present {
			set++
		}
	}
	want := func(ok bool, field string) {
		if !ok || set != 1 {
			errs = append(errs, fmt.Errorf("%s: type %s needs %s and no other member", path, d.Type, field))
		}
	}
	switch d.Type {
	case DecisionTypeAllow:
		want(d.Allow != nil, "allow")
	case DecisionTypeDeny:
		want(d.Deny != nil, "deny")
	case DecisionTypeNoOpinion:
		want(d.NoOpinion != nil, "noOpinion")
	case DecisionTypeConditionsMap:
		want(d.ConditionsMap != nil, "conditionsMap")
		if d.ConditionsMap != nil {
			errs = append(errs, validateMap(path+".conditionsMap", d.ConditionsMap)...)
		}
	case DecisionTypeUnion:
		want(len(d.Union) > 0, "union")
		for i := range d.Union {
			m := &d.Union[i]
			p := fmt.Sprintf("%s.union[%d]", path, i)
			for _, msg := range validation.IsDNS1123Subdomain(m.AuthorizerName) {
				errs = append(errs, fmt.Errorf("%s.authorizerName %q: %s", p, m.AuthorizerName, msg))
			}
			errs = append(errs, validateDecision(p+".decision", &m.Decision)...)
		}
	default:
		errs = append(errs, fmt.Errorf("%s: unknown type %q", path, d.Type))
	}
	return errs
}

func validateMap(path string, m *ConditionsMap) []error {
	var errs []error
	if len(m.DenyConditions)+len(m.AllowConditions) == 0 {
		errs = append(errs, fmt.Errorf("%s: needs at least one allow or deny condition", path))
	}
	if n := len(m.DenyConditions) + len(m.NoOpinionConditions) + len(m.AllowConditions); n > MaxConditions {
		errs = append(errs, fmt.Errorf("%s: %d conditions, more than %d", path, n, MaxConditions))
	}
	seen := map[string]bool{}
	for _, list := range []struct {
		name  string
		conds []Condition
	}{{"denyConditions", m.DenyConditions}, {"noOpinionConditions", m.NoOpinionConditions}, {"allowConditions", m.AllowConditions}} {
		for i, c := range list.conds {
			p := func() string { return fmt.Sprintf("%s.%s[%d]", path, list.name, i) }
			errs = append(errs, prefixedLabelKey(p, ".id", c.ID)...)
			if seen[c.ID] {
				errs = append(errs, fmt.Errorf("%s.id %q: duplicate", p(), c.ID))
			}
			seen[c.ID] = true
			errs = append(errs, prefixedLabelKey(p, ".type", c.Type)...)
			if len(c.Condition) > MaxConditionBytes {
				errs = append(errs, fmt.Errorf("%s.condition: %d bytes, more than %d", p(), len(c.Condition), MaxConditionBytes))
			}
			if len(c.Description) > MaxDescriptionBytes {
				errs = append(errs, fmt.Errorf("%s.description: %d bytes, more than %d", p(), len(c.Description), MaxDescriptionBytes))
			}
		}
	}
	return errs
}

// prefixedLabelKey is upstream's k8s-prefixed-label-key format: a qualified
// name whose DNS-subdomain prefix is required, outside the reserved
// k8s.io and kubernetes.io domains. The errors name the field: its parent's
// path (built only for an error) and field. Keys found valid are
// remembered (validKeys): an answer's ids and types repeat from answer to
// answer, and the check's regular expressions cost more than a decision.
func prefixedLabelKey(parent func() string, field, v string) []error {
	if validKeys.known(v) {
		return nil
	}
	var errs []error
	for _, msg := range validation.IsQualifiedName(v) {
		errs = append(errs, fmt.Errorf("%s%s %q: %s", parent(), field, v, msg))
	}
	prefix, _, ok := strings.Cut(v, "/")
	if !ok {
		return append(errs, fmt.Errorf("%s%s %q: a prefix is required (example.com/name)", parent(), field, v))
	}
	for _, reserved := range []string{"k8s.io", "kubernetes.io"} {
		if prefix == reserved || strings.HasSuffix(prefix, "."+reserved) {
			errs = append(errs, fmt.Errorf("%s%s %q: the prefix %s is reserved", parent(), field, v, reserved))
		}
	}
	if len(errs) == 0 {
		validKeys.add(v)
	}
	return errs
}

// validKeys is the prefixed label keys found valid, up to maxValidKeys of
// them (then the check runs for the others every time).
var validKeys keySet

const maxValidKeys = 1 << 16

type keySet struct {
	mu   sync.RWMutex
	keys map[string]struct{}
}

func (k *keySet) known(v string) bool {
	k.mu.RLock()
	_, ok := k.keys[v]
	k.mu.RUnlock()
	return ok
}

func (k *keySet) add(v string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.keys == nil {
		k.keys = map[string]struct{}{}
	}
	if len(k.keys) < maxValidKeys {
		k.keys[strings.Clone(v)] = struct{}{}
	}
}
