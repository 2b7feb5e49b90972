package conditions

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/lib/cedarx/ast"
	"github.com/kcedar/kcedar/internal/wire"
)

// conditionVersion is the version of kcedar's condition format, the one
// place that names it: both the condition string's tag (conditionPrefix) and
// ConditionType carry it. Bump it whenever a condition written before would
// mean something else when evaluated now (for example when the Cedar reading
// of object attributes changes); conditions of any other version are then
// refused (see checkVersion). Version 2: typed readings of quantities and
// int-or-string values, and values that do not convert are present, not
// dropped. Version 3: the MAC binds the condition to the request it was
// issued for (binding.go), and every part of its input is length-prefixed.
// Version 4: a group condition's form holds its `like` patterns as slots,
// each member its own patterns (group.go).
const conditionVersion = "4"

// conditionTypeStem is ConditionType without its version.
const conditionTypeStem = "kcedar.dev/cedar-residual-v"

// ConditionType names kcedar's condition language and its version: a Cedar
// expression over `resource`, evaluated against the admission data.
const ConditionType = conditionTypeStem + conditionVersion

// MaxConditionBytes bounds an encoded condition: upstream's limit. A permit
// residual that does not fit is dropped (it can then only fail to allow); a
// forbid residual that does not fit denies outright.
const MaxConditionBytes = wire.MaxConditionBytes

// A condition string is "kc4;<key id>;<mac>;<entity type>;<Cedar expression>",
// its first field the format tag conditionPrefix. The MAC (HMAC-SHA256, 128
// bits) covers the tag, the effect, id and type of the condition too, so
// moving a condition between lists, renaming it or relabeling its version
// breaks it, and the request the condition was issued for (Binding), which
// is not in the string: the verifier takes it from the callback.
const conditionPrefix = conditionTagStem + conditionVersion

// conditionTagStem is conditionPrefix without its version.
const conditionTagStem = "kc"

// Codec encodes residuals into conditions and decodes and verifies them.
// Decoded conditions are cached (bounded), so a callback parses each
// condition once.
type Codec struct {
	Keys *Keyring

	mu    sync.Mutex
	cache map[string]*decoded
}

// NewCodec returns a codec that signs with keys.
func NewCodec(keys *Keyring) *Codec {
	return &Codec{Keys: keys, cache: map[string]*decoded{}}
}

// encodedCondition is a residual's condition before signing (or why it
// cannot be sent), cached with the residual (Engine.Derived): the same policy
// leaves the same residual for many requests (the known values folded into
// it are the same).
type encodedCondition struct {
	cond wire.Condition
	err  error
}

// maxCachedConditions bounds the decoded-condition cache.
const maxCachedConditions = 8192

type decoded struct {
	entityType        types.EntityType
	expr              ast.IsNode      // a group's form (members set)
	object, oldObject *entities.Paths // what expr reads of the objects
	members           []groupMember   // a group condition's policies; nil for one policy's
}

// ConditionIDPrefix is the prefix of every condition id kcedar writes:
// upstream validates Condition.id as a prefixed label key.
const ConditionIDPrefix = "kcedar.dev/"

// ConditionID derives a condition id from a policy id: "kcedar.dev/<id>"
// when the id is a valid label-key name (at most 63 characters,
// alphanumerics, '-', '_' and '.', starting and ending alphanumeric), else
// a sanitized prefix of it and a hash of the whole id, so distinct policy ids
// give distinct condition ids.
func ConditionID(policyID string) string {
	return ConditionIDPrefix + conditionName(policyID)
}

func conditionName(policyID string) string {
	var b strings.Builder
	for _, r := range policyID {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	id := strings.Trim(b.String(), "-_.")
	if id == policyID && len(id) <= 63 && id != "" {
		return id
	}
	sum := sha256.Sum256([]byte(policyID))
	if len(id) > 54 {
		id = strings.TrimRight(id[:54], "-_.")
	}
	if id == "" {
		return "policy-" + hex.EncodeToString(sum[:4])
	}
	return id + "-" + hex.EncodeToString(sum[:4])
}

// Describe is the human-readable description of a policy's condition.
func Describe(p *cedarlang.Policy) string {
	return truncateUTF8(p.Describe(), wire.MaxDescriptionBytes)
}

// encodeResidual turns a residual into a condition with the given effect,
// signed by s (its key, for its binding). The unsigned condition is cached
// in the engine (the binding changes with every request; signing is
// cheap). It fails when the condition would be longer than
// MaxConditionBytes.
func (e *Engine) encodeResidual(r engine.Residual, effect engine.DecisionType, s *signer) (wire.Condition, error) {
	cond, err := e.codec.unsigned(e.Engine, r, effect, s.key)
	if err != nil {
		return wire.Condition{}, err
	}
	return sign(cond, effect, s), nil
}

// unsigned is the condition of a residual e left, before signing: its
// Condition holds just the body ("<entity type>;<expression>"). It is
// cached in e (Engine.Derived).
func (c *Codec) unsigned(e *engine.Engine, r engine.Residual, effect engine.DecisionType, key Key) (wire.Condition, error) {
	enc := e.Derived(r, effect.String()+"\x00"+key.cacheID(), func() any {
		cond, err := c.encode(r, key)
		return encodedCondition{cond: cond, err: err}
	}).(encodedCondition)
	return enc.cond, enc.err
}

// Encodes implements Encoder: whether r, left by a policy of effect, fits in
// a condition signed with the signing key.
func (c *Codec) Encodes(e *engine.Engine, r engine.Residual, effect engine.DecisionType) bool {
	_, err := c.unsigned(e, r, effect, c.Keys.signing())
	return err == nil
}

func (c *Codec) encode(r engine.Residual, key Key) (wire.Condition, error) {
	text, err := engine.ExprText(r.Expr)
	if err != nil {
		return wire.Condition{}, err
	}
	cond := wire.Condition{ID: ConditionID(r.Policy.ID), Type: ConditionType, Description: Describe(r.Policy)}
	cond.Condition = string(r.EntityType) + ";" + text
	if n := signedLen(key, cond.Condition); n > MaxConditionBytes {
		return wire.Condition{}, fmt.Errorf("condition of policy %s is %d bytes, over the limit of %d", r.Policy.ID, n, MaxConditionBytes)
	}
	return cond, nil
}

// signedLen is the length of body signed with key.
func signedLen(key Key, body string) int {
	return len(conditionPrefix) + 1 + len(key.ID) + 1 + macLen + 1 + len(body)
}

// sign completes an unsigned condition (Codec.unsigned) with s.
func sign(cond wire.Condition, effect engine.DecisionType, s *signer) wire.Condition {
	body := cond.Condition
	cond.Condition = conditionPrefix + ";" + s.key.ID + ";" + s.mac(effect, cond.ID, cond.Type, body) + ";" + body
	return cond
}

// ErrForeignCondition marks a condition kcedar did not write, did not write
// for this request (its binding differs), or that was altered: the MAC
// cannot tell these apart.
var ErrForeignCondition = errors.New("condition was not written by kcedar for this request, or was altered")

// ErrConditionVersion marks a condition kcedar wrote in another version of
// the condition format: it is refused, never evaluated, since its meaning may
// differ from what this kcedar would evaluate.
var ErrConditionVersion = errors.New("it is refused (fail closed): retry the request so it is authorized again")

// Decode verifies a condition written by Encode with the given effect for
// binding b and returns its entity type and expression.
func (c *Codec) Decode(cond wire.Condition, effect engine.DecisionType, b Binding) (types.EntityType, ast.IsNode, error) {
	d, err := c.decode(cond, effect, []Binding{b})
	if err != nil {
		return "", nil, err
	}
	return d.entityType, d.expr, nil
}

// decode verifies a condition with the given effect, signed for one of
// bindings.
func (c *Codec) decode(cond wire.Condition, effect engine.DecisionType, bindings []Binding) (*decoded, error) {
	tag, _, _ := strings.Cut(cond.Condition, ";")
	if err := checkVersion(cond.Type, tag); err != nil {
		return nil, fmt.Errorf("condition %q: %w", cond.ID, err)
	}
	if len(cond.Condition) > MaxConditionBytes {
		return nil, fmt.Errorf("condition %q: longer than %d bytes", cond.ID, MaxConditionBytes)
	}
	parts := strings.SplitN(cond.Condition, ";", 5)
	if len(parts) != 5 {
		return nil, fmt.Errorf("condition %q: %w (malformed)", cond.ID, ErrForeignCondition)
	}
	key, ok := c.Keys.lookup(parts[1])
	if !ok {
		return nil, fmt.Errorf("condition %q: %w (unknown key %q)", cond.ID, ErrForeignCondition, parts[1])
	}
	if !verify(key, effect, cond, parts, bindings) {
		return nil, fmt.Errorf("condition %q: %w", cond.ID, ErrForeignCondition)
	}
	cacheKey := effect.String() + "\x00" + cond.Condition
	c.mu.Lock()
	d, ok := c.cache[cacheKey]
	c.mu.Unlock()
	if ok {
		return d, nil
	}
	d = &decoded{entityType: types.EntityType(parts[3])}
	var err error
	if cond.Type == GroupConditionType {
		d.expr, d.members, err = parseGroup(parts[4])
	} else {
		d.expr, err = engine.ParseExpr(parts[4])
	}
	if err != nil {
		return nil, fmt.Errorf("condition %q: %v", cond.ID, err)
	}
	d.object, d.oldObject = engine.ObjectPaths(d.expr)
	c.mu.Lock()
	if len(c.cache) >= maxCachedConditions {
		for k := range c.cache { // evict an arbitrary entry
			delete(c.cache, k)
			break
		}
	}
	c.cache[cacheKey] = d
	c.mu.Unlock()
	return d, nil
}

// verify reports whether the MAC of a condition (split in parts) is right for
// one of bindings.
func verify(key Key, effect engine.DecisionType, cond wire.Condition, parts []string, bindings []Binding) bool {
	body := parts[3] + ";" + parts[4]
	for _, b := range bindings {
		if hmac.Equal([]byte(mac(key, effect, cond.ID, cond.Type, body, b)), []byte(parts[2])) {
			return true
		}
	}
	return false
}

// checkVersion refuses a condition not of the current format version. A
// condition whose type and tag agree on another version of kcedar's format
// gets a reason that says so (wrapping ErrConditionVersion); any other type is
// not kcedar's, and a tag that disagrees with the type was altered.
func checkVersion(typ, tag string) error {
	if (typ == ConditionType || typ == GroupConditionType) && tag == conditionPrefix {
		return nil
	}
	version, ok := strings.CutPrefix(typ, conditionTypeStem)
	if !ok {
		version, ok = strings.CutPrefix(typ, groupTypeStem)
	}
	if !ok || !isVersion(version) {
		return fmt.Errorf("type %q is not kcedar's (%s or %s)", typ, ConditionType, GroupConditionType)
	}
	if tag != conditionTagStem+version {
		return fmt.Errorf("%w (malformed: its format tag does not match type %q)", ErrForeignCondition, typ)
	}
	if older(version) {
		return fmt.Errorf("condition format %s was written by an older kcedar; %w", tag, ErrConditionVersion)
	}
	return fmt.Errorf("condition format %s is unknown to this kcedar, which reads %s; %w", tag, conditionPrefix, ErrConditionVersion)
}

// isVersion reports whether s is a format version: a decimal number without
// leading zeros.
func isVersion(s string) bool {
	if s == "" || len(s) > 9 || s[0] == '0' {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// older reports whether version (see isVersion) is before conditionVersion.
func older(version string) bool {
	if len(version) != len(conditionVersion) {
		return len(version) < len(conditionVersion)
	}
	return version < conditionVersion
}

// truncateUTF8 cuts s to at most n bytes without splitting a character.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
