package format

import (
	"fmt"
	"reflect"
	"slices"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/lib/cedarlex"
	"github.com/kcedar/kcedar/internal/lib/cedarx/ast"
)

// Verify parses text, a file written with cedarlex.File (laid out or
// not), and checks that it holds exactly the policies built: as many,
// with the same @ids in the same order, each with the same AST. Any
// difference is a bug in the writer (text that became Cedar syntax, a
// comment that swallowed a policy): the error says so, and the caller
// writes nothing. It returns the parsed policies.
func Verify(name string, text []byte, built []cedarlex.Built) ([]*cedarlang.Policy, error) {
	parsed, err := cedarlang.ParsePolicies(name, text)
	if err != nil {
		return nil, fmt.Errorf("the written policies do not parse (a bug in kcedar; nothing written): %w", err)
	}
	if err := Matches(parsed, built); err != nil {
		return nil, fmt.Errorf("%s: the written policies are not the ones built (a bug in kcedar; nothing written): %w", name, err)
	}
	return parsed, nil
}

// VerifyFile is Verify of the file f wrote, as f wrote it. A file over
// cedarlang.MaxPolicyFileBytes is parsed in parts cut after a policy (its
// `;` and newline), each checked to hold exactly the policies built
// there: a comment or string that ran past a cut would leave its part
// unparseable or holding other policies.
func VerifyFile(name string, f *cedarlex.File) ([]*cedarlang.Policy, error) {
	return verifyParts(name, f.Bytes(), f.Built())
}

// verifyParts is VerifyFile of text, whose policies built end at their
// End offsets.
func verifyParts(name string, text []byte, built []cedarlex.Built) ([]*cedarlang.Policy, error) {
	if len(text) <= cedarlang.MaxPolicyFileBytes {
		return Verify(name, text, built)
	}
	var out []*cedarlang.Policy
	start, first := 0, 0 // the part's first byte and policy
	for i := range built {
		last := i == len(built)-1
		end := built[i].End
		if last {
			end = len(text) // the last part keeps what follows the last policy
		}
		if !last && built[i+1].End-start <= cedarlang.MaxPolicyFileBytes {
			continue
		}
		parsed, err := Verify(fmt.Sprintf("%s (from byte %d)", name, start), text[start:end], built[first:i+1])
		if err != nil {
			return nil, err
		}
		out = append(out, parsed...)
		start, first = end, i+1
	}
	if len(built) == 0 {
		return Verify(name, text, built) // comments only, over the limit: refused
	}
	return out, nil
}

// Matches reports how the parsed policies differ from the built ones, nil
// if they do not (see Verify).
func Matches(parsed []*cedarlang.Policy, built []cedarlex.Built) error {
	if len(parsed) != len(built) {
		return fmt.Errorf("%d policies built, %d parsed", len(built), len(parsed))
	}
	for i, p := range parsed {
		b := built[i]
		if p.ID != b.ID {
			return fmt.Errorf("policy %d: id %s parsed, %s built", i+1, cedarlex.Shorten(p.ID), cedarlex.Shorten(b.ID))
		}
		if !samePolicy(p.AST, b.AST) {
			return fmt.Errorf("policy %s: %s parsed, %s built", cedarlex.Shorten(p.ID), cedarlex.Shorten(string(p.Text())), cedarlex.Shorten(string(b.Text())))
		}
	}
	return nil
}

// samePolicy reports whether a and b are the same policy: effect,
// annotations in order, scope and conditions (positions aside). A tree
// ast.Equal does not know (it panics) is not the same.
func samePolicy(a, b *ast.Policy) (same bool) {
	defer func() {
		if recover() != nil {
			same = false
		}
	}()
	if a.Effect != b.Effect || !slices.Equal(a.Annotations, b.Annotations) || len(a.Conditions) != len(b.Conditions) ||
		!reflect.DeepEqual(a.Principal, b.Principal) || !reflect.DeepEqual(a.Action, b.Action) || !reflect.DeepEqual(a.Resource, b.Resource) {
		return false
	}
	for i, c := range a.Conditions {
		d := b.Conditions[i]
		if c.Condition != d.Condition || !ast.Equal(ast.NewNode(c.Body), ast.NewNode(d.Body)) {
			return false
		}
	}
	return true
}
