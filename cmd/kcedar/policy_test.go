package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/cedarlang/lint"
	"github.com/kcedar/kcedar/internal/cluster/policyobjects"
	"github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/testing/embeddedschema"
	"github.com/kcedar/kcedar/internal/tools/rbacconvert"
)

// Packing the policy library and unpacking it gives the same files back.
func TestPolicyPackUnpackRoundTrip(t *testing.T) {
	src := "../../policies/library"
	var out bytes.Buffer
	if err := packDir(&out, src, ""); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "kind: CedarPolicy") {
		t.Fatalf("no CedarPolicy in:\n%s", out.String()[:min(500, out.Len())])
	}
	dst := t.TempDir()
	if _, err := unpackTo(&out, dst); err != nil {
		t.Fatal(err)
	}
	want, err := lint.ReadPaths([]string{src})
	if err != nil || len(want) == 0 {
		t.Fatalf("%d files: %v", len(want), err)
	}
	for _, f := range want {
		rel, _ := filepath.Rel(src, f.Name)
		got, err := os.ReadFile(filepath.Join(dst, rel))
		if err != nil || !bytes.Equal(got, f.Data) {
			t.Fatalf("%s did not round-trip: %v", rel, err)
		}
	}
}

func TestPolicyUnpackRefusesEscapes(t *testing.T) {
	in := "apiVersion: kcedar.dev/v1alpha1\nkind: CedarPolicy\nmetadata:\n  name: x\n  annotations:\n    kcedar.dev/source-file: ../../etc/evil.cedar\nspec:\n  content: permit(principal, action, resource);\n"
	if _, err := unpackTo(strings.NewReader(in), t.TempDir()); err == nil {
		t.Fatal("a path outside the directory was written")
	}
	var out bytes.Buffer
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a_b.cedar"), []byte("permit(principal, action, resource);"), 0o644)
	os.WriteFile(filepath.Join(dir, "a-b.cedar"), []byte("permit(principal, action, resource);"), 0o644)
	if err := packDir(&out, dir, ""); err == nil || !strings.Contains(err.Error(), "both become") {
		t.Fatalf("name collision: %v", err)
	}
}

// stockRBACTwice is the converted RBAC of a stock cluster (the bootstrap
// policy fixtures), twice over, the second copy's ids renamed: more than one
// object holds.
func stockRBACTwice(t *testing.T) (*schemagen.Schema, []byte) {
	t.Helper()
	s := embeddedschema.Schema(t)
	in := &rbacconvert.Input{}
	if err := in.ReadPaths([]string{"../../internal/tools/rbacconvert/testdata/bootstrap"}); err != nil {
		t.Fatal(err)
	}
	res, err := rbacconvert.Convert(s, in)
	if err != nil {
		t.Fatal(err)
	}
	copy2 := strings.ReplaceAll(string(res.Policies), `@id("rbac/`, `@id("copy2/rbac/`)
	return s, append(append([]byte{}, res.Policies...), copy2...)
}

// A stock cluster's converted RBAC, doubled, packs into several objects,
// each under the object limit and valid on its own as the CRD's type, with
// the policy ids unchanged; unpack joins them into the same file.
func TestPolicyPackSplitsStockRBAC(t *testing.T) {
	s, text := stockRBACTwice(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rbac.cedar"), text, 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := packDir(&out, dir, ""); err != nil {
		t.Fatal(err)
	}
	objs := decodeCedarPolicies(t, out.Bytes())
	if len(objs) < 3 {
		t.Fatalf("%d bytes packed into %d objects", len(text), len(objs))
	}
	checker, err := policyobjects.NewChecker(s)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i, o := range objs {
		js, _ := json.Marshal(o)
		t.Logf("%s: %d bytes of content, %d bytes as JSON", o.Name, len(o.Spec.Content), len(js))
		if len(js) > 262144 || len(o.Spec.Content) > packBudget {
			t.Errorf("%s: %d bytes as JSON, %d of content", o.Name, len(js), len(o.Spec.Content))
		}
		part := fmt.Sprintf("%d/%d", i+1, len(objs))
		if o.Name != fmt.Sprintf("rbac-%d", i+1) || o.Labels[PackLabel] != "rbac" || o.Annotations[PartAnnotation] != part {
			t.Errorf("object %d: name %q, labels %v, annotations %v", i, o.Name, o.Labels, o.Annotations)
		}
		v := checker.Check(policyobjects.KindCluster, "", o.Name, o.Spec.Content)
		if !v.Valid {
			t.Fatalf("%s: %s", o.Name, v.Message())
		}
		ids = append(ids, v.IDs...)
	}
	want, err := cedarlang.ParsePolicies("rbac.cedar", text)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != len(want) {
		t.Fatalf("%d policies in the objects, %d in the file", len(ids), len(want))
	}
	for i, p := range want {
		if ids[i] != p.ID {
			t.Fatalf("policy %d: id %q in the objects, %q in the file", i, ids[i], p.ID)
		}
	}
	dst := t.TempDir()
	if _, err := unpackTo(&out, dst); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(dst, "rbac.cedar")); err != nil || !bytes.Equal(got, text) {
		t.Fatalf("unpacked file differs (%d bytes, want %d): %v", len(got), len(text), err)
	}
}

// decodeCedarPolicies decodes pack's YAML with the CRD's Go types.
func decodeCedarPolicies(t *testing.T, data []byte) []*policyobjects.CedarPolicy {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := policyobjects.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	decoder := serializer.NewCodecFactory(scheme).UniversalDeserializer()
	docs := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []*policyobjects.CedarPolicy
	for {
		doc, err := docs.Read()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		obj, _, err := decoder.Decode(doc, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		p, ok := obj.(*policyobjects.CedarPolicy)
		if !ok {
			t.Fatalf("decoded a %T", obj)
		}
		out = append(out, p)
	}
}

// Splitting refuses what would change a policy's id or cut one in two.
func TestPolicyPackSplitRefusals(t *testing.T) {
	const p = "@id(\"%s\")\npermit (principal, action, resource) when { context.verb == \"%s\" };\n"
	long := fmt.Sprintf(p, "big", strings.Repeat("x", 300))
	for name, tc := range map[string]struct {
		text, namespace, want string
	}{
		"no id":          {"// head\n" + fmt.Sprintf(p, "a", "get") + "permit (principal, action, resource);\n", "", "has no @id"},
		"over budget":    {fmt.Sprintf(p, "a", "get") + long, "", "policy big is"},
		"namespaced":     {fmt.Sprintf(p, "a", "get") + fmt.Sprintf(p, "b", "list"), "team", "does not split"},
		"does not parse": {fmt.Sprintf(p, "a", "get") + fmt.Sprintf(p, "b", "list") + "permit (;\n", "", "must parse"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := packFile("x.cedar", "x", []byte(tc.text), tc.namespace, 120)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// Parts are cut between policies, comments go with the policy after them,
// and the parts concatenate to the file again.
func TestPolicyPackSplitsBetweenPolicies(t *testing.T) {
	const p = "// about %[1]s\n@id(\"%[1]s\")\npermit (principal, action, resource); // %[1]s's own\n\n"
	var text string
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		text += fmt.Sprintf(p, id)
	}
	text += "@id(\"f\") permit (principal, action, resource); @id(\"g\") permit (principal, action, resource);\n// the end\n"
	objs, err := packFile("x.cedar", "x", []byte(text), "", 130)
	if err != nil {
		t.Fatal(err)
	}
	var joined string
	for _, o := range objs {
		if len(o.Spec.Content) > 130 {
			t.Errorf("%s: %d bytes", o.Name, len(o.Spec.Content))
		}
		if _, err := cedarlang.ParsePolicies(o.Name, []byte(o.Spec.Content)); err != nil {
			t.Errorf("%s: %v\n%s", o.Name, err, o.Spec.Content)
		}
		if c := strings.TrimLeft(o.Spec.Content, "\n"); !strings.HasPrefix(c, "// about") && !strings.HasPrefix(c, "@id(\"f\")") && !strings.HasPrefix(c, "@id(\"g\")") {
			t.Errorf("%s does not start with its first policy's comment:\n%s", o.Name, o.Spec.Content)
		}
		joined += o.Spec.Content
	}
	if len(objs) < 3 || joined != text {
		t.Fatalf("%d parts; joined equal: %v", len(objs), joined == text)
	}
}

// Unpack refuses namespaced objects, pointing to --policy-objects, and a
// split pack with a part missing.
func TestPolicyUnpackRefusals(t *testing.T) {
	ns := "apiVersion: kcedar.dev/v1alpha1\nkind: NamespacedCedarPolicy\nmetadata: {name: x, namespace: team}\nspec:\n  content: permit(principal, action, resource);\n"
	if _, err := unpackTo(strings.NewReader(ns), t.TempDir()); err == nil || !strings.Contains(err.Error(), "--policy-objects") {
		t.Fatalf("namespaced object: %v", err)
	}
	list := "apiVersion: v1\nkind: List\nitems:\n- " + strings.ReplaceAll(strings.TrimSuffix(ns, "\n"), "\n", "\n  ") + "\n"
	if _, err := unpackTo(strings.NewReader(list), t.TempDir()); err == nil || !strings.Contains(err.Error(), "--policy-objects") {
		t.Fatalf("namespaced object in a list: %v", err)
	}
	part := "apiVersion: kcedar.dev/v1alpha1\nkind: CedarPolicy\nmetadata:\n  name: x-%[1]d\n  labels: {kcedar.dev/pack: x}\n  annotations: {kcedar.dev/part: \"%[1]d/3\"}\nspec:\n  content: \"@id(\\\"%[1]d\\\") permit(principal, action, resource);\\n\"\n"
	in := fmt.Sprintf(part, 3) + "---\n" + fmt.Sprintf(part, 1)
	if _, err := unpackTo(strings.NewReader(in), t.TempDir()); err == nil || !strings.Contains(err.Error(), "part 2/3 is missing") {
		t.Fatalf("missing part: %v", err)
	}
	dir := t.TempDir()
	in += "---\n" + fmt.Sprintf(part, 2)
	if _, err := unpackTo(strings.NewReader(in), dir); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(filepath.Join(dir, "x.cedar"))
	if want := "@id(\"1\") permit(principal, action, resource);\n@id(\"2\") permit(principal, action, resource);\n@id(\"3\") permit(principal, action, resource);\n"; string(got) != want {
		t.Fatalf("joined:\n%s", got)
	}
}

// What a packed YAML names cannot make unpack write outside the directory
// (a path, a symbolic link under it), write a name of control characters,
// write one file for two objects, or write a file of other policies than
// the objects hold. Nothing is written when one file is refused.
func TestPolicyUnpackHostileObjects(t *testing.T) {
	obj := func(name, source, content string) string {
		ann := ""
		if source != "" {
			ann = fmt.Sprintf("  annotations: {kcedar.dev/source-file: %q}\n", source)
		}
		return fmt.Sprintf("apiVersion: kcedar.dev/v1alpha1\nkind: CedarPolicy\nmetadata:\n  name: %q\n%sspec:\n  content: %q\n---\n", name, ann, content)
	}
	part := func(i int, content string) string {
		return fmt.Sprintf("apiVersion: kcedar.dev/v1alpha1\nkind: CedarPolicy\nmetadata:\n  name: x-%[1]d\n  labels: {kcedar.dev/pack: x}\n  annotations: {kcedar.dev/part: \"%[1]d/2\"}\nspec:\n  content: %[2]q\n---\n", i, content)
	}
	const p = "@id(\"%s\") permit (principal, action, resource is core::pods);\n"
	outside := t.TempDir()
	for name, tc := range map[string]struct{ in, want string }{
		"dot dot":          {obj("a", "../evil.cedar", p), "inside the directory"},
		"absolute":         {obj("a", "/tmp/evil.cedar", p), "inside the directory"},
		"name dot dot":     {obj("../../evil", "", p), "inside the directory"},
		"symlink":          {obj("a", "link/evil.cedar", p), "path escapes"},
		"newline":          {obj("a", "x\n@id(\"p\").cedar", p), "control character"},
		"u2028":            {obj("a", "x\u2028y.cedar", p), "control character"},
		"backslash":        {obj("a", `..\evil.cedar`, p), "backslash"},
		"same file":        {obj("a", "x.cedar", fmt.Sprintf(p, "1")) + obj("b", "x.cedar", fmt.Sprintf(p, "2")), "both name"},
		"comment swallows": {part(1, fmt.Sprintf(p, "1")+"// the end") + part(2, fmt.Sprintf(p, "2")), "other policies"},
		"part unparseable": {part(1, fmt.Sprintf(p, "1")+"/*") + part(2, "*/"+fmt.Sprintf(p, "2")), "does not parse"},
		"part without id":  {part(1, fmt.Sprintf(p, "1")) + part(2, "permit (principal, action, resource);\n"), "without @id"},
		"one good first":   {obj("good", "good.cedar", fmt.Sprintf(p, "g")) + obj("a", "../evil.cedar", p), "inside the directory"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
				t.Fatal(err)
			}
			if _, err := unpackTo(strings.NewReader(tc.in), dir); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			for _, d := range []string{dir, outside, filepath.Dir(dir)} {
				if cedars, _ := filepath.Glob(filepath.Join(d, "*.cedar")); len(cedars) > 0 {
					t.Fatalf("written: %q", cedars)
				}
			}
		})
	}
}

func TestPolicyPackOfAFile(t *testing.T) {
	dir := t.TempDir()
	f := writeFile(t, dir, "team.cedar", "@id(\"a\") permit (principal, action, resource);\n")
	out, code := run(t, newPolicyPackCmd(), f)
	if code != 2 || !strings.Contains(out, "is a file: pack takes a directory") {
		t.Errorf("pack FILE: %d %s", code, out)
	}
}

// Every packed object carries the labels of its pack (managed-by, and the
// pack's name: --pack-name, else the directory's base name), so that
// `kubectl apply --prune -l kcedar.dev/pack-name=NAME` selects exactly the
// objects of that pack: every one of its objects, split parts included,
// and none of another pack's, namespaced or not.
func TestPolicyPackLabelsForPrune(t *testing.T) {
	objectsOf := func(args ...string) []map[string]any {
		t.Helper()
		out, code := run(t, newPolicyPackCmd(), args...)
		if code != 0 {
			t.Fatalf("pack %q: code %d\n%s", args, code, out)
		}
		var objs []map[string]any
		dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(out), 4096)
		for {
			var o map[string]any
			if err := dec.Decode(&o); err == io.EOF {
				break
			} else if err != nil {
				t.Fatal(err)
			}
			objs = append(objs, o)
		}
		return objs
	}
	labelsOf := func(o map[string]any) labels.Set {
		set := labels.Set{}
		m, _ := o["metadata"].(map[string]any)
		l, _ := m["labels"].(map[string]any)
		for k, v := range l {
			set[k] = v.(string)
		}
		return set
	}
	big := t.TempDir()
	var text strings.Builder
	for i := 0; text.Len() <= packBudget; i++ {
		fmt.Fprintf(&text, "@id(\"p%d\") permit (principal == k8s::User::\"u%d\", action, resource);\n", i, i)
	}
	writeFile(t, big, "rbac.cedar", text.String())
	writeFile(t, big, "small.cedar", "@id(\"s\") permit (principal, action, resource);\n")
	packs := map[string][]map[string]any{
		"quickstart": objectsOf("../../policies/quickstart"),
		"library":    objectsOf("../../policies/library", "--pack-name", "library"),
		"big":        objectsOf(big, "--pack-name", "big"),
		"team-a":     objectsOf("../../policies/quickstart", "-n", "team-a", "--pack-name", "team-a"),
	}
	if n := len(packs["big"]); n < 3 {
		t.Fatalf("the big pack has %d objects, want a split file and a small one", n)
	}
	for name, objs := range packs {
		sel, err := labels.Parse(PackNameLabel + "=" + name)
		if err != nil {
			t.Fatal(err)
		}
		for other, others := range packs {
			for _, o := range others {
				l := labelsOf(o)
				if l[ManagedByLabel] != ManagedByPack {
					t.Errorf("pack %s: object %v lacks %s=%s", other, o["metadata"], ManagedByLabel, ManagedByPack)
				}
				if sel.Matches(l) != (other == name) {
					t.Errorf("-l %s matches %v of pack %s: %v", sel, o["metadata"], other, sel.Matches(l))
				}
			}
		}
		if len(objs) == 0 {
			t.Errorf("pack %s: no objects", name)
		}
	}
	for _, o := range packs["big"] {
		if l := labelsOf(o); l[PackLabel] == "" && o["metadata"].(map[string]any)["name"] != "small" {
			t.Errorf("a part of the split file lost its %s label: %v", PackLabel, o["metadata"])
		}
	}
	for _, bad := range []string{"-bad", "a b", strings.Repeat("x", 64)} {
		if out, code := run(t, newPolicyPackCmd(), "../../policies/quickstart", "--pack-name", bad); code != 2 || !strings.Contains(out, "--pack-name") {
			t.Errorf("--pack-name %q: code %d\n%s", bad, code, out)
		}
	}
}
