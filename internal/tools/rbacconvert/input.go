package rbacconvert

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"
)

// Input is a set of RBAC objects.
type Input struct {
	Roles               []rbacv1.Role
	ClusterRoles        []rbacv1.ClusterRole
	RoleBindings        []rbacv1.RoleBinding
	ClusterRoleBindings []rbacv1.ClusterRoleBinding
	// Warnings about the input: skipped documents and kinds.
	Warnings []string
}

// Len is the number of objects.
func (in *Input) Len() int {
	return len(in.Roles) + len(in.ClusterRoles) + len(in.RoleBindings) + len(in.ClusterRoleBindings)
}

// ReadPaths reads every file named ("-" is stdin), and every .yaml, .yml and
// .json file below each directory named (in lexical order).
func (in *Input) ReadPaths(paths []string) error {
	for _, p := range paths {
		if p == "-" {
			if err := in.readFile(p); err != nil {
				return err
			}
			continue
		}
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		if !st.IsDir() {
			if err := in.readFile(p); err != nil {
				return err
			}
			continue
		}
		var files []string
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			switch strings.ToLower(filepath.Ext(path)) {
			case ".yaml", ".yml", ".json":
				if !d.IsDir() {
					files = append(files, path)
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		sort.Strings(files)
		for _, f := range files {
			if err := in.readFile(f); err != nil {
				return err
			}
		}
	}
	return nil
}

func (in *Input) readFile(path string) error {
	var r io.Reader
	if path == "-" {
		r = os.Stdin
	} else {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		r = f
	}
	return in.Read(path, r)
}

// Read adds the objects of a YAML (possibly multi-document) or JSON stream.
// Lists (kind List or any kind ending in List) are expanded; documents of
// other kinds are skipped with a warning.
func (in *Input) Read(name string, r io.Reader) error {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(r))
	for doc := 1; ; doc++ {
		data, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if len(bytes.TrimSpace(data)) == 0 {
			continue
		}
		js, err := yaml.YAMLToJSON(data)
		if err != nil {
			return fmt.Errorf("%s: document %d: %w", name, doc, err)
		}
		if string(bytes.TrimSpace(js)) == "null" {
			continue
		}
		if err := in.addJSON(fmt.Sprintf("%s: document %d", name, doc), js); err != nil {
			return err
		}
	}
}

func (in *Input) addJSON(where string, js []byte) error {
	var tm metav1.TypeMeta
	if err := json.Unmarshal(js, &tm); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	if tm.Kind == "List" || strings.HasSuffix(tm.Kind, "List") {
		var list struct {
			Items []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(js, &list); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		itemKind := strings.TrimSuffix(tm.Kind, "List")
		for i, item := range list.Items {
			// Typed lists (RoleList) may omit the items' kind and apiVersion.
			if itemKind != "" {
				var itm metav1.TypeMeta
				if err := json.Unmarshal(item, &itm); err == nil && itm.Kind == "" {
					var m map[string]any
					if err := json.Unmarshal(item, &m); err != nil {
						return fmt.Errorf("%s: item %d: %w", where, i, err)
					}
					m["kind"], m["apiVersion"] = itemKind, tm.APIVersion
					item, _ = json.Marshal(m)
				}
			}
			if err := in.addJSON(fmt.Sprintf("%s: item %d", where, i), item); err != nil {
				return err
			}
		}
		return nil
	}
	group, _, _ := strings.Cut(tm.APIVersion, "/")
	if group != rbacv1.GroupName {
		in.Warnings = append(in.Warnings, fmt.Sprintf("%s: skipping %s %s (not RBAC)", where, tm.APIVersion, tm.Kind))
		return nil
	}
	if tm.APIVersion != rbacv1.SchemeGroupVersion.String() {
		in.Warnings = append(in.Warnings, fmt.Sprintf("%s: reading %s %s as %s", where, tm.APIVersion, tm.Kind, rbacv1.SchemeGroupVersion))
	}
	var err error
	switch tm.Kind {
	case "Role":
		var o rbacv1.Role
		if err = json.Unmarshal(js, &o); err == nil {
			in.Roles = append(in.Roles, o)
		}
	case "ClusterRole":
		var o rbacv1.ClusterRole
		if err = json.Unmarshal(js, &o); err == nil {
			in.ClusterRoles = append(in.ClusterRoles, o)
		}
	case "RoleBinding":
		var o rbacv1.RoleBinding
		if err = json.Unmarshal(js, &o); err == nil {
			in.RoleBindings = append(in.RoleBindings, o)
		}
	case "ClusterRoleBinding":
		var o rbacv1.ClusterRoleBinding
		if err = json.Unmarshal(js, &o); err == nil {
			in.ClusterRoleBindings = append(in.ClusterRoleBindings, o)
		}
	default:
		in.Warnings = append(in.Warnings, fmt.Sprintf("%s: skipping unknown kind %s %s", where, tm.APIVersion, tm.Kind))
	}
	if err != nil {
		return fmt.Errorf("%s: %s: %w", where, tm.Kind, err)
	}
	return nil
}

// ReadCluster adds every Role, ClusterRole, RoleBinding and ClusterRoleBinding
// of a live cluster.
func (in *Input) ReadCluster(ctx context.Context, cs kubernetes.Interface) error {
	rbac := cs.RbacV1()
	roles, err := rbac.Roles("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing roles: %w", err)
	}
	in.Roles = append(in.Roles, roles.Items...)
	croles, err := rbac.ClusterRoles().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing clusterroles: %w", err)
	}
	in.ClusterRoles = append(in.ClusterRoles, croles.Items...)
	rbs, err := rbac.RoleBindings("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing rolebindings: %w", err)
	}
	in.RoleBindings = append(in.RoleBindings, rbs.Items...)
	crbs, err := rbac.ClusterRoleBindings().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing clusterrolebindings: %w", err)
	}
	in.ClusterRoleBindings = append(in.ClusterRoleBindings, crbs.Items...)
	return nil
}

// BootstrapLabel marks the roles and bindings kube-apiserver creates and
// reconciles itself (kubernetes.io/bootstrapping=rbac-defaults).
const BootstrapLabel = "kubernetes.io/bootstrapping"

// IsBootstrap reports whether an RBAC object is one kube-apiserver creates
// and reconciles itself (labelled kubernetes.io/bootstrapping=rbac-defaults,
// as in k8s.io/kubernetes' bootstrappolicy).
func IsBootstrap(m metav1.ObjectMeta) bool { return m.Labels[BootstrapLabel] == "rbac-defaults" }

// DropBootstrapBindings removes the bindings kube-apiserver creates itself
// (labelled kubernetes.io/bootstrapping=rbac-defaults). Roles stay, so your
// own bindings to view, edit or admin still convert.
func (in *Input) DropBootstrapBindings() {
	in.ClusterRoleBindings = slices.DeleteFunc(in.ClusterRoleBindings, func(b rbacv1.ClusterRoleBinding) bool {
		return IsBootstrap(b.ObjectMeta)
	})
	in.RoleBindings = slices.DeleteFunc(in.RoleBindings, func(b rbacv1.RoleBinding) bool {
		return IsBootstrap(b.ObjectMeta)
	})
}
