package offline

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"

	"sigs.k8s.io/yaml"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/conditions"
	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/schemagen"
)

// MaxNamespaceObjectsBytes bounds a --namespace-object file.
const MaxNamespaceObjectsBytes = 8 << 20

// NewDeciderWithNamespaces is NewDecider with the Namespace objects that
// fill namespaceObject, as kcedar serve's informer does (nil: unknown, as
// for a namespace the informer has not seen).
func NewDeciderWithNamespaces(s *schemagen.Schema, ps *cedarlang.PolicySet, ns entities.NamespaceLookup) *Decider {
	e := conditions.New(engine.NewEngine(s, ps, engine.EngineOptions{Namespaces: ns}), conditions.NewCodec(conditions.RandomKeyring()))
	return &Decider{engine: e, schema: s, policies: ps}
}

// WithNamespaces is d deciding with the Namespace objects ns.
func (d *Decider) WithNamespaces(ns entities.NamespaceLookup) *Decider {
	return NewDeciderWithNamespaces(d.schema, d.policies, ns)
}

var yamlDocSep = regexp.MustCompile(`(?m)^---[ \t]*$`)

// ParseNamespaceObjects reads Namespace objects (YAML or JSON): one object,
// several YAML documents, or a List/NamespaceList. Every item must be a
// Namespace with a name.
func ParseNamespaceObjects(data []byte) (entities.StaticNamespaces, error) {
	if len(data) > MaxNamespaceObjectsBytes {
		return nil, fmt.Errorf("%d bytes is over the limit of %d", len(data), MaxNamespaceObjectsBytes)
	}
	out := entities.StaticNamespaces{}
	for _, doc := range yamlDocSep.Split(string(data), -1) {
		if len(bytes.TrimSpace([]byte(doc))) == 0 {
			continue
		}
		raw, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			return nil, err
		}
		if err := addNamespaceObjects(out, raw); err != nil {
			return nil, err
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no Namespace objects")
	}
	return out, nil
}

// AddNamespaceObject adds one Namespace object (JSON) to ns.
func AddNamespaceObject(ns entities.StaticNamespaces, raw []byte) error {
	return addNamespaceObjects(ns, raw)
}

func addNamespaceObjects(out entities.StaticNamespaces, raw []byte) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil {
		return err
	}
	if obj == nil {
		return nil
	}
	kind, _ := obj["kind"].(string)
	switch kind {
	case "List", "NamespaceList":
		items, _ := obj["items"].([]any)
		for _, it := range items {
			b, err := json.Marshal(it)
			if err != nil {
				return err
			}
			if err := addNamespaceObjects(out, b); err != nil {
				return err
			}
		}
		return nil
	case "Namespace":
	default:
		return fmt.Errorf("kind %q: want Namespace (or a List of them)", kind)
	}
	md, _ := obj["metadata"].(map[string]any)
	name, _ := md["name"].(string)
	if name == "" {
		return fmt.Errorf("a Namespace without metadata.name")
	}
	if _, dup := out[name]; dup {
		return fmt.Errorf("namespace %q is given twice", name)
	}
	out[name] = obj
	return nil
}

// namespaces are the file's Namespace objects (nil when it has none).
func (tf *TestFile) namespaces() (entities.StaticNamespaces, error) {
	if len(tf.Namespaces) == 0 {
		return nil, nil
	}
	out := entities.StaticNamespaces{}
	for _, raw := range tf.Namespaces {
		if err := addNamespaceObjects(out, raw); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// deciderFor is d, or for a test with its own namespaceObject a decider
// that knows it (with the file's other namespaces).
func (tf *TestFile) deciderFor(d *Decider, tc *TestCase) (*Decider, error) {
	if len(nullIsAbsent(tc.NamespaceObject)) == 0 {
		return d, nil
	}
	ns, err := tf.namespaces()
	if err != nil {
		return nil, err
	}
	one := entities.StaticNamespaces{}
	if err := addNamespaceObjects(one, tc.NamespaceObject); err != nil {
		return nil, err
	}
	if ns == nil {
		ns = entities.StaticNamespaces{}
	}
	for name, obj := range one {
		ns[name] = obj
	}
	return d.WithNamespaces(ns), nil
}
