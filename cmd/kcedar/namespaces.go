package main

import (
	"fmt"
	"os"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/kcedar/kcedar/internal/engine/offline"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/server"
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

// namespaceInformer builds the informer that fills namespaceObject for
// kcedar serve (nil, nil when it is off). It uses the schema source's
// cluster (or client-go's default loading rules, in-cluster included).
func namespaceInformer(src schemaSource, on bool, maxStaleness time.Duration) (*server.NamespaceInformer, entities.NamespaceLookup, error) {
	if !on {
		return nil, nil, nil
	}
	cfg, err := src.RESTConfig()
	if err != nil {
		return nil, nil, fmt.Errorf("--namespace-objects: %w", err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("--namespace-objects: %w", err)
	}
	inf := server.NewNamespaceInformer(client)
	inf.MaxStaleness = maxStaleness
	return inf, inf, nil
}
