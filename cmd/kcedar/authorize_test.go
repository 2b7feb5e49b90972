package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/kcedar/kcedar/internal/cedarlang/lint"
	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/tools/offline"
	"github.com/kcedar/kcedar/internal/wire"
	"github.com/kcedar/kcedar/server"
)

var (
	checkerOnce sync.Once
	checkerVal  *lint.Checker
	checkerErr  error
)

// testChecker is a checker on the embedded schema, built once.
func testChecker(t testing.TB) *lint.Checker {
	t.Helper()
	checkerOnce.Do(func() {
		var s *schemagen.Schema
		if s, checkerErr = loadSchema(context.Background(), schemaSource{}); checkerErr == nil {
			checkerVal, checkerErr = lint.NewChecker(s)
		}
	})
	if checkerErr != nil {
		t.Fatal(checkerErr)
	}
	return checkerVal
}

// The same code path, tested: for every decision test of the example
// policies (policies/library, whose quickstart/ tests policies/quickstart), `kcedar authorize`
// (its runAuthorize, from a SubjectAccessReview file and object files) gives
// the answer the server's /v1/authorize gives: for a caller that takes
// conditions (upstream KEP-5681: the decision type and the condition ids) and
// for one that does not (allowed/denied); and for conditional answers given
// objects, the outcome equals the server's /v1/conditions callback evaluating
// the conditions the server returned.
func TestAuthorizeMatchesServer(t *testing.T) {
	checker := testChecker(t)
	files, err := offline.FindTestFiles([]string{"../../policies/library"})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 4 {
		t.Fatalf("only %d test files under policies/", len(files))
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	cases, callbacks := 0, 0
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		tf, err := offline.ParseTestFile(data)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		paths, err := tf.PolicyPaths(file)
		if err != nil {
			t.Fatal(err)
		}
		srv := servedPolicies(t, checker.Schema, paths, nil, server.Options{Logger: quiet})
		dir := t.TempDir()
		for i, tc := range tf.Tests {
			cases++
			name := filepath.Base(file) + ": " + tc.Name
			sar := sarOf(t, tc)
			sarFile := filepath.Join(dir, "sar.json")
			writeJSONFile(t, sarFile, sar)
			o := &authorizeOptions{pol: policySourceOptions{policies: paths}, output: "json", sarFile: sarFile, operation: tc.Operation}
			srv := srv
			if nsFile, lookup := namespacesOf(t, dir, tf, tc); lookup != nil {
				// The same Namespace objects for both: --namespace-object
				// and the informer's place in the server.
				o.namespaceObjects = []string{nsFile}
				srv = servedPolicies(t, checker.Schema, paths, informerObjects{lookup}, server.Options{Logger: quiet})
			}
			if len(tc.Object) > 0 {
				o.object = filepath.Join(dir, "object.json")
				os.WriteFile(o.object, tc.Object, 0o644)
			}
			if len(tc.OldObject) > 0 {
				o.oldObject = filepath.Join(dir, "old.json")
				os.WriteFile(o.oldObject, tc.OldObject, 0o644)
			}
			var out, errOut bytes.Buffer
			if err := runAuthorize(context.Background(), &out, &errOut, checker, o); err != nil {
				t.Fatalf("%s: authorize: %v\n%s", name, err, errOut.String())
			}
			var got engine.Report
			if err := json.Unmarshal(out.Bytes(), &got); err != nil {
				t.Fatalf("%s: %v: %s", name, err, out.String())
			}

			// A caller that takes conditions.
			cond := sar
			cond.Spec.AuthorizationOptions = &wire.AuthorizationOptions{HandledDecisionTypes: []wire.DecisionType{wire.DecisionTypeAllow, wire.DecisionTypeDeny, wire.DecisionTypeNoOpinion, wire.DecisionTypeConditionsMap, wire.DecisionTypeUnion}}
			st := postSAR(t, srv, cond)
			want := statusDecision(st)
			if got.Decision != want {
				t.Errorf("%s: authorize says %s, the server %s (%+v)", name, got.Decision, want, st)
				continue
			}
			if want == "Conditional" {
				var ids, serverIDs []string
				for _, c := range got.Conditions {
					ids = append(ids, c.Effect+":"+c.ID)
				}
				for _, c := range st.ConditionalDecision.ConditionsMap.DenyConditions {
					serverIDs = append(serverIDs, "Deny:"+c.ID)
				}
				for _, c := range st.ConditionalDecision.ConditionsMap.AllowConditions {
					serverIDs = append(serverIDs, "Allow:"+c.ID)
				}
				slices.Sort(ids)
				slices.Sort(serverIDs)
				if !slices.Equal(ids, serverIDs) {
					t.Errorf("%s: conditions %v, the server's %v", name, ids, serverIDs)
				}
				if got.Outcome != "" {
					callbacks++
					if v := callback(t, srv, st.ConditionalDecision, tc, i); v != got.Outcome {
						t.Errorf("%s: outcome %s, the server's callback %s", name, got.Outcome, v)
					}
				}
			}
			// A caller that does not take conditions.
			plain := statusDecision(postSAR(t, srv, sar))
			if plain != got.WithoutConditions {
				t.Errorf("%s: authorize says %s without conditions, the server %s", name, got.WithoutConditions, plain)
			}
		}
	}
	t.Logf("%d test files, %d requests compared, %d conditional outcomes checked against /v1/conditions", len(files), cases, callbacks)
	if callbacks < 10 {
		t.Errorf("only %d conditional outcomes compared", callbacks)
	}
}

func sarOf(t *testing.T, tc offline.TestCase) wire.SubjectAccessReview {
	if tc.SAR != nil {
		return *tc.SAR
	}
	var sar wire.SubjectAccessReview
	sar.APIVersion, sar.Kind = "authorization.k8s.io/v1", "SubjectAccessReview"
	sar.Spec.SubjectAccessReviewSpec = *tc.Request.SAR()
	return sar
}

func writeJSONFile(t *testing.T, path string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func postSAR(t *testing.T, h http.Handler, sar wire.SubjectAccessReview) wire.SubjectAccessReviewStatus {
	t.Helper()
	body, _ := json.Marshal(sar)
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/v1/authorize", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("/v1/authorize: %d %s", rec.Code, rec.Body)
	}
	var resp struct {
		Status wire.SubjectAccessReviewStatus `json:"status"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
		t.Fatal(err)
	}
	return resp.Status
}

func statusDecision(st wire.SubjectAccessReviewStatus) string {
	switch {
	case st.ConditionalDecision != nil:
		return "Conditional"
	case st.Allowed:
		return "Allow"
	case st.Denied:
		return "Deny"
	}
	return "NoOpinion"
}

// callback asks the server's /v1/conditions to evaluate its decision against
// the test's objects, as kube-apiserver would in admission.
func callback(t *testing.T, h http.Handler, dec *wire.ConditionsAwareDecision, tc offline.TestCase, i int) string {
	t.Helper()
	req, adm, err := tc.Build()
	if err != nil || adm == nil {
		t.Fatalf("test %d: %v", i, err)
	}
	target := entities.ResolveTarget(testChecker(t).Schema, req)
	ar := &admissionv1.AdmissionRequest{
		UID:         k8stypes.UID("uid"),
		Operation:   admissionv1.Operation(adm.Operation),
		Namespace:   req.Namespace,
		Name:        req.Name,
		SubResource: req.Subresource,
		UserInfo:    authenticationv1.UserInfo{Username: req.User.Name, UID: req.User.UID, Groups: req.User.Groups},
		Object:      runtime.RawExtension{Raw: adm.Object},
		OldObject:   runtime.RawExtension{Raw: adm.OldObject},
	}
	if target.Resource != nil {
		ar.Resource = metav1.GroupVersionResource{Group: target.Resource.Key.Group, Resource: target.Resource.Key.Resource}
		ar.SubResource = target.Resource.Key.Subresource
	}
	if len(req.User.Extra) > 0 {
		ar.UserInfo.Extra = map[string]authenticationv1.ExtraValue{}
		for k, v := range req.User.Extra {
			ar.UserInfo.Extra[k] = v
		}
	}
	if ar.Name == "" {
		var meta struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		json.Unmarshal(adm.Object, &meta)
		ar.Name = meta.Metadata.Name
	}
	review := wire.AuthorizationConditionsReview{
		TypeMeta: metav1.TypeMeta{APIVersion: wire.ConditionsReviewVersion, Kind: wire.ConditionsReviewKind},
		Request:  &wire.AuthorizationConditionsRequest{Decision: dec, AdmissionRequest: ar},
	}
	body, _ := json.Marshal(review)
	rec := httptest.NewRecorder()
	hr := httptest.NewRequest(http.MethodPost, "/v1/conditions", bytes.NewReader(body))
	hr.Header.Set("Content-Type", "application/json")
	h.ServeHTTP(rec, hr)
	if rec.Code != http.StatusOK {
		t.Fatalf("/v1/conditions: %d %s", rec.Code, rec.Body)
	}
	var resp wire.AuthorizationConditionsReview
	if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil || resp.Response == nil {
		t.Fatalf("/v1/conditions: %v: %s", err, rec.Body)
	}
	return strings.TrimSpace(string(resp.Response.Decision.Type))
}
