package main

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kcedar/kcedar/cedar"
	"github.com/kcedar/kcedar/internal/cluster/policyobjects"
	"github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/testing/schematest"
	publicschema "github.com/kcedar/kcedar/schemagen"
)

// The glue between schema refresh and serve's policy source: the set moves
// (or not), and the policy admission webhook checks writes against the
// cluster's latest schema, back to the serving one when the refused schema
// is dropped.
func TestSchemaTargetMovesSourceAndAdmission(t *testing.T) {
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
	source, err := cedar.NewFileSource(schemagen.ToPublic(initial).(*publicschema.Schema), []string{dir}, cedar.FileSourceOptions{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	target := schemaTarget{source: source}
	admit := func(content string) *admissionv1.AdmissionResponse {
		obj, _ := json.Marshal(map[string]any{"apiVersion": policyobjects.GroupVersion.String(), "kind": policyobjects.KindCluster,
			"metadata": map[string]any{"name": "new"}, "spec": map[string]any{"content": content}})
		review, _ := json.Marshal(admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
			Request: &admissionv1.AdmissionRequest{UID: "u", Kind: metav1.GroupVersionKind{Group: policyobjects.Group, Version: policyobjects.Version, Kind: policyobjects.KindCluster},
				Name: "new", Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: obj}}})
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/v1/validate-policy", bytes.NewReader(review))
		req.Header.Set("Content-Type", "application/json")
		source.PolicyWebhook().ServeHTTP(rec, req)
		var out admissionv1.AdmissionReview
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
			t.Fatalf("policy webhook: %d %s", rec.Code, rec.Body)
		}
		return out.Response
	}
	other := strings.ReplaceAll(cm, `"cm"`, `"cm2"`)
	if r := admit(other); !r.Allowed {
		t.Fatalf("before the refresh: %+v", r.Result)
	}

	serving := source.Status()
	if err := target.Apply(noCM); err == nil || !strings.Contains(err.Error(), "p.cedar:1:") {
		t.Fatalf("apply a schema without configmaps over a configmaps policy file: %v", err)
	}
	if st := source.Status(); st.Generation != serving.Generation {
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
	if err := source.Load(); err != nil {
		t.Fatal(err)
	}
	loaded := source.Status()
	if err := target.Apply(noCM); err != nil {
		t.Fatal(err)
	}
	if st := source.Status(); st.Generation == loaded.Generation {
		t.Fatal("the source did not move to the new schema")
	}
	target.DropPending() // nothing pending: keeps the new schema's checker
	if r := admit(other); r.Allowed {
		t.Fatal("the serving schema has no configmaps, yet a configmaps policy was admitted")
	}
}
