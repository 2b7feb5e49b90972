package main

import (
	"fmt"
	"os"

	"github.com/spf13/pflag"

	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/tools/offline"
)

// namespaceObjects is the --namespace-object flag that authorize, can-i,
// who-can and diff share: files of Namespace objects that fill
// resource.namespaceObject.
type namespaceObjects []string

// AddFlag registers --namespace-object on f.
func (n *namespaceObjects) AddFlag(f *pflag.FlagSet) {
	f.StringArrayVar((*[]string)(n), "namespace-object", nil, "Namespace object(s) (YAML or JSON; several documents or a List) that fill resource.namespaceObject, as kcedar serve's informer does; a namespace not given is unknown (repeatable)")
}

// lookup reads the files (nil without any).
func (n namespaceObjects) lookup() (entities.NamespaceLookup, error) {
	if len(n) == 0 {
		return nil, nil
	}
	return readNamespaceObjects(n)
}

// readNamespaceObjects reads --namespace-object files.
func readNamespaceObjects(files []string) (entities.StaticNamespaces, error) {
	out := entities.StaticNamespaces{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("--namespace-object: %w", err)
		}
		ns, err := offline.ParseNamespaceObjects(data)
		if err != nil {
			return nil, fmt.Errorf("--namespace-object %s: %w", f, err)
		}
		for name, obj := range ns {
			if _, dup := out[name]; dup {
				return nil, fmt.Errorf("--namespace-object %s: namespace %q is given twice", f, name)
			}
			out[name] = obj
		}
	}
	return out, nil
}
