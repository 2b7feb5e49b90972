package cedar

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	gen "github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/testing/schematest"
	"github.com/kcedar/kcedar/schemagen"
)

// A schema move (FileSource.SetSchema) swaps the set and the schema it was
// validated against together: while requests are decided during the move,
// no engine pairs a set with another schema than its own, and afterwards
// the authorizer decides with the new schema.
func TestEnginesPairASetWithItsSchema(t *testing.T) {
	withCM := schematest.Schema()
	withoutCM := schematest.Schema()
	delete(withoutCM.Resources, gen.ResourceKey{Resource: "configmaps"})
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "p.cedar"), []byte(`@id("untyped") permit(principal, action, resource is k8s::Resource);`), 0o644); err != nil {
		t.Fatal(err)
	}
	public := func(s *gen.Schema) *schemagen.Schema { return gen.ToPublic(s).(*schemagen.Schema) }
	fs, err := NewFileSource(public(withCM), []string{dir}, FileSourceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(fs, public(withCM), Options{})
	if err != nil {
		t.Fatal(err)
	}
	cm := authorizer.AttributesRecord{User: &user.DefaultInfo{Name: "alice"}, Verb: "get", Resource: "configmaps", Namespace: "a", Name: "x", ResourceRequest: true}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if e := a.serving.Engine(); e == nil || e.Schema() != e.Policies().Schema {
					t.Error("an engine paired a set with another schema than its own")
					return
				}
				_, _, _ = a.Authorize(context.Background(), cm)
			}
		}()
	}
	if err := fs.SetSchema(public(withoutCM)); err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()
	if a.serving.Schema() != withoutCM {
		t.Fatal("the authorizer does not decide with the new schema")
	}
	if d, _, _ := a.Authorize(context.Background(), cm); d != authorizer.DecisionAllow {
		t.Fatalf("configmaps not untyped after the schema lost them: %v", d)
	}
}
