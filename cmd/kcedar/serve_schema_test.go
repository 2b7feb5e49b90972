package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kcedar/kcedar/internal/cedarlang/lint"
	"github.com/kcedar/kcedar/internal/cluster/policyobjects"
	"github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/testing/schematest"
)

// The glue between schema refresh and serve's parts: the store moves (or
// not), and the policy admission webhook checks writes against the cluster's
// latest schema, back to the serving one when the refused schema is dropped.
func TestSchemaTargetMovesStoreAndAdmission(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	initial := schematest.Schema()
	noCM := schematest.Schema()
	delete(noCM.Resources, schemagen.ResourceKey{Resource: "configmaps"})
	dir := t.TempDir()
	file := filepath.Join(dir, "p.cedar")
	cm := `@id("cm") permit(principal, action, resource is core::configmaps);`
	if err := os.WriteFile(file, []byte(cm), 0o644); err != nil {
		t.Fatal(err)
	}
	checker, err := lint.NewChecker(initial)
	if err != nil {
		t.Fatal(err)
	}
	store := newPolicyStore(checker, []string{dir}, logger)
	if err := store.Load(); err != nil {
		t.Fatal(err)
	}
	po, err := newPolicyObjects(&objectOptions{}, nil, checker, store, logger)
	if err != nil {
		t.Fatal(err)
	}
	target := &schemaTarget{store: store, admission: po.admission, serving: po.admission.Checker}
	admit := func(content string) *admissionv1.AdmissionResponse {
		obj, _ := json.Marshal(map[string]any{"apiVersion": policyobjects.GroupVersion.String(), "kind": policyobjects.KindCluster,
			"metadata": map[string]any{"name": "new"}, "spec": map[string]any{"content": content}})
		return po.admission.Review(context.Background(), &admissionv1.AdmissionRequest{Kind: metav1.GroupVersionKind{Group: policyobjects.Group, Version: policyobjects.Version, Kind: policyobjects.KindCluster},
			Name: "new", Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: obj}})
	}
	other := strings.ReplaceAll(cm, `"cm"`, `"cm2"`)
	if r := admit(other); !r.Allowed {
		t.Fatalf("before the refresh: %+v", r.Result)
	}

	serving := store.Current()
	if err := target.Apply(noCM); err == nil || !strings.Contains(err.Error(), "p.cedar:1:") {
		t.Fatalf("apply a schema without configmaps over a configmaps policy file: %v", err)
	}
	if store.Current() != serving {
		t.Fatal("a refused schema replaced the serving set")
	}
	if r := admit(other); r.Allowed || !strings.Contains(r.Result.Message, "CedarPolicy/new:1:") {
		t.Fatalf("a write against an API the cluster no longer serves was admitted: %+v", r.Result)
	}
	target.DropPending()
	if r := admit(other); !r.Allowed {
		t.Fatalf("after the API came back: %+v", r.Result)
	}

	if err := os.WriteFile(file, []byte(`@id("pods") permit(principal, action, resource is core::pods);`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := store.Load(); err != nil {
		t.Fatal(err)
	}
	if err := target.Apply(noCM); err != nil {
		t.Fatal(err)
	}
	if store.Current().Schema != noCM {
		t.Fatal("the store did not move to the new schema")
	}
	target.DropPending() // nothing pending: keeps the new schema's checker
	if r := admit(other); r.Allowed {
		t.Fatal("the serving schema has no configmaps, yet a configmaps policy was admitted")
	}
}
