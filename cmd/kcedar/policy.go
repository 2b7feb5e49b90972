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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/kcedar/kcedar/internal/cedarlang/lint"
	"github.com/kcedar/kcedar/internal/cluster/policyobjects"
)

func init() { rootCmd.AddCommand(newPolicyCmd()) }

// SourceAnnotation records the file a packed object came from, for unpack.
const SourceAnnotation = "kcedar.dev/source-file"

func newPolicyCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "policy", Short: "Turn policy files into CedarPolicy objects and back (GitOps)"}
	var namespace, out, output string
	pack := &cobra.Command{
		Use:   "pack DIR [--namespace NS] [--file FILE]",
		Short: "Print the *.cedar files under DIR as CedarPolicy objects (YAML), one per file",
		Long: `Print one CedarPolicy per *.cedar file under DIR (NamespacedCedarPolicy in
NS with --namespace), named after the file's path (team/a_b.cedar ->
team-a-b), with the path in the kcedar.dev/source-file annotation so
'kcedar policy unpack' restores the tree. The files stay the source of truth,
testable with 'kcedar validate' and 'kcedar test'; apply the output with
kubectl or a GitOps tool.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := outputFormat(cmd.ErrOrStderr(), output, []string{"yaml"}, &out, "--file"); err != nil {
				return &exitError{2, err}
			}
			w := cmd.OutOrStdout()
			if out != "" {
				f, err := os.Create(out)
				if err != nil {
					return &exitError{2, err}
				}
				defer f.Close()
				w = f
			}
			if err := packDir(w, args[0], namespace); err != nil {
				return &exitError{2, err}
			}
			return nil
		},
	}
	pack.Flags().StringVarP(&namespace, "namespace", "n", "", "make NamespacedCedarPolicy objects in this namespace")
	pack.Flags().StringVarP(&output, "output", "o", "yaml", "output format: yaml")
	pack.Flags().StringVar(&out, "file", "", "write the YAML here instead of stdout")
	unpack := &cobra.Command{
		Use:   "unpack FILE|- DIR",
		Short: "Write the spec.content of CedarPolicy objects (YAML, as pack prints them or kubectl get -o yaml) into DIR as *.cedar files",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var in io.Reader = cmd.InOrStdin()
			if args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					return &exitError{2, err}
				}
				defer f.Close()
				in = f
			}
			files, err := unpackTo(in, args[1])
			if err != nil {
				return &exitError{2, err}
			}
			for _, f := range files {
				fmt.Fprintln(cmd.ErrOrStderr(), "wrote", f)
			}
			return nil
		},
	}
	cmd.AddCommand(pack, unpack)
	return cmd
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

func packDir(w io.Writer, dir, namespace string) error {
	files, err := lint.ReadPaths([]string{dir})
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("no *.cedar files under %s", dir)
	}
	seen := map[string]string{}
	for i, f := range files {
		rel, err := filepath.Rel(dir, f.Name)
		if err != nil {
			return err
		}
		name, err := objectName(rel)
		if err != nil {
			return err
		}
		if prev, ok := seen[name]; ok {
			return fmt.Errorf("%s and %s both become object %q: rename one", prev, rel, name)
		}
		seen[name] = rel
		if len(f.Data) > policyobjects.MaxContentBytes {
			return fmt.Errorf("%s: %d bytes, over an object's limit of %d: split the file", rel, len(f.Data), policyobjects.MaxContentBytes)
		}
		obj := packedObject{TypeMeta: metav1.TypeMeta{APIVersion: policyobjects.GroupVersion.String(), Kind: policyobjects.KindCluster},
			ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{SourceAnnotation: filepath.ToSlash(rel)}},
			Spec:       policyobjects.PolicySpec{Content: string(f.Data)}}
		if namespace != "" {
			obj.Kind, obj.Namespace = policyobjects.KindNamespaced, namespace
		}
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

func unpackTo(in io.Reader, dir string) ([]string, error) {
	data, err := io.ReadAll(io.LimitReader(in, 256<<20))
	if err != nil {
		return nil, err
	}
	var objs []packedObject
	docs := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := docs.Read()
		if err == io.EOF {
			break
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
			objs = append(objs, list.Items...)
			continue
		}
		var o packedObject
		if err := yaml.Unmarshal(doc, &o); err != nil {
			return nil, err
		}
		objs = append(objs, o)
	}
	var written []string
	for _, o := range objs {
		if o.Kind != policyobjects.KindCluster && o.Kind != policyobjects.KindNamespaced {
			return nil, fmt.Errorf("kind %q is not a kcedar policy object", o.Kind)
		}
		rel := o.Annotations[SourceAnnotation]
		if rel == "" {
			rel = o.Name + ".cedar"
		}
		clean := filepath.Clean(filepath.FromSlash(rel))
		if filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, ".."+string(filepath.Separator)) || !strings.HasSuffix(clean, ".cedar") {
			return nil, fmt.Errorf("%s %s: source file %q must be a relative path to a .cedar file inside the directory", o.Kind, o.Name, rel)
		}
		path := filepath.Join(dir, clean)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(path, []byte(o.Spec.Content), 0o644); err != nil {
			return nil, err
		}
		written = append(written, path)
	}
	if len(written) == 0 {
		return nil, errors.New("no policy objects in the input")
	}
	return written, nil
}
