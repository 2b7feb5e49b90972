package main

import (
	"fmt"
	"os"

	"github.com/kcedar/kcedar/internal/engine/offline"
	"github.com/kcedar/kcedar/internal/entities"
)

// readNamespaceObjects reads --namespace-object files (nil without any).
func readNamespaceObjects(files []string) (entities.NamespaceLookup, error) {
	if len(files) == 0 {
		return nil, nil
	}
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
