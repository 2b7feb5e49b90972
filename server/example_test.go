package server_test

import (
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"strings"

	"github.com/kcedar/kcedar/cedar"
	"github.com/kcedar/kcedar/schemagen"
	"github.com/kcedar/kcedar/server"
)

// Serve an authorizer as kube-apiserver's authorization webhook: POST a
// SubjectAccessReview to /v1/authorize.
func Example() {
	s, err := schemagen.Default()
	if err != nil {
		log.Fatal(err)
	}
	policy := `@id("dev-reads") permit (principal in k8s::Group::"dev", action == k8s::Action::"list", resource is core::pods)
when { resource.namespace == "dev" };`
	authz, err := cedar.New(cedar.StaticPolicies(cedar.PolicyFile{Name: "dev.cedar", Text: []byte(policy)}), s, cedar.Options{})
	if err != nil {
		log.Fatal(err)
	}
	srv, err := server.New(authz, server.Options{})
	if err != nil {
		log.Fatal(err)
	}
	ts := httptest.NewTLSServer(srv)
	defer ts.Close()

	review := `{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview",
  "spec":{"user":"jane","groups":["dev"],"resourceAttributes":{"verb":"list","resource":"pods","namespace":"dev"}}}`
	resp, err := ts.Client().Post(ts.URL+"/v1/authorize", "application/json", strings.NewReader(review))
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Print(string(body))
	// Output:
	// {"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","status":{"allowed":true,"reason":"kcedar: allowed by policy dev-reads"}}
}
