package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/cedarlang/format"
	"github.com/kcedar/kcedar/internal/cedarlang/lint"
	"github.com/kcedar/kcedar/internal/cluster/policyobjects"
	"github.com/kcedar/kcedar/internal/lib/cedarlex"
)

func init() { rootCmd.AddCommand(newPolicyCmd()) }

// SourceAnnotation records the file a packed object came from, for unpack.
const SourceAnnotation = "kcedar.dev/source-file"

// A file too large for one object is packed into several, NAME-1, NAME-2,
// ...: each labelled PackLabel=NAME and annotated PartAnnotation "i/n", so
// that unpack joins them again.
const (
	PackLabel      = "kcedar.dev/pack"
	PartAnnotation = "kcedar.dev/part"
)

// Every packed object carries ManagedByLabel=ManagedByPack and
// PackNameLabel=the pack's name (--pack-name, else DIR's base name), so
// that `kubectl apply --prune -l kcedar.dev/pack-name=NAME` deletes the
// objects of the files that left the pack, and no other pack's.
const (
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedByPack  = "kcedar-policy-pack"
	PackNameLabel  = "kcedar.dev/pack-name"
)

// packBudget is the most spec.content bytes pack puts in one object. An
// object may hold policyobjects.MaxContentBytes (256 KiB), but `kubectl
// apply` copies the whole object into its last-applied-configuration
// annotation, and annotations may total 262,144 bytes: the budget leaves
// room for the metadata.
const packBudget = 200 << 10

func newPolicyCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "policy", Short: "Turn policy files into CedarPolicy objects and back (GitOps)"}
	cmd.AddCommand(newPolicyPackCmd(), newPolicyUnpackCmd())
	return cmd
}

// policyPackOptions are kcedar policy pack's flags.
type policyPackOptions struct {
	namespace string
	packName  string
	out       string
	output    string
}

const policyPackLong = `Print one CedarPolicy per *.cedar file under DIR (NamespacedCedarPolicy in
NS with --namespace), named after the file's path (team/a_b.cedar ->
team-a-b), with the path in the kcedar.dev/source-file annotation so
'kcedar policy unpack' restores the tree. The files stay the source of truth,
testable with 'kcedar validate' and 'kcedar test'; apply the output with
kubectl or a GitOps tool. Every object is labelled
app.kubernetes.io/managed-by=kcedar-policy-pack and kcedar.dev/pack-name=NAME
(--pack-name, else DIR's base name), so that kubectl apply --prune
-l kcedar.dev/pack-name=NAME deletes the objects of files that left DIR.

A file over 200 KiB (204,800 bytes: kubectl apply copies an object into an
annotation of at most 262,144 bytes, and the rest is room for metadata) is
split between policies, never inside one, into objects NAME-1, NAME-2, ...,
labelled kcedar.dev/pack=NAME and annotated kcedar.dev/part: "2/3";
'kcedar policy unpack' joins them into the one file again. Policy ids do not
change: every policy of a split file must have an @id (a default id names
its object), and a single policy over 200 KiB is an error. NamespacedCedarPolicy
ids carry their object's name, so a file packed with --namespace is never
split.

When the file changes, policies may move from one part to another, and
kcedar's admission check refuses an object whose policy ids another object
still serves: replace a split pack by deleting its parts first (kubectl delete
cedarpolicies -l kcedar.dev/pack=NAME; the object NAME too if it was packed
whole before), then applying the new ones.`

func newPolicyPackCmd() *cobra.Command {
	o := &policyPackOptions{}
	cmd := &cobra.Command{
		Use:   "pack DIR [--namespace NS] [--pack-name NAME] [--file FILE]",
		Short: "Print the *.cedar files under DIR as CedarPolicy objects (YAML), one per file (large files split)",
		Long:  policyPackLong,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Validate(cmd.ErrOrStderr()); err != nil {
				return &exitError{2, err}
			}
			if err := o.Run(cmd.OutOrStdout(), args[0]); err != nil {
				return &exitError{2, err}
			}
			return nil
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

// AddFlags registers the flags on f.
func (o *policyPackOptions) AddFlags(f *pflag.FlagSet) {
	f.StringVarP(&o.namespace, "namespace", "n", "", "make NamespacedCedarPolicy objects in this namespace")
	f.StringVar(&o.packName, "pack-name", "", "the pack's name, in every object's kcedar.dev/pack-name label (default: DIR's base name)")
	f.StringVarP(&o.output, "output", "o", "yaml", "output format: yaml")
	f.StringVar(&o.out, "file", "", "write the YAML here instead of stdout")
}

// Validate checks the output format (notes go to stderr).
func (o *policyPackOptions) Validate(stderr io.Writer) error {
	_, err := outputFormat(stderr, o.output, []string{"yaml"}, &o.out, "--file")
	return err
}

// Run packs the files under dir and writes the objects to --file or stdout.
func (o *policyPackOptions) Run(stdout io.Writer, dir string) error {
	w := stdout
	if o.out != "" {
		f, err := os.Create(o.out)
		if err != nil {
			return err
		}
		defer f.Close()
		w = f
	}
	return packDirNamed(w, dir, o.namespace, o.packName)
}

const policyUnpackLong = `Write the spec.content of CedarPolicy objects (YAML or JSON, as 'kcedar
policy pack' prints them or 'kubectl get cedarpolicies -o yaml' lists them;
"-" is stdin) into DIR as *.cedar files: each at the path of its
kcedar.dev/source-file annotation, else NAME.cedar. The parts of a split pack
(label kcedar.dev/pack, annotation kcedar.dev/part) are joined into one file;
a missing part is an error.

Only the kind CedarPolicy is taken. NamespacedCedarPolicy objects are refused:
served, their policies are confined to their namespace, which bare files
would lose. Analyse them with --policy-objects FILE instead (kcedar who-can,
can-i, authorize, test, validate).`

// policyUnpackOptions are kcedar policy unpack's arguments.
type policyUnpackOptions struct {
	input string // a file, or "-" for stdin
	dir   string
}

func newPolicyUnpackCmd() *cobra.Command {
	o := &policyUnpackOptions{}
	return &cobra.Command{
		Use:   "unpack FILE|- DIR",
		Short: "Write the spec.content of CedarPolicy objects into DIR as *.cedar files (split packs joined)",
		Long:  policyUnpackLong,
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Complete(args)
			if err := o.Run(cmd.InOrStdin(), cmd.ErrOrStderr()); err != nil {
				return &exitError{2, err}
			}
			return nil
		},
	}
}

// Complete takes the arguments FILE|- and DIR.
func (o *policyUnpackOptions) Complete(args []string) { o.input, o.dir = args[0], args[1] }

// Run reads the objects and writes their files, listing them on stderr.
func (o *policyUnpackOptions) Run(stdin io.Reader, stderr io.Writer) error {
	in := stdin
	if o.input != "-" {
		f, err := os.Open(o.input)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	files, err := unpackTo(in, o.dir)
	if err != nil {
		return err
	}
	for _, f := range files {
		fmt.Fprintln(stderr, "wrote", f)
	}
	return nil
}

// packedObject is what pack prints: either kind, same shape.
type packedObject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              policyobjects.PolicySpec `json:"spec"`
}

var nonName = regexp.MustCompile(`[^a-z0-9-]+`)

// objectName turns a relative file path into an object name.
func objectName(rel string) (string, error) {
	n := strings.ToLower(strings.TrimSuffix(filepath.ToSlash(rel), ".cedar"))
	n = strings.Trim(nonName.ReplaceAllString(n, "-"), "-")
	if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 || n == "" {
		return "", fmt.Errorf("%s: no valid object name from the file name (%q: %s)", rel, n, strings.Join(errs, "; "))
	}
	return n, nil
}

// packDir writes the *.cedar files under dir as policy objects (YAML
// documents) of the pack named after dir, splitting the files over
// packBudget (see packFile).
func packDir(w io.Writer, dir, namespace string) error {
	return packDirNamed(w, dir, namespace, "")
}

// packDirNamed is packDir for the pack packName ("": dir's base name).
func packDirNamed(w io.Writer, dir, namespace, packName string) error {
	if st, err := os.Stat(dir); err != nil {
		return err
	} else if !st.IsDir() {
		return fmt.Errorf("%s is a file: pack takes a directory, and names each object after its file's path there (put the file in a directory of its own and pack that)", dir)
	}
	packName, err := packNameOf(dir, packName)
	if err != nil {
		return err
	}
	objs, err := packObjects(dir, namespace, packBudget)
	if err != nil {
		return err
	}
	for i := range objs {
		if objs[i].Labels == nil {
			objs[i].Labels = map[string]string{}
		}
		objs[i].Labels[ManagedByLabel], objs[i].Labels[PackNameLabel] = ManagedByPack, packName
	}
	for i, obj := range objs {
		b, err := yaml.Marshal(obj)
		if err != nil {
			return err
		}
		if i > 0 {
			io.WriteString(w, "---\n")
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	return nil
}

// packNameOf is the pack's name: given, else dir's base name; a label value.
func packNameOf(dir, given string) (string, error) {
	name, from := given, "--pack-name"
	if name == "" {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return "", err
		}
		name, from = filepath.Base(abs), "the base name of "+dir
	}
	if errs := validation.IsValidLabelValue(name); len(errs) > 0 || name == "" {
		return "", fmt.Errorf("%s, %q, is no valid value of label %s (%s): give --pack-name NAME", from, name, PackNameLabel, strings.Join(errs, "; "))
	}
	return name, nil
}

// packObjects makes the objects of the *.cedar files under dir, at most
// budget bytes of content each.
func packObjects(dir, namespace string, budget int) ([]packedObject, error) {
	files, err := lint.ReadPaths([]string{dir})
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no *.cedar files under %s", dir)
	}
	seen := map[string]string{}
	var out []packedObject
	for _, f := range files {
		rel, err := filepath.Rel(dir, f.Name)
		if err != nil {
			return nil, err
		}
		if cedarlex.Visible(rel) != rel {
			return nil, fmt.Errorf("%s: the file's path holds a control character: rename it (unpack would refuse it)", cedarlex.Visible(rel))
		}
		name, err := objectName(rel)
		if err != nil {
			return nil, err
		}
		objs, err := packFile(filepath.ToSlash(rel), name, f.Data, namespace, budget)
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			if prev, ok := seen[o.Name]; ok {
				return nil, fmt.Errorf("%s and %s both become object %q: rename one", prev, rel, o.Name)
			}
			seen[o.Name] = rel
		}
		out = append(out, objs...)
	}
	return out, nil
}

// packFile makes the object of one file (rel, under the name name), or, over
// budget bytes, the parts name-1, name-2, ... of a split pack.
func packFile(rel, name string, data []byte, namespace string, budget int) ([]packedObject, error) {
	newObject := func(name, content string) packedObject {
		obj := packedObject{TypeMeta: metav1.TypeMeta{APIVersion: policyobjects.GroupVersion.String(), Kind: policyobjects.KindCluster},
			ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{SourceAnnotation: rel}},
			Spec:       policyobjects.PolicySpec{Content: content}}
		if namespace != "" {
			obj.Kind, obj.Namespace = policyobjects.KindNamespaced, namespace
		}
		return obj
	}
	if len(data) <= budget {
		return []packedObject{newObject(name, string(data))}, nil
	}
	if namespace != "" {
		return nil, fmt.Errorf("%s: %d bytes, over the budget of %d for one object; a NamespacedCedarPolicy's policy ids carry its object's name, so pack does not split it: split the file into several files", rel, len(data), budget)
	}
	if errs := validation.IsValidLabelValue(name); len(errs) > 0 {
		return nil, fmt.Errorf("%s: %d bytes, to be split, but %q is no valid value of label %s (%s): rename the file", rel, len(data), name, PackLabel, strings.Join(errs, "; "))
	}
	parts, err := splitPolicies(rel, data, budget)
	if err != nil {
		return nil, err
	}
	texts := make([]string, len(parts))
	for i, part := range parts {
		texts[i] = string(part)
	}
	if err := checkJoined(name, texts, string(data)); err != nil {
		return nil, fmt.Errorf("%s: the parts would not hold the file's policies (a bug in kcedar policy pack): %w", rel, err)
	}
	objs := make([]packedObject, len(parts))
	for i, part := range parts {
		obj := newObject(fmt.Sprintf("%s-%d", name, i+1), string(part))
		if errs := validation.IsDNS1123Subdomain(obj.Name); len(errs) > 0 {
			return nil, fmt.Errorf("%s: part name %q: %s", rel, obj.Name, strings.Join(errs, "; "))
		}
		obj.Labels = map[string]string{PackLabel: name}
		obj.Annotations[PartAnnotation] = fmt.Sprintf("%d/%d", i+1, len(parts))
		objs[i] = obj
	}
	return objs, nil
}

// splitPolicies cuts the Cedar text data (of the file rel) between policies
// into parts of at most budget bytes that concatenate to data again. Every
// policy must have an @id (a default id would name the part it lands in).
func splitPolicies(rel string, data []byte, budget int) ([][]byte, error) {
	policies, err := cedarlang.ParsePolicies(rel, data)
	if err != nil {
		return nil, fmt.Errorf("%s is %d bytes, over the budget of %d for one object, and is split between policies, so it must parse: %w", rel, len(data), budget, err)
	}
	if len(policies) == 0 {
		return nil, fmt.Errorf("%s is %d bytes, over the budget of %d for one object, and has no policies to split between", rel, len(data), budget)
	}
	cuts, err := policyCuts(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", rel, err)
	}
	if len(cuts) != len(policies) {
		return nil, fmt.Errorf("%s: %d policies but %d policy ends (a bug)", rel, len(policies), len(cuts))
	}
	cuts[len(cuts)-1] = len(data) // the last part keeps what follows the last policy
	var parts [][]byte
	start, prev := 0, 0 // the current part's start; the end of its last policy
	for i, p := range policies {
		if p.ID == p.Source {
			return nil, fmt.Errorf("%s: policy has no @id; a file split across objects needs one on every policy (a default id names the object it lands in)", p.Source)
		}
		if cuts[i]-prev > budget {
			return nil, fmt.Errorf("%s: policy %s is %d bytes, over the budget of %d for one object", p.Source, p.ID, cuts[i]-prev, budget)
		}
		if cuts[i]-start > budget {
			parts = append(parts, data[start:prev])
			start = prev
		}
		prev = cuts[i]
	}
	return append(parts, data[start:]), nil
}

// policyCuts lists, for each policy of src, where a part may end after it:
// after the end of the line of its closing ";" (a comment there stays with
// it), or at the next policy if that starts on the same line.
func policyCuts(src []byte) ([]int, error) {
	toks, err := cedarlex.Tokens(src)
	if err != nil {
		return nil, err
	}
	var cuts []int
	for i, t := range toks {
		if t.Kind != cedarlex.Punct || !t.Is(src, ";") {
			continue
		}
		cut := len(src)
		if nl := bytes.IndexByte(src[t.End:], '\n'); nl >= 0 {
			cut = t.End + nl + 1
		}
		for _, next := range toks[i+1:] {
			if !next.Kind.IsComment() {
				cut = min(cut, next.Pos.Offset)
				break
			}
		}
		cuts = append(cuts, cut)
	}
	return cuts, nil
}

// unpackTo writes the policy objects of in into dir (see policyUnpackLong)
// and returns the files written. Every file is checked before any is
// written (see unpackPaths), and written through an os.Root of dir, so
// that neither a path nor a symbolic link under dir leads outside it.
func unpackTo(in io.Reader, dir string) ([]string, error) {
	objs, err := readPackedObjects(in)
	if err != nil {
		return nil, err
	}
	files, err := unpackFiles(objs)
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, errors.New("no policy objects in the input")
	}
	paths, err := unpackPaths(files)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	written := make([]string, len(files))
	for i, f := range files {
		if err := root.MkdirAll(filepath.Dir(paths[i]), 0o755); err != nil {
			return nil, err
		}
		if err := root.WriteFile(paths[i], []byte(f.content), 0o644); err != nil {
			return nil, err
		}
		written[i] = filepath.Join(dir, paths[i])
	}
	return written, nil
}

// unpackPaths are the files' paths under the directory, cleaned: each a
// relative path to a .cedar file inside it, of printable text, and no two
// the same (one object would overwrite another's file).
func unpackPaths(files []unpackedFile) ([]string, error) {
	paths := make([]string, len(files))
	from := map[string]string{}
	for i, f := range files {
		clean := filepath.Clean(filepath.FromSlash(f.rel))
		switch {
		case cedarlex.Visible(f.rel) != f.rel || strings.Contains(f.rel, "\\"):
			return nil, fmt.Errorf("%s: source file %s holds a control character or a backslash", f.from, cedarlex.Shorten(f.rel))
		case filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, ".."+string(filepath.Separator)) || !strings.HasSuffix(clean, ".cedar"):
			return nil, fmt.Errorf("%s: source file %q must be a relative path to a .cedar file inside the directory", f.from, f.rel)
		case from[clean] != "":
			return nil, fmt.Errorf("%s and %s both name the source file %q: unpacking both would keep only one", from[clean], f.from, f.rel)
		}
		paths[i], from[clean] = clean, f.from
	}
	return paths, nil
}

// readPackedObjects reads the objects of a YAML or JSON stream: documents
// and the items of lists.
func readPackedObjects(in io.Reader) ([]packedObject, error) {
	data, err := io.ReadAll(io.LimitReader(in, 256<<20))
	if err != nil {
		return nil, err
	}
	var objs []packedObject
	docs := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := docs.Read()
		if err == io.EOF {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		var list struct {
			Kind  string         `json:"kind"`
			Items []packedObject `json:"items"`
		}
		if err := yaml.Unmarshal(doc, &list); err != nil {
			return nil, err
		}
		if strings.HasSuffix(list.Kind, "List") {
			for _, item := range list.Items {
				if item.Kind == "" { // typed lists may leave it out
					item.Kind = strings.TrimSuffix(list.Kind, "List")
				}
				objs = append(objs, item)
			}
			continue
		}
		var o packedObject
		if err := yaml.Unmarshal(doc, &o); err != nil {
			return nil, err
		}
		objs = append(objs, o)
	}
}

// unpackedFile is one file unpack writes.
type unpackedFile struct {
	rel     string // the path under the directory
	content string
	from    string // the object, or the pack, for errors
	pack    string // a split pack's name: its parts are joined into this file
}

// errNamespacedUnpack is why unpack refuses NamespacedCedarPolicy objects.
var errNamespacedUnpack = errors.New("NamespacedCedarPolicy objects are confined to their namespace when served; unpacking them would drop that. Analyse them with --policy-objects FILE instead (kcedar who-can, can-i, authorize, test, validate)")

// unpackFiles turns objects into files, in the order of the objects: one
// per object, or per pack for the parts of a split pack.
func unpackFiles(objs []packedObject) ([]unpackedFile, error) {
	var files []unpackedFile
	packs := map[string][]packedObject{}
	for _, o := range objs {
		switch o.Kind {
		case policyobjects.KindCluster:
		case policyobjects.KindNamespaced:
			return nil, fmt.Errorf("%s %s/%s: %w", o.Kind, o.Namespace, o.Name, errNamespacedUnpack)
		default:
			return nil, fmt.Errorf("kind %q is not a kcedar policy object", o.Kind)
		}
		pack := o.Labels[PackLabel]
		if pack == "" {
			files = append(files, unpackedFile{rel: sourceFile(o, o.Name), content: o.Spec.Content, from: o.Kind + " " + o.Name})
			continue
		}
		if _, ok := packs[pack]; !ok {
			files = append(files, unpackedFile{pack: pack}) // joined below, when all parts are in
		}
		packs[pack] = append(packs[pack], o)
	}
	for i, f := range files {
		if f.pack == "" {
			continue
		}
		joined, err := joinPack(f.pack, packs[f.pack])
		if err != nil {
			return nil, err
		}
		files[i] = joined
	}
	return files, nil
}

// sourceFile is the file an object came from: its source annotation, else
// name.cedar.
func sourceFile(o packedObject, name string) string {
	if rel := o.Annotations[SourceAnnotation]; rel != "" {
		return rel
	}
	return name + ".cedar"
}

// joinPack joins the parts of the split pack named pack, checking that each
// part 1..n is there once and that they name the same source file.
func joinPack(pack string, parts []packedObject) (unpackedFile, error) {
	f := unpackedFile{from: "pack " + pack, pack: pack}
	byIndex := map[int]packedObject{}
	total := 0
	for _, o := range parts {
		var i, n int
		if _, err := fmt.Sscanf(o.Annotations[PartAnnotation], "%d/%d", &i, &n); err != nil || i < 1 || i > n {
			return f, fmt.Errorf("%s %s: annotation %s is %q, want \"i/n\"", o.Kind, o.Name, PartAnnotation, o.Annotations[PartAnnotation])
		}
		if total != 0 && n != total {
			return f, fmt.Errorf("pack %s: parts say %d and %d parts in all", pack, total, n)
		}
		if _, dup := byIndex[i]; dup {
			return f, fmt.Errorf("pack %s: part %d/%d given twice", pack, i, n)
		}
		total, byIndex[i] = n, o
	}
	var b strings.Builder
	contents := make([]string, total)
	for i := 1; i <= total; i++ {
		o, ok := byIndex[i]
		if !ok {
			return f, fmt.Errorf("pack %s: part %d/%d is missing (%s-%d); unpack needs every part", pack, i, total, pack, i)
		}
		rel := sourceFile(o, pack)
		if f.rel != "" && rel != f.rel {
			return f, fmt.Errorf("pack %s: parts name source files %q and %q", pack, f.rel, rel)
		}
		f.rel = rel
		contents[i-1] = o.Spec.Content
		b.WriteString(o.Spec.Content)
	}
	f.content = b.String()
	return f, checkJoined(pack, contents, f.content)
}

// checkJoined checks that joined, the parts of the split pack pack one
// after the other, holds exactly the policies the parts hold as objects:
// each part parses, every policy has an @id (as pack splits only such
// files; a default id names the object), and the joined file parses to
// the same policies in the same order. A part that ends inside a comment
// or a string would otherwise carry the next part's policies away, or
// bring others in.
func checkJoined(pack string, parts []string, joined string) error {
	var want []*cedarlang.Policy
	for i, part := range parts {
		ps, err := cedarlang.ParsePolicies(fmt.Sprintf("%s-%d", pack, i+1), []byte(part))
		if err != nil {
			return fmt.Errorf("pack %s: part %d/%d does not parse: %w", pack, i+1, len(parts), err)
		}
		for _, p := range ps {
			if p.ID == p.Source {
				return fmt.Errorf("pack %s: %s: a policy without @id in a split pack (its id would change when joined)", pack, p.Source)
			}
		}
		want = append(want, ps...)
	}
	got, err := cedarlang.ParsePolicies(pack+".cedar", []byte(joined))
	if err != nil {
		return fmt.Errorf("pack %s: the parts joined do not parse: %w", pack, err)
	}
	if err := format.SamePolicies(want, got); err != nil {
		return fmt.Errorf("pack %s: the parts joined hold other policies than the parts: %w", pack, err)
	}
	return nil
}
