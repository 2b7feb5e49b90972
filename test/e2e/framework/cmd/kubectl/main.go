// Command kubectl is the part of kubectl that docs/deploy.md's runnable
// blocks use, for the e2e test TestDeploy (the e2e machines have no kubectl
// binary). It does only server-side apply, the way kubectl does it:
//
//	kubectl apply --server-side [-n NS] [--field-manager NAME] [--force-conflicts] -k DIR
//	kubectl apply --server-side [-n NS] [--field-manager NAME] [--force-conflicts] -f FILE|-
//
// -k renders DIR with kustomize (sigs.k8s.io/kustomize/api/krusty, the
// library in kubectl's apply -k); -f reads a YAML or JSON stream (- for
// stdin). Objects are applied in order, each with an apply patch through the
// dynamic client, and printed as "kind.group/name serverside-applied". It
// reads $KUBECONFIG. Anything else is refused with exit status 2, so a doc
// that starts using another kubectl command fails the test instead of
// silently not running it.
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

func main() {
	err := run(os.Args[1:], os.Stdin, os.Stdout)
	var usage usageError
	switch {
	case errors.As(err, &usage):
		fmt.Fprintln(os.Stderr, "kubectl (e2e subset):", err)
		os.Exit(2)
	case err != nil:
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

type usageError struct{ msg string }

func (e usageError) Error() string {
	return e.msg + " (this e2e kubectl only does `apply --server-side -k DIR | -f FILE|-`; see test/e2e/framework/cmd/kubectl)"
}

func run(args []string, stdin io.Reader, stdout io.Writer) error {
	if len(args) == 0 || args[0] != "apply" {
		return usageError{fmt.Sprintf("unsupported command %q", strings.Join(args, " "))}
	}
	fs := pflag.NewFlagSet("apply", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var (
		kustomizeDir, file, namespace, manager string
		serverSide, force                      bool
	)
	fs.StringVarP(&kustomizeDir, "kustomize", "k", "", "")
	fs.StringVarP(&file, "filename", "f", "", "")
	fs.StringVarP(&namespace, "namespace", "n", "", "")
	fs.StringVar(&manager, "field-manager", "kubectl", "")
	fs.BoolVar(&serverSide, "server-side", false, "")
	fs.BoolVar(&force, "force-conflicts", false, "")
	if err := fs.Parse(args[1:]); err != nil {
		return usageError{err.Error()}
	}
	switch {
	case !serverSide:
		return usageError{"apply without --server-side"}
	case fs.NArg() != 0:
		return usageError{fmt.Sprintf("unexpected arguments %q", fs.Args())}
	case (kustomizeDir == "") == (file == ""):
		return usageError{"give exactly one of -k and -f"}
	}

	var data []byte
	var err error
	switch {
	case kustomizeDir != "":
		m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), kustomizeDir)
		if err != nil {
			return err
		}
		if data, err = m.AsYaml(); err != nil {
			return err
		}
	case file == "-":
		data, err = io.ReadAll(stdin)
	default:
		data, err = os.ReadFile(file)
	}
	if err != nil {
		return err
	}
	objs, err := decode(data)
	if err != nil {
		return err
	}
	if len(objs) == 0 {
		return errors.New("no objects passed to apply")
	}

	loading := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(clientcmd.NewDefaultClientConfigLoadingRules(), &clientcmd.ConfigOverrides{})
	cfg, err := loading.ClientConfig()
	if err != nil {
		return err
	}
	if namespace == "" {
		if namespace, _, err = loading.Namespace(); err != nil {
			return err
		}
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, u := range objs {
		gvk := u.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("%s %s: %w", gvk.Kind, u.GetName(), err)
		}
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			if u.GetNamespace() == "" {
				u.SetNamespace(namespace)
			}
			ri = dyn.Resource(m.Resource).Namespace(u.GetNamespace())
		}
		body, err := u.MarshalJSON()
		if err != nil {
			return err
		}
		if _, err := ri.Patch(ctx, u.GetName(), types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: manager, Force: &force}); err != nil {
			return fmt.Errorf("applying %s %s: %w", gvk.Kind, u.GetName(), err)
		}
		name := strings.ToLower(gvk.Kind)
		if gvk.Group != "" {
			name += "." + gvk.Group
		}
		fmt.Fprintf(stdout, "%s/%s serverside-applied\n", name, u.GetName())
	}
	return nil
}

// decode splits a YAML or JSON stream into objects, skipping empty
// documents; a List is applied item by item.
func decode(data []byte) ([]*unstructured.Unstructured, error) {
	d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		var obj map[string]any
		if err := d.Decode(&obj); err == io.EOF {
			return out, nil
		} else if err != nil {
			return nil, err
		}
		if len(obj) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: obj}
		if u.IsList() {
			err := u.EachListItem(func(o runtime.Object) error {
				out = append(out, o.(*unstructured.Unstructured))
				return nil
			})
			if err != nil {
				return nil, err
			}
			continue
		}
		if u.GetKind() == "" || u.GetAPIVersion() == "" || u.GetName() == "" {
			return nil, fmt.Errorf("object without apiVersion, kind or name: %v", obj)
		}
		out = append(out, u)
	}
}
