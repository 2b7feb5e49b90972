package conditions

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/lib/cedarx/ast"
	"github.com/kcedar/kcedar/internal/lib/cedarx/eval"
	"github.com/kcedar/kcedar/internal/wire"
)

// Grouped conditions. Policies written from one pattern leave residuals that
// differ only in their constants and `like` patterns:
// `resource.object.metadata.labels["team"] == "t1"`, `... == "t2"`,
// `resource.name like "web-t1-*"`, and so on. Sent one per policy, each
// repeats the expression, the id, the type, the description and the MAC. A
// group condition sends the form once (engine.Template: the expression with
// each constant read from `context.v<i>` and each pattern a placeholder
// "p<i>") and, per policy, only its id, its constants and its patterns:
//
//	kc4;<key id>;<mac>;<entity type>;<length of form>;<form>;[{id: "p1", v0: "t1", p0: "" like "web-t1-*"}, ...]
//
// It holds when the form holds for any member's constants and patterns, and
// it is evaluated member by member (each member's patterns put into the
// form when it is decoded), so each member keeps the errors and the KEP's
// rules it would have as a condition of its own (a failing member of a deny
// group denies; a failing member of an allow group is ignored), and the
// reason names the members that decided. A group's members are the
// policies of one list (deny or allow) of one answer; a group that would
// pass MaxConditionBytes is cut into several, and a group of one policy is
// sent as that policy's own condition.

// groupTypeStem is GroupConditionType without its version.
const groupTypeStem = "kcedar.dev/cedar-residual-group-v"

// GroupConditionType is the type of a group condition: the policies of one
// form (a Cedar expression over `resource` and `context.v<i>`) and each
// one's constants. It shares ConditionType's version.
const GroupConditionType = groupTypeStem + conditionVersion

// memberIDKey is the key of a member's policy id in its record.
const memberIDKey = "id"

// residualForm is what a residual contributes to a group: its form and its
// member record's text. It is cached with the residual (Engine.Derived).
type residualForm struct {
	key       string // entity type and form: residuals with one key group
	form      string // the form's Cedar text
	member    string // the member record: {id: "<policy id>", v0: ..., ...}
	groupable bool
}

// formOf is r's form, computed once per residual.
func (e *Engine) formOf(r engine.Residual) residualForm {
	return e.Derived(r, "form", func() any { return newResidualForm(r) }).(residualForm)
}

func newResidualForm(r engine.Residual) residualForm {
	template, values, patterns, ok := engine.Template(r.Expr)
	if !ok {
		return residualForm{}
	}
	form, err := engine.ExprText(template)
	if err != nil {
		return residualForm{}
	}
	var b strings.Builder
	b.WriteString("{" + memberIDKey + ": ")
	b.Write(types.String(r.Policy.ID).MarshalCedar())
	for i, v := range values {
		b.WriteString(", " + engine.TemplateSlot(i) + ": ")
		b.Write(v.MarshalCedar())
	}
	for i, p := range patterns {
		// A pattern is not a value: the member holds it as the `like` it is
		// read from (parseMembers).
		b.WriteString(", " + engine.PatternSlot(i) + ": \"\" like ")
		b.Write(p.MarshalCedar())
	}
	b.WriteString("}")
	return residualForm{key: string(r.EntityType) + ";" + form, form: form, member: b.String(), groupable: true}
}

// formed is a residual and its form, fetched once per answer.
type formed struct {
	r    engine.Residual
	form residualForm // zero for a residual alone in its list
}

// signAll signs the conditions of list (residuals of one effect, each known
// to encode), grouping those of one form: a condition per group, in the
// order of each group's first member.
func (e *Engine) signAll(list []engine.Residual, effect engine.DecisionType, s *signer) ([]wire.Condition, error) {
	var out []wire.Condition
	for _, group := range e.groupByForm(list) {
		for _, chunk := range chunks(group, s.key) {
			cond, err := e.signChunk(chunk, effect, s)
			if err != nil {
				return nil, err
			}
			out = append(out, cond)
		}
	}
	return out, nil
}

// groupByForm splits list into groups of one form, in order of first
// appearance; a residual without a form is a group of its own. A list of
// one residual needs no form.
func (e *Engine) groupByForm(list []engine.Residual) [][]formed {
	if len(list) == 1 {
		return [][]formed{{{r: list[0]}}}
	}
	var groups [][]formed
	index := map[string]int{}
	for _, r := range list {
		f := formed{r: r, form: e.formOf(r)}
		if !f.form.groupable {
			groups = append(groups, []formed{f})
			continue
		}
		i, seen := index[f.form.key]
		if !seen {
			i = len(groups)
			index[f.form.key] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], f)
	}
	return groups
}

// chunks cuts a group into runs whose group condition, signed with key,
// fits in MaxConditionBytes.
func chunks(group []formed, key Key) [][]formed {
	if len(group) < 2 {
		return [][]formed{group}
	}
	head := signedLen(key, groupBody(string(group[0].r.EntityType), group[0].form.form, nil))
	var out [][]formed
	start, size := 0, head
	for i, f := range group {
		n := len(f.form.member) + 1 // and its separator
		if i > start && size+n > MaxConditionBytes {
			out = append(out, group[start:i])
			start, size = i, head
		}
		size += n
	}
	return append(out, group[start:])
}

// signChunk is the signed condition of a run of one group: a residual's own
// condition when it is alone, else a group condition.
func (e *Engine) signChunk(chunk []formed, effect engine.DecisionType, s *signer) (wire.Condition, error) {
	if len(chunk) == 1 {
		return e.encodeResidual(chunk[0].r, effect, s)
	}
	first := chunk[0].r
	members := make([]string, len(chunk))
	for i, f := range chunk {
		members[i] = f.form.member
	}
	cond := wire.Condition{
		ID:          ConditionID(first.Policy.ID),
		Type:        GroupConditionType,
		Description: truncateUTF8(fmt.Sprintf("%s and %d more policies of its form: %s", first.Policy.ID, len(chunk)-1, first.Policy.Describe()), wire.MaxDescriptionBytes),
		Condition:   groupBody(string(first.EntityType), chunk[0].form.form, members),
	}
	if n := signedLen(s.key, cond.Condition); n > MaxConditionBytes {
		return wire.Condition{}, fmt.Errorf("group condition of policy %s is %d bytes, over the limit of %d", first.Policy.ID, n, MaxConditionBytes)
	}
	return sign(cond, effect, s), nil
}

// groupBody is a group condition's body: "<entity type>;<length of
// form>;<form>;[<member>, ...]".
func groupBody(entityType, form string, members []string) string {
	return entityType + ";" + strconv.Itoa(len(form)) + ";" + form + ";[" + strings.Join(members, ",") + "]"
}

// groupMember is one policy of a decoded group condition: its id, the
// context its constants are read from, and the form with its patterns put
// in (engine.InstantiatePatterns), which is what it evaluates.
type groupMember struct {
	policyID string
	context  types.Record
	expr     ast.IsNode
}

// parseGroup decodes a group condition's body after its entity type: the
// form and the members.
func parseGroup(rest string) (ast.IsNode, []groupMember, error) {
	lenText, rest, found := strings.Cut(rest, ";")
	n, err := strconv.Atoi(lenText)
	if !found || err != nil || n < 0 || n >= len(rest) || rest[n] != ';' || strconv.Itoa(n) != lenText {
		return nil, nil, errors.New("malformed group condition")
	}
	form, err := engine.ParseExpr(rest[:n])
	if err != nil {
		return nil, nil, fmt.Errorf("form: %v", err)
	}
	members, err := parseMembers(rest[n+1:], form)
	if err != nil {
		return nil, nil, err
	}
	return form, members, nil
}

// parseMembers reads a group's member records, in order: a Cedar set
// literal of records, each with its policy id, its constants (v0, v1, ...)
// and its patterns (p0: "" like "<pattern>", ...), and puts each member's
// patterns into form.
func parseMembers(text string, form ast.IsNode) ([]groupMember, error) {
	expr, err := engine.ParseExpr(text)
	if err != nil {
		return nil, fmt.Errorf("members: %v", err)
	}
	set, isSet := expr.(ast.NodeTypeSet)
	if !isSet || len(set.Elements) < 2 {
		return nil, errors.New("members: not a set of two or more records")
	}
	// A form without a pattern is every member's expression as it is.
	patterned := holdsLike(form)
	members := make([]groupMember, len(set.Elements))
	for i, element := range set.Elements {
		if members[i], err = parseMember(element, form, patterned); err != nil {
			return nil, fmt.Errorf("members: %v", err)
		}
	}
	return members, nil
}

// holdsLike reports whether n holds a `like`.
func holdsLike(n ast.IsNode) bool {
	found := false
	ast.Inspect(ast.NewNode(n), func(n ast.IsNode) bool {
		if _, isLike := n.(ast.NodeTypeLike); isLike {
			found = true
		}
		return !found
	})
	return found
}

// parseMember reads one member record of a group with form (patterned: the
// form holds placeholder patterns).
func parseMember(element ast.IsNode, form ast.IsNode, patterned bool) (groupMember, error) {
	values, patterns, err := splitPatterns(element)
	if err != nil {
		return groupMember{}, err
	}
	v, err := eval.Eval(values, eval.Env{Context: types.NewRecord(nil)})
	if err != nil {
		return groupMember{}, err
	}
	rec, isRecord := v.(types.Record)
	if !isRecord {
		return groupMember{}, errors.New("a member is not a record")
	}
	id, found := rec.Get(memberIDKey)
	idText, isString := id.(types.String)
	if !found || !isString {
		return groupMember{}, errors.New("a member has no policy id")
	}
	m := groupMember{policyID: string(idText), context: rec, expr: form}
	if patterned {
		if m.expr, err = engine.InstantiatePatterns(form, patterns); err != nil {
			return groupMember{}, fmt.Errorf("member %s: %v", idText, err)
		}
	}
	return m, nil
}

// splitPatterns splits a member record literal into the record of its other
// fields and its patterns, by slot: each pattern slot p<i> holds `"" like
// <pattern>`, and p0 ... p<n-1> are all there.
func splitPatterns(element ast.IsNode) (ast.IsNode, []types.Pattern, error) {
	rec, isRecord := element.(ast.NodeTypeRecord)
	if !isRecord {
		return nil, nil, errors.New("a member is not a record")
	}
	var patterns []types.Pattern
	var rest ast.NodeTypeRecord
	for _, el := range rec.Elements {
		like, isLike := el.Value.(ast.NodeTypeLike)
		if !isLike {
			rest.Elements = append(rest.Elements, el)
			continue
		}
		if string(el.Key) != engine.PatternSlot(len(patterns)) || !isEmptyString(like.Arg) {
			return nil, nil, fmt.Errorf("member field %q is not the next pattern slot", el.Key)
		}
		patterns = append(patterns, like.Value)
	}
	return rest, patterns, nil
}

// isEmptyString reports whether n is the literal "".
func isEmptyString(n ast.IsNode) bool {
	v, isValue := n.(ast.NodeValue)
	return isValue && v.Value == types.String("")
}

// memberResults evaluates a decoded condition: one result for a policy's
// own condition, one per member for a group.
func (e *Evaluator) memberResults(p pendingCondition, envs *envCache) []conditionResult {
	res := conditionResult{id: p.cond.ID, description: p.cond.Description, err: p.err}
	if p.err != nil || p.d.members == nil {
		if p.err == nil {
			res.holds, res.err = e.evaluateDecoded(p.d, envs)
		}
		return []conditionResult{res}
	}
	env, err := envs.get(p.d.entityType)
	out := make([]conditionResult, len(p.d.members))
	for i, m := range p.d.members {
		out[i] = conditionResult{id: m.policyID, err: err}
		if err == nil {
			memberEnv := env
			memberEnv.Context = m.context
			out[i].holds, out[i].err = evaluateExpr(m.expr, memberEnv)
		}
	}
	return out
}

// groupText is what a group condition checks, for a person to read: the
// members' expressions (the form with each one's constants and patterns)
// joined by `||`.
func groupText(members []groupMember) (string, error) {
	var or ast.IsNode
	for _, m := range members {
		n := engine.Instantiate(m.expr, m.context)
		if or == nil {
			or = n
		} else {
			or = ast.NodeTypeOr{BinaryNode: ast.BinaryNode{Left: or, Right: n}}
		}
	}
	return engine.ExprText(or)
}
