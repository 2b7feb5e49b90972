package policyobjects

import (
	"context"
	"slices"
	"strings"
	"testing"
)

// Decode reads objects as kubectl prints them (YAML documents, a JSON List)
// and refuses what the API server could not hold; Compose refuses what a
// Source would, and List reads what the informers see.
func TestDecodeComposeList(t *testing.T) {
	in := `{"apiVersion": "v1", "kind": "List", "items": [
  {"apiVersion": "kcedar.dev/v1alpha1", "kind": "NamespacedCedarPolicy", "metadata": {"name": "ok", "namespace": "a"}, "spec": {"content": "permit(principal, action, resource);"}},
  {"apiVersion": "kcedar.dev/v1alpha1", "kind": "NamespacedCedarPolicy", "metadata": {"name": "no-ns"}, "spec": {"content": "permit(principal, action, resource);"}}
]}
---
apiVersion: kcedar.dev/v1alpha1
kind: CedarPolicy
metadata: {name: ns-on-cluster, namespace: a}
spec: {content: ""}
---
apiVersion: kcedar.dev/v1alpha1
kind: CedarPolicy
metadata: {name: broken}
spec: {content: "permit("}
status:
  conditions:
  - {type: Accepted, status: "False", message: "x\n(the version of generation 1 keeps serving)"}
---
apiVersion: v2
kind: CedarPolicy
metadata: {name: other-version}
`
	objs, refused, err := Decode(strings.NewReader(in), "in.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 2 || len(refused) != 3 {
		t.Fatalf("objects %d, refused %+v", len(objs), refused)
	}
	for i, want := range []string{"needs metadata.namespace", "cluster-scoped", "not a policy object"} {
		if !strings.Contains(refused[i].Reason, want) {
			t.Errorf("refusal %d: %+v, want %q", i, refused[i], want)
		}
	}
	srcs, invalid := Compose(testChecker(t), objs)
	if len(srcs) != 1 || srcs[0].Name != "NamespacedCedarPolicy/a/ok" || srcs[0].Namespace != "a" {
		t.Errorf("sources: %+v", srcs)
	}
	if len(invalid) != 1 || invalid[0].Object != "CedarPolicy/broken" || !strings.Contains(invalid[0].Reason, "keeps serving an earlier valid version") {
		t.Errorf("refused: %+v", invalid)
	}
	listed, err := List(context.Background(), fakeClient(object(KindCluster, "", "c", "", 1), object(KindNamespaced, "b", "n", "", 1)))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, u := range listed {
		names = append(names, u.GetNamespace()+"/"+u.GetName())
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"/c", "b/n"}) {
		t.Errorf("listed %v", names)
	}
	if _, _, err := Decode(strings.NewReader("{"), "bad"); err == nil {
		t.Error("unreadable input: no error")
	}
}
