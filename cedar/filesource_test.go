package cedar_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/kcedar/kcedar/cedar"
	"github.com/kcedar/kcedar/schemagen"
)

var janeListsPods = authorizer.AttributesRecord{User: &user.DefaultInfo{Name: "jane", Groups: []string{"dev"}}, Verb: "list",
	Resource: "pods", APIVersion: "v1", Namespace: "dev", ResourceRequest: true}

const janeReads = `@id("jane-reads") permit (principal == k8s::User::"jane", action == k8s::Action::"list", resource is core::pods);`

// A FileSource loads its directory at once, and Run reloads it when a file
// changes: the authorizer decides with the new set, subscribers hear of
// each load in order, and an invalid edit keeps the last good set serving,
// reported in Status.
func TestFileSourceReloads(t *testing.T) {
	schema, err := schemagen.Default()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(text string) { // whole, as a rename: no load sees half a file
		t.Helper()
		tmp := filepath.Join(t.TempDir(), "p.cedar")
		if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "p.cedar")); err != nil {
			t.Fatal(err)
		}
	}
	write(`@id("nobody") forbid (principal, action, resource) when { principal.username == "nobody" };`)
	fs, err := cedar.NewFileSource(schema, []string{dir}, cedar.FileSourceOptions{ReloadInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := fs.Ready(); err != nil {
		t.Fatalf("not ready after the first load: %v", err)
	}
	authz, err := cedar.New(fs, schema, cedar.Options{})
	if err != nil {
		t.Fatal(err)
	}
	events := make(chan cedar.ReloadEvent, 16)
	var order []string
	var mu sync.Mutex
	fs.Subscribe(func(ev cedar.ReloadEvent) { mu.Lock(); order = append(order, "first"); mu.Unlock(); events <- ev })
	fs.Subscribe(func(cedar.ReloadEvent) { mu.Lock(); order = append(order, "second"); mu.Unlock() })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go fs.Run(ctx)

	ctxD := context.Background()
	if d, _, _ := authz.Authorize(ctxD, janeListsPods); d != authorizer.DecisionNoOpinion {
		t.Fatalf("before the edit: %v", d)
	}
	write(janeReads)
	ev := waitChanged(t, events)
	if ev.Err != nil || ev.Policies != 1 || ev.Generation < 2 || ev.Hash == "" {
		t.Fatalf("load event %+v", ev)
	}
	details := new(cedar.Details)
	if d, reason, err := authz.Authorize(cedar.WithDetails(ctxD, details), janeListsPods); d != authorizer.DecisionAllow || err != nil {
		t.Fatalf("after the edit: %v %q %v", d, reason, err)
	}
	if len(details.Policies) != 1 || details.Policies[0] != "jane-reads" || details.Generation != ev.Generation {
		t.Fatalf("details %+v, want jane-reads of generation %d", details, ev.Generation)
	}
	mu.Lock()
	if len(order) < 2 || order[0] != "first" || order[1] != "second" {
		t.Errorf("subscribers called %v, want first then second", order)
	}
	mu.Unlock()

	write(`permit (principal, action, resource) when { nonsense };`)
	if ev := waitChanged(t, events); ev.Err == nil {
		t.Fatalf("an invalid edit loaded: %+v", ev)
	}
	if d, _, _ := authz.Authorize(ctxD, janeListsPods); d != authorizer.DecisionAllow {
		t.Fatalf("the last good set does not serve on: %v", d)
	}
	st := fs.Status()
	if !st.Serving || st.Policies != 1 || st.LastError == nil || !strings.Contains(st.Degraded(), "the latest reload failed") {
		t.Fatalf("status after an invalid edit: %+v (%s)", st, st.Degraded())
	}
	if err := fs.Ready(); err != nil {
		t.Fatalf("an invalid edit made the source not ready: %v", err)
	}
}

// waitChanged waits for the next load that read something new.
func waitChanged(t *testing.T, events <-chan cedar.ReloadEvent) cedar.ReloadEvent {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.Changed {
				return ev
			}
		case <-timeout:
			t.Fatal("no load of the changed files")
		}
	}
}

// A FileSource over files that do not load is not ready, and says why.
func TestFileSourceNotReady(t *testing.T) {
	schema, err := schemagen.Default()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "p.cedar"), []byte(`permit (principal, action, resource) when { nonsense };`), 0o644); err != nil {
		t.Fatal(err)
	}
	fs, err := cedar.NewFileSource(schema, []string{dir}, cedar.FileSourceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := fs.Ready(); err == nil || !strings.Contains(err.Error(), "no valid policy set loaded") {
		t.Fatalf("Ready: %v", err)
	}
	authz, err := cedar.New(fs, schema, cedar.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if d, _, err := authz.Authorize(context.Background(), janeListsPods); d != authorizer.DecisionDeny || err != cedar.ErrNotLoaded {
		t.Fatalf("before a set loads: %v, %v; want Deny, ErrNotLoaded", d, err)
	}
}

// Constructors refuse missing arguments with an error.
func TestConstructorsCheckTheirArguments(t *testing.T) {
	schema, err := schemagen.Default()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cedar.New(nil, schema, cedar.Options{}); err == nil {
		t.Error("New without a source")
	}
	if _, err := cedar.New(cedar.StaticPolicies(), nil, cedar.Options{}); err == nil {
		t.Error("New without a schema")
	}
	if _, err := cedar.New(cedar.StaticPolicies(), &schemagen.Schema{}, cedar.Options{}); err == nil {
		t.Error("New with a Schema no function made")
	}
	if _, err := cedar.NewFileSource(nil, []string{"."}, cedar.FileSourceOptions{}); err == nil {
		t.Error("NewFileSource without a schema")
	}
	if _, err := cedar.NewFileSource(schema, nil, cedar.FileSourceOptions{}); err == nil {
		t.Error("NewFileSource without files or objects")
	}
}
