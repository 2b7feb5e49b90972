package cedar_test

// Differential test of the in-process authorizer. The oracle is kcedar's
// webhook as kube-apiserver consults it: server.New's POST /v1/authorize
// answering the generated SubjectAccessReview (plain, and for a caller that
// handles ConditionsMap and Union), and k8s.io/apiserver's own webhook
// authorizer calling that handler over HTTP. cedar.Authorizer, given the
// authorizer.Attributes kube-apiserver would hand it for the same request,
// must give the same decision, reason, evaluation errors and signed
// conditions. The two sides are separate authorizers of the same policy
// files and keys, so neither answers from the other's cache.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/plugin/pkg/authorizer/webhook"
	webhookmetrics "k8s.io/apiserver/plugin/pkg/authorizer/webhook/metrics"
	"k8s.io/client-go/rest"

	"github.com/kcedar/kcedar/cedar"
	"github.com/kcedar/kcedar/internal/entities"
	gen "github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/testing/embeddedschema"
	"github.com/kcedar/kcedar/internal/testing/testgen"
	"github.com/kcedar/kcedar/internal/testing/testgen/zoo"
	"github.com/kcedar/kcedar/internal/tools/offline"
	"github.com/kcedar/kcedar/internal/tools/rbacconvert"
	"github.com/kcedar/kcedar/internal/wire"
	"github.com/kcedar/kcedar/residual"
	"github.com/kcedar/kcedar/schemagen"
	"github.com/kcedar/kcedar/server"
)

// diffSeeds are the seeds of the generated policy sets and reviews.
var diffSeeds = []uint64{1, 2, 3}

const (
	diffZooPolicies = 300 // policies of a zoo set
	diffZooRequests = 250 // zoo requests per seed
	diffSARs        = 250 // testgen reviews per seed (each against zoo and RBAC)
	diffRBACRoles   = 30
	diffRBACBinds   = 60
	diffLibVariants = 2   // decorated variants of each library test's review
	diffTargeted    = 200 // reviews per seed aimed at conditionalPolicies
)

// conditionalPolicies join the zoo: policies whose answer depends on the
// object of a write (allow and deny conditions), on a list's label
// selector, on a named object a field selector may name, on the user's
// extra, on the user's UID, on the request's Namespace object (labels;
// arithmetic on its generation, which overflows: evaluation errors), and on
// bytes that were not UTF-8 (U+FFFD in the webhook's JSON).
const conditionalPolicies = `
@id("hw-pinned-create") @reason("team-1 creates pods on node-1 only")
permit (principal in k8s::Group::"team-1", action in [k8s::Action::"create", k8s::Action::"update"], resource is core::pods)
when { resource has object && resource.object has v1 && resource.object.v1 has spec &&
       resource.object.v1.spec has nodeName && resource.object.v1.spec.nodeName == "node-1" };

@id("hw-no-host-network") @reason("no pod uses the host network")
forbid (principal, action in [k8s::Action::"create", k8s::Action::"update", k8s::Action::"patch"], resource is core::pods)
when { resource has object && resource.object has v1 && resource.object.v1 has spec &&
       resource.object.v1.spec has hostNetwork && resource.object.v1.spec.hostNetwork };

@id("hw-agent-lists") @reason("ServiceAccounts list only the pods labelled app=agent")
permit (principal in k8s::Group::"system:serviceaccounts", action in [k8s::Action::"list", k8s::Action::"watch"], resource is core::pods)
when { resource has object && resource.object.metadata has labels &&
       resource.object.metadata.labels.hasTag("app") && resource.object.metadata.labels.getTag("app") == "agent" };

@id("hw-tiered-lists") @reason("everyone lists the services that carry a tier label")
permit (principal in k8s::Group::"system:authenticated", action in [k8s::Action::"list", k8s::Action::"watch"], resource is core::services)
when { resource has object && resource.object.metadata has labels && resource.object.metadata.labels.hasTag("tier") };

@id("hw-restricted-secrets")
forbid (principal, action in [k8s::Action::"list", k8s::Action::"watch"], resource is core::secrets)
when { resource has object && resource.object.metadata has labels &&
       resource.object.metadata.labels.hasTag("tier") && resource.object.metadata.labels.getTag("tier") == "restricted" };

@id("hw-public-secret") @reason("everyone reads the secret named public")
permit (principal in k8s::Group::"system:authenticated", action in [k8s::Action::"get", k8s::Action::"list", k8s::Action::"watch"], resource is core::secrets)
when { resource.name == "public" };

@id("hw-scoped-config") @reason("tokens scoped read-config read configmaps")
permit (principal, action in [k8s::Action::"get", k8s::Action::"list", k8s::Action::"watch"], resource is core::configmaps)
when { principal.hasTag("scopes") && principal.getTag("scopes").contains("read-config") };

@id("hw-read-only-scope")
forbid (principal, action in [k8s::Action::"create", k8s::Action::"update", k8s::Action::"patch", k8s::Action::"delete"], resource)
when { principal.hasTag("scopes") && principal.getTag("scopes").contains("read-only") };

@id("hw-team-namespaces") @reason("a team reads in the namespaces labelled with its name")
permit (principal, action in [k8s::Action::"get", k8s::Action::"list", k8s::Action::"watch"], resource)
when { resource has namespaceObject && resource.namespaceObject.metadata has labels &&
       resource.namespaceObject.metadata.labels.hasTag("team") &&
       principal.groups.contains(resource.namespaceObject.metadata.labels.getTag("team")) };

@id("hw-restricted-namespaces")
forbid (principal, action, resource is core::secrets)
when { resource has namespaceObject && resource.namespaceObject.metadata has labels &&
       resource.namespaceObject.metadata.labels.hasTag("restricted") }
unless { principal in k8s::Group::"platform" };

@id("hw-generation-permit") @reason("overflows past generation 0: an evaluation error")
permit (principal, action == k8s::Action::"delete", resource is core::configmaps)
when { resource has namespaceObject && resource.namespaceObject.metadata has generation &&
       resource.namespaceObject.metadata.generation + 9223372036854775807 > 0 };

@id("hw-generation-forbid") @reason("overflows past generation 1: an evaluation error")
forbid (principal, action == k8s::Action::"deletecollection", resource)
when { resource has namespaceObject && resource.namespaceObject.metadata has generation &&
       resource.namespaceObject.metadata.generation * 4611686018427387904 > 1 };

@id("hw-mangled-user") @reason("user names that were not UTF-8")
forbid (principal, action, resource) when { principal.username like "*\u{fffd}*" };

@id("hw-mangled-path")
permit (principal, action == k8s::Action::"get", resource is k8s::NonResourceURL) when { resource.path like "*\u{fffd}*" };

@id("hw-mangled-name")
forbid (principal, action, resource is core::secrets) when { resource.name like "*\u{fffd}*" };

@id("hw-banned-uid") @reason("a revoked identity")
forbid (principal, action, resource) when { principal has uid && principal.uid == "uid-13" };
`

func TestInProcessMatchesWebhook(t *testing.T) {
	internalSchema := embeddedschema.Schema(t)
	schema := gen.ToPublic(internalSchema).(*schemagen.Schema)
	keys, err := residual.NewKeyring(residual.Key{ID: "diff", Secret: bytes.Repeat([]byte("k"), 32)})
	if err != nil {
		t.Fatal(err)
	}
	var st diffStats
	for _, seed := range diffSeeds {
		rng := rand.New(rand.NewPCG(seed, 0xd1ff))
		sars := testgen.SubjectAccessReviews(seed, diffSARs)

		var zooSpecs []authorizationv1.SubjectAccessReviewSpec
		for _, r := range zoo.Requests(diffZooPolicies, diffZooRequests, seed) {
			zooSpecs = append(zooSpecs, specOf(r))
		}
		zooSpecs = append(zooSpecs, sars...)
		zooSpecs = append(zooSpecs, targetedSpecs(rng, diffTargeted)...)
		zooFiles := []cedar.PolicyFile{{Name: "zoo.cedar", Text: []byte(zoo.Policies(diffZooPolicies, seed))}, {Name: "conditional.cedar", Text: []byte(conditionalPolicies)}}
		diffCorpus(t, &st, fmt.Sprintf("zoo/seed=%d", seed), schema, keys, diffNamespaceObjects, zooFiles, decorateAll(rng, zooSpecs))

		gen := testgen.RBACConfig(seed, diffRBACRoles, diffRBACBinds)
		conv, err := rbacconvert.Convert(internalSchema, &rbacconvert.Input{Roles: gen.Roles, ClusterRoles: gen.ClusterRoles, RoleBindings: gen.RoleBindings, ClusterRoleBindings: gen.ClusterRoleBindings})
		if err != nil {
			t.Fatalf("seed %d: converting RBAC: %v", seed, err)
		}
		rbacFiles := []cedar.PolicyFile{{Name: "rbac.cedar", Text: conv.Policies}, {Name: "conditional.cedar", Text: []byte(conditionalPolicies)}}
		diffCorpus(t, &st, fmt.Sprintf("rbac/seed=%d", seed), schema, keys, diffNamespaceObjects, rbacFiles, decorateAll(rng, sars))
	}
	diffLibrary(t, &st, schema, keys)
	t.Logf("%d reviews compared: %s", st.reviews, st)
	// The corpus must reach every kind of answer and every part of the
	// attributes, or agreement proves little.
	for what, n := range map[string]int{"Allow": st.decisions["Allow"], "Deny": st.decisions["Deny"], "NoOpinion": st.decisions["NoOpinion"],
		"a ConditionsMap with allow conditions": st.allowConditions, "a ConditionsMap with deny conditions": st.denyConditions,
		"an evaluation error": st.evalErrors, "a field selector": st.fieldSelectors, "a label selector": st.labelSelectors,
		"extra": st.extras, "a UID": st.uids, "a non-resource request": st.nonResource, "bytes that are not UTF-8": st.notUTF8} {
		if n == 0 {
			t.Errorf("no review was answered or carried %s", what)
		}
	}
}

// diffStats counts what the compared reviews carried and were answered.
type diffStats struct {
	reviews, nonResource, fieldSelectors, labelSelectors, extras, uids, notUTF8 int
	decisions                                                                   map[string]int
	allowConditions, denyConditions, evalErrors                                 int
}

func (s diffStats) String() string {
	return fmt.Sprintf("answers %v; conditional with allow conditions %d, with deny conditions %d; evaluation errors %d; "+
		"non-resource %d, field selectors %d, label selectors %d, extra %d, UID %d, not UTF-8 %d",
		s.decisions, s.allowConditions, s.denyConditions, s.evalErrors, s.nonResource, s.fieldSelectors, s.labelSelectors, s.extras, s.uids, s.notUTF8)
}

func (s *diffStats) count(spec *authorizationv1.SubjectAccessReviewSpec, plain, ca wire.SubjectAccessReviewStatus) {
	if s.decisions == nil {
		s.decisions = map[string]int{}
	}
	s.reviews++
	s.decisions[statusDecision(plain)]++
	if plain.EvaluationError != "" || ca.EvaluationError != "" {
		s.evalErrors++
	}
	if d := ca.ConditionalDecision; d != nil && d.ConditionsMap != nil {
		if len(d.ConditionsMap.AllowConditions) > 0 {
			s.allowConditions++
		}
		if len(d.ConditionsMap.DenyConditions) > 0 {
			s.denyConditions++
		}
	}
	if spec.UID != "" {
		s.uids++
	}
	if raw, _ := json.Marshal(spec); bytes.Contains(raw, []byte(`\ufffd`)) {
		s.notUTF8++
	}
	if len(spec.Extra) > 0 {
		s.extras++
	}
	if spec.NonResourceAttributes != nil {
		s.nonResource++
	}
	if ra := spec.ResourceAttributes; ra != nil {
		if ra.FieldSelector != nil {
			s.fieldSelectors++
		}
		if ra.LabelSelector != nil {
			s.labelSelectors++
		}
	}
}

// diffLibrary compares the reviews of the policy library's decision tests
// (policies/library), as written and decorated, against their policies.
func diffLibrary(t *testing.T, st *diffStats, schema *schemagen.Schema, keys *residual.Keyring) {
	internalSchema := embeddedschema.Schema(t)
	testFiles, err := filepath.Glob("../policies/library/*/*_test.yaml")
	if err != nil || len(testFiles) == 0 {
		t.Fatalf("no library tests: %v", err)
	}
	rng := rand.New(rand.NewPCG(7, 0x11b))
	for _, file := range testFiles {
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
		files := policyFiles(t, paths)
		ns := namespaces{}
		for _, raw := range tf.Namespaces {
			var obj corev1.Namespace
			if err := json.Unmarshal(raw, &obj); err != nil {
				t.Fatalf("%s: namespaces: %v", file, err)
			}
			ns[obj.Name] = &obj
		}
		var specs []authorizationv1.SubjectAccessReviewSpec
		for _, tc := range tf.Tests {
			var spec authorizationv1.SubjectAccessReviewSpec
			if tc.SAR != nil {
				spec = tc.SAR.Spec.SubjectAccessReviewSpec
			} else {
				r := *tc.Request
				if _, err := r.Resolve(internalSchema); err != nil {
					t.Fatalf("%s: %s: %v", file, tc.Name, err)
				}
				spec = *r.SAR()
			}
			specs = append(specs, spec)
			for range diffLibVariants {
				specs = append(specs, decorate(rng, spec))
			}
		}
		diffCorpus(t, st, "library/"+filepath.Base(filepath.Dir(file)), schema, keys, ns, files, specs)
	}
}

// namespaces are the Namespace objects both authorizers fill
// resource.namespaceObject from (as kcedar serve's informer knows them); a
// namespace not listed is unknown.
type namespaces map[string]*corev1.Namespace

func (n namespaces) Get(name string) (*corev1.Namespace, error) {
	if ns, ok := n[name]; ok {
		return ns, nil
	}
	return nil, fmt.Errorf("namespace %q not found", name)
}

// diffNamespaceObjects are the Namespaces of the generated clusters: most
// of the zoo's ns-* (labelled with a team, some restricted, generations
// 0-2) and some of the RBAC generator's; the others (ns-3, ns-7, ...,
// team-c, the other shapes' tenant-* and team-*) are unknown.
var diffNamespaceObjects = func() namespaces {
	out := namespaces{}
	add := func(name string, generation int64, lbls map[string]string) {
		out[name] = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls, Generation: generation}}
	}
	for i := range 40 {
		if i%4 == 3 {
			continue
		}
		lbls := map[string]string{"team": fmt.Sprintf("team-%d", i%8)}
		if i%7 == 0 {
			lbls["restricted"] = "true"
		}
		add(fmt.Sprintf("ns-%d", i), int64(i%3), lbls)
	}
	add("team-a", 0, map[string]string{"team": "dev"})
	add("team-b", 1, map[string]string{"team": "ops", "restricted": ""})
	add("kube-system", 2, nil)
	add("default", 1, map[string]string{"kubernetes.io/metadata.name": "default"})
	return out
}()

// policyFiles reads the *.cedar files of paths (files, or directories
// searched recursively).
func policyFiles(t *testing.T, paths []string) []cedar.PolicyFile {
	var out []cedar.PolicyFile
	for _, p := range paths {
		err := filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".cedar") {
				return err
			}
			text, err := os.ReadFile(path)
			out = append(out, cedar.PolicyFile{Name: path, Text: text})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// diffCorpus builds the webhook and the in-process authorizer of files and
// compares their answers to specs, counting them in st.
func diffCorpus(t *testing.T, st *diffStats, name string, schema *schemagen.Schema, keys *residual.Keyring, ns namespaces, files []cedar.PolicyFile, specs []authorizationv1.SubjectAccessReviewSpec) {
	t.Helper()
	inProcess, err := cedar.New(cedar.StaticPolicies(files...), schema, cedar.Options{Keys: keys, Namespaces: ns})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	served, err := cedar.New(cedar.StaticPolicies(files...), schema, cedar.Options{Keys: keys, Namespaces: ns})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	h, err := server.New(served, server.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	defer ts.Close()
	upstreamWebhook, err := webhook.New(&rest.Config{Host: ts.URL + "/v1/authorize", Timeout: 10 * time.Second, QPS: -1}, "v1", 0, 0,
		wait.Backoff{Steps: 1}, authorizer.DecisionDeny, nil, "kcedar", webhookmetrics.NoopAuthorizerMetrics{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(uint64(len(name)), 0xa77))
	failures := 0
	for i, spec := range specs {
		attrs := attributesOf(t, rng, &spec)
		fail := func(format string, args ...any) {
			failures++
			if failures <= 10 {
				sar, _ := json.Marshal(spec)
				t.Errorf("%s, review #%d: %s\n  review: %s\n  attributes: %s", name, i, fmt.Sprintf(format, args...), sar, describeAttributes(attrs))
			}
		}

		// Plain: a caller that takes no conditions.
		want := postReview(t, h, spec, nil)
		if want.Allowed && want.Denied {
			fail("the webhook answered allowed and denied")
		}
		decision, reason, err := inProcess.Authorize(ctx, attrs)
		if got, w := decisionName(decision), statusDecision(want); got != w {
			fail("Authorize: %s, the webhook: %s (%q)", got, w, want.Reason)
		} else if got := apiServerReason(decision, reason); got != want.Reason {
			fail("Authorize's reason %q, the webhook's %q", got, want.Reason)
		}
		if err != nil {
			// As kube-apiserver reads the webhook: its evaluationError is
			// not an authorizer's error (which answers 500).
			fail("Authorize's error %v: a policy's evaluation error is not the authorizer's (the webhook's evaluationError %q)", err, want.EvaluationError)
		}

		// k8s.io/apiserver's webhook authorizer, from the attributes.
		upDecision, upReason, upErr := upstreamWebhook.Authorize(ctx, attrs)
		if upErr != nil {
			fail("k8s.io/apiserver's webhook authorizer: %v", upErr)
		} else if upDecision != decision || upReason != apiServerReason(decision, reason) {
			fail("k8s.io/apiserver's webhook authorizer: %s %q, in process: %s %q", decisionName(upDecision), upReason, decisionName(decision), reason)
		}

		// A caller that handles ConditionsMap and Union.
		wantCA := postReview(t, h, spec, &wire.AuthorizationOptions{HandledDecisionTypes: []wire.DecisionType{
			wire.DecisionTypeAllow, wire.DecisionTypeDeny, wire.DecisionTypeNoOpinion, wire.DecisionTypeConditionsMap, wire.DecisionTypeUnion}})
		got := inProcess.ConditionsAwareAuthorize(ctx, attrs)
		if msg := compareConditionsAware(got, wantCA); msg != "" {
			fail("ConditionsAwareAuthorize: %s", msg)
		}
		st.count(&spec, want, wantCA)
	}
	if failures > 10 {
		t.Errorf("%s: %d disagreements in all (the first 10 shown)", name, failures)
	}
}

// postReview posts spec to the webhook with opts and returns its status.
func postReview(t *testing.T, h http.Handler, spec authorizationv1.SubjectAccessReviewSpec, opts *wire.AuthorizationOptions) wire.SubjectAccessReviewStatus {
	t.Helper()
	review := wire.SubjectAccessReview{TypeMeta: metav1.TypeMeta{APIVersion: "authorization.k8s.io/v1", Kind: "SubjectAccessReview"},
		Spec: wire.SubjectAccessReviewSpec{SubjectAccessReviewSpec: spec, AuthorizationOptions: opts}}
	body, err := json.Marshal(review)
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/v1/authorize", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("POST /v1/authorize: %d %s\n  review: %s", rec.Code, rec.Body, body)
	}
	var resp struct {
		Status wire.SubjectAccessReviewStatus `json:"status"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
		t.Fatalf("POST /v1/authorize: %v: %s", err, rec.Body)
	}
	return resp.Status
}

// compareConditionsAware compares an in-process conditions-aware decision
// with the webhook's answer to a caller handling conditions: the same type,
// the same reason and error for a concrete one, the same conditions (id,
// type, text, description) in the same order under each effect for a
// ConditionsMap. It returns "" when they agree.
func compareConditionsAware(got authorizer.ConditionsAwareDecision, want wire.SubjectAccessReviewStatus) string {
	if want.ConditionalDecision != nil {
		w := want.ConditionalDecision
		if want.Allowed || want.Denied {
			return fmt.Sprintf("the webhook answered allowed=%v denied=%v with conditions", want.Allowed, want.Denied)
		}
		if w.Type != wire.DecisionTypeConditionsMap || w.ConditionsMap == nil {
			return fmt.Sprintf("the webhook's conditionalDecision has type %s", w.Type)
		}
		if !got.IsConditionsMap() {
			return fmt.Sprintf("%s %q, the webhook: a ConditionsMap %s", caName(got), got.Reason(), conditionIDs(w.ConditionsMap))
		}
		m := got.ConditionsMap()
		for _, effect := range []struct {
			name      string
			got, want []wire.Condition
		}{
			{"deny", conditionsOf(m.DenyConditions()), w.ConditionsMap.DenyConditions},
			{"noOpinion", conditionsOf(m.NoOpinionConditions()), w.ConditionsMap.NoOpinionConditions},
			{"allow", conditionsOf(m.AllowConditions()), w.ConditionsMap.AllowConditions},
		} {
			if msg := conditionsDiff(effect.got, effect.want); msg != "" {
				return effect.name + " conditions: " + msg
			}
		}
		return ""
	}
	wantName := statusDecision(want)
	if got.IsConditionsMap() || caName(got) != wantName {
		return fmt.Sprintf("%s %q, the webhook: %s %q", caName(got), got.Reason(), wantName, want.Reason)
	}
	reason := got.Reason()
	if got.IsNoOpinion() {
		reason = strings.TrimPrefix(reason, "kcedar: ")
	}
	if reason != want.Reason {
		return fmt.Sprintf("reason %q, the webhook's %q", reason, want.Reason)
	}
	if err := got.Error(); err != nil {
		return fmt.Sprintf("error %v: a policy's evaluation error is not the authorizer's (the webhook's evaluationError %q)", err, want.EvaluationError)
	}
	return ""
}

func conditionsOf(seq func(func(authorizer.Condition) bool)) []wire.Condition {
	var out []wire.Condition
	for c := range seq {
		out = append(out, wire.Condition{ID: c.GetID(), Type: c.GetType(), Condition: c.GetCondition(), Description: c.GetDescription()})
	}
	return out
}

// conditionsDiff says how the in-process conditions got differ from the
// webhook's want; "" when they are the same.
func conditionsDiff(got, want []wire.Condition) string {
	if !slices.Equal(ids(got), ids(want)) {
		return fmt.Sprintf("%v, the webhook's %v", ids(got), ids(want))
	}
	for i, g := range got {
		w := want[i]
		switch {
		case g.Type != w.Type:
			return fmt.Sprintf("%s has type %q, the webhook's %q", g.ID, g.Type, w.Type)
		case g.Description != w.Description:
			return fmt.Sprintf("%s has description %q, the webhook's %q", g.ID, g.Description, w.Description)
		case g.Condition != w.Condition:
			return fmt.Sprintf("%s reads\n    %s\n  the webhook's\n    %s", g.ID, g.Condition, w.Condition)
		}
	}
	return ""
}

func ids(cs []wire.Condition) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.ID
	}
	return out
}

func conditionIDs(m *wire.ConditionsMap) string {
	return fmt.Sprintf("deny %v noOpinion %v allow %v", ids(m.DenyConditions), ids(m.NoOpinionConditions), ids(m.AllowConditions))
}

func caName(d authorizer.ConditionsAwareDecision) string {
	switch {
	case d.IsAllow():
		return "Allow"
	case d.IsDeny():
		return "Deny"
	case d.IsNoOpinion():
		return "NoOpinion"
	case d.IsConditionsMap():
		return "ConditionsMap"
	case d.IsUnion():
		return "Union"
	}
	return "?"
}

func decisionName(d authorizer.Decision) string {
	switch d {
	case authorizer.DecisionAllow:
		return "Allow"
	case authorizer.DecisionDeny:
		return "Deny"
	}
	return "NoOpinion"
}

func statusDecision(st wire.SubjectAccessReviewStatus) string {
	switch {
	case st.Denied:
		return "Deny"
	case st.Allowed:
		return "Allow"
	}
	return "NoOpinion"
}

// apiServerReason is an in-process reason as the webhook sends it: a
// NoOpinion's without kcedar's prefix, which kube-apiserver's union
// authorizer adds back (server/render.go).
func apiServerReason(d authorizer.Decision, reason string) string {
	if d == authorizer.DecisionNoOpinion {
		return strings.TrimPrefix(reason, "kcedar: ")
	}
	return reason
}

// specOf is a generated request as the review kube-apiserver would send.
func specOf(r *entities.Request) authorizationv1.SubjectAccessReviewSpec {
	spec := authorizationv1.SubjectAccessReviewSpec{User: r.User.Name, UID: r.User.UID, Groups: slices.Clone(r.User.Groups)}
	for k, v := range r.User.Extra {
		if spec.Extra == nil {
			spec.Extra = map[string]authorizationv1.ExtraValue{}
		}
		spec.Extra[k] = slices.Clone(v)
	}
	if !r.ResourceRequest {
		spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: r.Path, Verb: r.Verb}
		return spec
	}
	spec.ResourceAttributes = &authorizationv1.ResourceAttributes{Verb: r.Verb, Group: r.APIGroup, Version: r.APIVersion,
		Resource: r.Resource, Subresource: r.Subresource, Namespace: r.Namespace, Name: r.Name}
	return spec
}

// targetedSpecs are n reviews aimed at conditionalPolicies: their groups,
// verbs and resources, in namespaces known (labelled, restricted, with
// generations) and unknown, named and not.
func targetedSpecs(rng *rand.Rand, n int) []authorizationv1.SubjectAccessReviewSpec {
	out := make([]authorizationv1.SubjectAccessReviewSpec, 0, n)
	for range n {
		var spec authorizationv1.SubjectAccessReviewSpec
		switch k := rng.IntN(8); {
		case k < 3:
			team := rng.IntN(8)
			spec.User, spec.Groups = fmt.Sprintf("dev-%d", rng.IntN(50)), []string{fmt.Sprintf("team-%d", team), "system:authenticated"}
		case k < 6:
			ns := fmt.Sprintf("ns-%d", rng.IntN(40))
			spec.User = "system:serviceaccount:" + ns + ":" + pickOne(rng, []string{"agent", "default", "deployer"})
			spec.Groups = []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}
		case k < 7:
			spec.User, spec.Groups = "root", []string{"platform", "system:authenticated"}
		default:
			spec.User, spec.Groups = fmt.Sprintf("guest-%d", rng.IntN(9)), nil
		}
		ra := &authorizationv1.ResourceAttributes{
			Verb:     pickOne(rng, []string{"list", "list", "watch", "watch", "get", "create", "update", "patch", "delete", "deletecollection"}),
			Resource: pickOne(rng, []string{"pods", "services", "secrets", "configmaps"}),
		}
		switch k := rng.IntN(10); {
		case k < 6:
			ra.Namespace = fmt.Sprintf("ns-%d", rng.IntN(40))
		case k < 8:
			ra.Namespace = pickOne(rng, []string{"team-a", "team-b", "kube-system", "default", "elsewhere"})
		}
		if slices.Contains([]string{"get", "update", "patch", "delete"}, ra.Verb) || rng.IntN(6) == 0 {
			ra.Name = pickOne(rng, diffFieldNames)
		}
		spec.ResourceAttributes = ra
		// Selectors are what these reviews are about: give most of them one.
		for range 2 {
			spec = decorate(rng, spec)
		}
		out = append(out, spec)
	}
	return out
}

func decorateAll(rng *rand.Rand, specs []authorizationv1.SubjectAccessReviewSpec) []authorizationv1.SubjectAccessReviewSpec {
	out := make([]authorizationv1.SubjectAccessReviewSpec, len(specs))
	for i, s := range specs {
		out[i] = decorate(rng, s)
	}
	return out
}

// Decorations: what the generators leave out and kube-apiserver sends.
var (
	diffExtras = []map[string]authorizationv1.ExtraValue{
		{"scopes": {"read-config"}},
		{"scopes": {"read-only", "read-config"}},
		{"scopes": {"read-only"}, "authentication.kubernetes.io/credential-id": {"X509SHA256=ab12"}},
		{"authentication.kubernetes.io/node-name": {"node-1"}, "authentication.kubernetes.io/pod-name": {"web-0"}},
		{"team": {"a", "b"}, "empty": {}},
		{entities.UnconditionalOnlyExtra: {"true"}},
		{entities.UnconditionalOnlyExtra: {"true"}, "scopes": {"read-config"}},
	}
	diffFieldNames = []string{"public", "web", "admin-token", "db", "api-0"}
	diffNamespaces = []string{"ns-1", "ns-2", "team-a", "kube-system", "default"}
	diffLabels     = []metav1.LabelSelectorRequirement{
		{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"agent"}},
		{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"agent", "web"}},
		{Key: "app", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"web"}},
		{Key: "app", Operator: metav1.LabelSelectorOpExists},
		{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"restricted"}},
		{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"frontend"}},
		{Key: "tier", Operator: metav1.LabelSelectorOpExists},
		{Key: "legacy", Operator: metav1.LabelSelectorOpDoesNotExist},
		{Key: "team", Operator: metav1.LabelSelectorOpIn, Values: []string{"team-1", "team-2"}},
		{Key: "team", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"team-3", "team-4"}},
	}
)

// decorate adds to spec, at random, a UID, extra, a version, and for
// collection reads and deletes field selectors (metadata.name and
// metadata.namespace with = and !=, and fields no policy reads) and label
// selectors (=, in, !=, notin, exists, !exists).
func decorate(rng *rand.Rand, spec authorizationv1.SubjectAccessReviewSpec) authorizationv1.SubjectAccessReviewSpec {
	if spec.UID == "" && rng.IntN(3) == 0 {
		spec.UID = fmt.Sprintf("uid-%d", rng.IntN(20))
	}
	if spec.Extra == nil && rng.IntN(3) == 0 {
		spec.Extra = map[string]authorizationv1.ExtraValue{}
		for k, v := range diffExtras[rng.IntN(len(diffExtras))] {
			spec.Extra[k] = slices.Clone(v)
		}
	}
	if rng.IntN(20) == 0 {
		// A byte that is not UTF-8: a name or path percent-decoded from the
		// URL (%FF), a user or group from a front proxy's headers.
		switch rng.IntN(4) {
		case 0:
			spec.User += "\xff"
		case 1:
			spec.Groups = append(slices.Clone(spec.Groups), "team-\xfe1")
		case 2:
			spec.Extra = maps.Clone(spec.Extra)
			if spec.Extra == nil {
				spec.Extra = map[string]authorizationv1.ExtraValue{}
			}
			spec.Extra["scopes\xff"] = authorizationv1.ExtraValue{"read-config", "\xc3("}
		default:
			if na := spec.NonResourceAttributes; na != nil {
				spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Verb: na.Verb, Path: na.Path + "/\xff\xfe"}
			} else if ra := spec.ResourceAttributes; ra != nil {
				c := *ra
				c.Name += "\xed\xa0\x80" // a surrogate half
				spec.ResourceAttributes = &c
			}
		}
	}
	ra := spec.ResourceAttributes
	if ra == nil {
		return spec
	}
	c := *ra
	spec.ResourceAttributes = &c
	if c.Version == "" && rng.IntN(2) == 0 {
		c.Version = pickOne(rng, []string{"v1", "v1", "v1beta1"})
	}
	if c.FieldSelector == nil && rng.IntN(2) == 0 && slices.Contains([]string{"list", "watch", "deletecollection", "get"}, c.Verb) {
		var reqs []metav1.FieldSelectorRequirement
		for range 1 + rng.IntN(2) {
			op := metav1.FieldSelectorOpIn
			if rng.IntN(4) == 0 {
				op = metav1.FieldSelectorOpNotIn
			}
			var r metav1.FieldSelectorRequirement
			switch k := rng.IntN(6); {
			case k < 3:
				name := pickOne(rng, diffFieldNames)
				if c.Name != "" && rng.IntN(2) == 0 {
					name = c.Name
				}
				r = metav1.FieldSelectorRequirement{Key: "metadata.name", Values: []string{name}}
			case k < 5:
				ns := pickOne(rng, diffNamespaces)
				if c.Namespace != "" && rng.IntN(2) == 0 {
					ns = c.Namespace
				}
				r = metav1.FieldSelectorRequirement{Key: "metadata.namespace", Values: []string{ns}}
			default:
				r = metav1.FieldSelectorRequirement{Key: pickOne(rng, []string{"spec.nodeName", "status.phase"}), Values: []string{pickOne(rng, []string{"node-1", "Running"})}}
			}
			r.Operator = op
			reqs = append(reqs, r)
		}
		c.FieldSelector = &authorizationv1.FieldSelectorAttributes{Requirements: reqs}
	}
	if c.LabelSelector == nil && rng.IntN(2) == 0 && slices.Contains([]string{"list", "watch", "deletecollection"}, c.Verb) {
		var reqs []metav1.LabelSelectorRequirement
		for range 1 + rng.IntN(3) {
			r := diffLabels[rng.IntN(len(diffLabels))]
			r.Values = slices.Clone(r.Values)
			reqs = append(reqs, r)
		}
		c.LabelSelector = &authorizationv1.LabelSelectorAttributes{Requirements: reqs}
	}
	return spec
}

func pickOne[T any](rng *rand.Rand, xs []T) T { return xs[rng.IntN(len(xs))] }

// attributesOf is what kube-apiserver hands an authorizer for the request
// spec describes: the user, the request info, and the selectors as its
// request parsing gives them (a field selector's = or == for In, != for
// NotIn; a label selector's =, == or in for In, != or notin for NotIn), and
// now and then a label requirement (> or <) that a review cannot carry.
func attributesOf(t *testing.T, rng *rand.Rand, spec *authorizationv1.SubjectAccessReviewSpec) authorizer.AttributesRecord {
	t.Helper()
	u := &user.DefaultInfo{Name: spec.User, UID: spec.UID, Groups: spec.Groups}
	if spec.Extra != nil {
		u.Extra = map[string][]string{}
		for k, v := range spec.Extra {
			u.Extra[k] = v
		}
	}
	a := authorizer.AttributesRecord{User: u}
	if na := spec.NonResourceAttributes; na != nil {
		a.Verb, a.Path = na.Verb, na.Path
		return a
	}
	ra := spec.ResourceAttributes
	a.ResourceRequest = true
	a.Verb, a.Namespace, a.Name = ra.Verb, ra.Namespace, ra.Name
	a.APIGroup, a.APIVersion, a.Resource, a.Subresource = ra.Group, ra.Version, ra.Resource, ra.Subresource
	if fs := ra.FieldSelector; fs != nil {
		if fs.RawSelector != "" {
			t.Fatalf("field selector %q: kube-apiserver sends the parsed requirements, never rawSelector", fs.RawSelector)
		}
		for _, r := range fs.Requirements {
			if len(r.Values) != 1 {
				t.Fatalf("field selector requirement %v: one value only", r)
			}
			op := selection.NotEquals
			if r.Operator == metav1.FieldSelectorOpIn {
				op = pickOne(rng, []selection.Operator{selection.Equals, selection.DoubleEquals})
			}
			a.FieldSelectorRequirements = append(a.FieldSelectorRequirements, fields.Requirement{Operator: op, Field: r.Key, Value: r.Values[0]})
		}
	}
	if ls := ra.LabelSelector; ls != nil {
		if ls.RawSelector != "" {
			t.Fatalf("label selector %q: kube-apiserver sends the parsed requirements, never rawSelector", ls.RawSelector)
		}
		for _, r := range ls.Requirements {
			var op selection.Operator
			switch r.Operator {
			case metav1.LabelSelectorOpIn:
				op = selection.In
				if len(r.Values) == 1 {
					op = pickOne(rng, []selection.Operator{selection.Equals, selection.DoubleEquals, selection.In})
				}
			case metav1.LabelSelectorOpNotIn:
				op = selection.NotIn
				if len(r.Values) == 1 {
					op = pickOne(rng, []selection.Operator{selection.NotEquals, selection.NotIn})
				}
			case metav1.LabelSelectorOpExists:
				op = selection.Exists
			case metav1.LabelSelectorOpDoesNotExist:
				op = selection.DoesNotExist
			}
			req, err := labels.NewRequirement(r.Key, op, r.Values)
			if err != nil {
				t.Fatalf("label selector requirement %v: %v", r, err)
			}
			a.LabelSelectorRequirements = append(a.LabelSelectorRequirements, *req)
		}
	}
	if (a.Verb == "list" || a.Verb == "watch") && rng.IntN(8) == 0 {
		// `-l 'replicas>2'`: a requirement no review can carry, which
		// k8s.io/apiserver's webhook authorizer drops (so the review above,
		// without it, is what it sends).
		req, err := labels.NewRequirement("replicas", pickOne(rng, []selection.Operator{selection.GreaterThan, selection.LessThan}), []string{"2"})
		if err != nil {
			t.Fatal(err)
		}
		a.LabelSelectorRequirements = append(a.LabelSelectorRequirements, *req)
	}
	return a
}

// describeAttributes prints the attributes an in-process failure was for.
func describeAttributes(a authorizer.AttributesRecord) string {
	var b strings.Builder
	fmt.Fprintf(&b, "user=%q uid=%q groups=%q extra=%v verb=%q", a.User.GetName(), a.User.GetUID(), a.User.GetGroups(), a.User.GetExtra(), a.Verb)
	if !a.ResourceRequest {
		fmt.Fprintf(&b, " path=%q", a.Path)
		return b.String()
	}
	fmt.Fprintf(&b, " group=%q version=%q resource=%q subresource=%q namespace=%q name=%q", a.APIGroup, a.APIVersion, a.Resource, a.Subresource, a.Namespace, a.Name)
	for _, r := range a.FieldSelectorRequirements {
		fmt.Fprintf(&b, " field:%s%s%s", r.Field, r.Operator, r.Value)
	}
	for _, r := range a.LabelSelectorRequirements {
		fmt.Fprintf(&b, " label:%s", r.String())
	}
	return b.String()
}
