package kube138

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"

	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/testing/testgen"
	"github.com/kcedar/kcedar/internal/testing/testgen/zoo"
)

// The generated cases per seed: zoo requests against a zoo of genPolicies
// policies, testgen's reviews, and requests aimed at
// testdata/generated/conditional.cedar, each write with generated objects.
const (
	genPolicies = 300
	genZoo      = 250
	genSARs     = 150
	genTargeted = 600
)

var genSeeds = []uint64{1, 2, 3}

// TestGeneratedCases is the differential test of cedar/differential_test.go
// for 1.38: generated policy sets and requests, and objects for the writes,
// through kube-apiserver 1.38's code against `kcedar serve`, each decided
// as `kcedar authorize` decides it (harness.check).
func TestGeneratedCases(t *testing.T) {
	enableConditionalAuthorization(t)
	conditional, err := os.ReadFile("testdata/generated/conditional.cedar")
	if err != nil {
		t.Fatal(err)
	}
	for _, seed := range genSeeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			dir := t.TempDir()
			for name, text := range map[string][]byte{"zoo.cedar": []byte(zoo.Policies(genPolicies, seed)), "conditional.cedar": conditional} {
				if err := os.WriteFile(filepath.Join(dir, name), text, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			h := newHarness(t, []string{dir}, "--bypass-control-plane=false")
			cases := generatedCases(seed)
			failures := 0
			for _, c := range cases {
				reportProblems(t, &failures, c, h.check(context.Background(), c))
			}
			summarize(t, failures, len(cases), h)
			for _, want := range []string{"decision Allow", "decision Deny", "decision NoOpinion", "decision ConditionsMap",
				"callback Allow", "callback Deny", "callback NoOpinion", "HTTP 200", "HTTP 403",
				"callback on CREATE", "callback on UPDATE", "callback on DELETE", "callback on CONNECT",
				"callback for create", "callback for update", "callback for patch", "callback for delete", "callback for deletecollection",
				"group condition"} {
				if h.stats[want] == 0 {
					t.Errorf("no generated case reached %s: the cases prove too little", want)
				}
			}
		})
	}
}

// generatedCases are the cases of seed.
func generatedCases(seed uint64) []requestCase {
	rng := rand.New(rand.NewPCG(seed, 0x138))
	var out []requestCase
	for i, r := range zoo.Requests(genPolicies, genZoo, seed) {
		out = append(out, withObjects(rng, requestCase{name: fmt.Sprintf("zoo request #%d", i), spec: specOf(r)}))
	}
	for i, spec := range testgen.SubjectAccessReviews(seed, genSARs) {
		out = append(out, withObjects(rng, requestCase{name: fmt.Sprintf("testgen review #%d", i), spec: spec}))
	}
	for i := range genTargeted {
		out = append(out, withObjects(rng, targetedCase(rng, i)))
	}
	return out
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

// targetedCase is a request aimed at conditional.cedar: its groups, verbs
// (connect included) and resources, and the RBAC stand-in's and the freeze
// authorizer's.
func targetedCase(rng *rand.Rand, i int) requestCase {
	var spec authorizationv1.SubjectAccessReviewSpec
	switch k := rng.IntN(20); {
	case k < 12:
		spec.User, spec.Groups = fmt.Sprintf("dev-%d", rng.IntN(20)), []string{fmt.Sprintf("team-%d", rng.IntN(5)), "system:authenticated"}
	case k < 15:
		spec.User, spec.Groups = fmt.Sprintf("editor-%d", rng.IntN(5)), []string{"rbac-editors", fmt.Sprintf("team-%d", rng.IntN(5)), "system:authenticated"}
	case k < 17:
		spec.User, spec.Groups = "system:serviceaccount:ns-1:deployer", []string{"system:serviceaccounts", "system:serviceaccounts:ns-1", "system:authenticated"}
	case k < 18:
		spec.User, spec.Groups = "root", []string{"system:masters", "system:authenticated"}
	default:
		spec.User = fmt.Sprintf("guest-%d", rng.IntN(5))
	}
	ra := &authorizationv1.ResourceAttributes{Namespace: fmt.Sprintf("ns-%d", rng.IntN(4)), Version: "v1",
		Verb:     pick(rng, []string{"create", "create", "update", "patch", "delete", "deletecollection", "get", "list"}),
		Resource: pick(rng, []string{"pods", "configmaps", "configmaps", "services", "secrets"})}
	if ra.Resource == "pods" && rng.IntN(3) == 0 {
		ra.Subresource, ra.Verb = "exec", pick(rng, []string{"create", "get"})
	}
	if ra.Verb != "create" && ra.Verb != "list" && ra.Verb != "deletecollection" || ra.Subresource != "" {
		ra.Name = pick(rng, []string{"web", "api", "team-3-db"})
	}
	spec.ResourceAttributes = ra
	return requestCase{name: fmt.Sprintf("targeted request #%d", i), spec: spec}
}

func pick[T any](rng *rand.Rand, xs []T) T { return xs[rng.IntN(len(xs))] }

// withObjects gives a write, delete or connect the admission data
// kube-apiserver would have for it: the operation its verb arrives as
// (now and then an update or patch that creates), and generated objects of
// the resources the generator knows.
func withObjects(rng *rand.Rand, c requestCase) requestCase {
	ra := c.spec.ResourceAttributes
	if ra == nil {
		return c
	}
	if ra.Subresource == "exec" && ra.Resource == "pods" && (ra.Verb == "create" || ra.Verb == "get") {
		opts := &corev1.PodExecOptions{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodExecOptions"}, Container: "c", Stdout: true,
			Command: pick(rng, [][]string{{"ls"}, {"sh"}, {"/bin/sh", "-c", "id"}, {"cat", "/etc/hosts"}})}
		c.admission = &admissionData{operation: admission.Connect, object: opts}
		return c
	}
	if ra.Subresource != "" {
		return c
	}
	object := func() runtime.Object { return objectOf(rng, ra.Resource, ra.Namespace, ra.Name) }
	switch ra.Verb {
	case "create":
		c.admission = &admissionData{operation: admission.Create, object: object()}
	case "update", "patch":
		if rng.IntN(5) == 0 { // an update or patch that creates
			c.admission = &admissionData{operation: admission.Create, object: object()}
		} else {
			c.admission = &admissionData{operation: admission.Update, object: object(), oldObject: object()}
		}
	case "delete", "deletecollection":
		c.admission = &admissionData{operation: admission.Delete, oldObject: object()}
	}
	return c
}

// objectOf is a generated object of resource (nil for resources the
// generator does not know), named name or, without one, at random.
func objectOf(rng *rand.Rand, resource, namespace, name string) runtime.Object {
	if name == "" {
		name = pick(rng, []string{"web", "team-3-db", "team-3-", "api-0"})
	}
	meta := metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: generatedLabels(rng)}
	switch resource {
	case "pods":
		spec := corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}, HostNetwork: rng.IntN(6) == 0}
		if rng.IntN(4) > 0 {
			spec.NodeName = pick(rng, []string{"node-1", "node-1", "node-2"})
		}
		return &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: meta, Spec: spec}
	case "configmaps":
		return &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: meta, Data: map[string]string{"k": "v"}}
	case "services":
		spec := corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}
		if rng.IntN(3) > 0 {
			spec.Type = pick(rng, []corev1.ServiceType{corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort})
		}
		return &corev1.Service{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"}, ObjectMeta: meta, Spec: spec}
	case "secrets":
		return &corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}, ObjectMeta: meta, Type: corev1.SecretTypeOpaque}
	}
	return nil
}

// generatedLabels draws an object's labels: a team's (most often), protected,
// and now and then the freeze authorizer's.
func generatedLabels(rng *rand.Rand) map[string]string {
	l := map[string]string{"app": pick(rng, []string{"web", "db"})}
	if rng.IntN(5) > 1 {
		l["team"] = fmt.Sprintf("team-%d", rng.IntN(5))
	}
	if rng.IntN(8) == 0 {
		l["protected"] = "true"
	}
	if rng.IntN(14) == 0 {
		l[frozenLabel] = "true"
	}
	if rng.IntN(14) == 0 {
		l[approvedLabel] = "true"
	}
	return l
}
