//go:build soak

// Package soak holds kcedar's soak tests: they run the built binary
// (`kcedar serve` over TLS) for minutes and check what only time shows.
//
//	make soak   (go test -tags soak -v ./test/soak -args -kcedar $PWD/bin/kcedar)
//
// TestReloadSoak: a 1,000-policy set whose file changes 300 times (a comment
// line appended, atomic rename) under light load. What a leak grows, the
// heap the last collection found live (go_gc_heap_live_bytes, the least
// of ten readings), must stay within 1.3x of its size after the first
// reloads; and RSS at the end within 1.3x of RSS after the first tenth of
// the reloads, by which time the heap has grown into the headroom
// --gc-min-headroom gives it between collections.
//
// TestInPlaceWriterSoak: for 10 s a writer rewrites the policy file in place
// (open with O_TRUNC, write the first policy, pause, write the rest) while
// requests flow; every answer must be the old set's or the new set's.
package soak

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kcedar/kcedar/cedar"
	gen "github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/testing/embeddedschema"
	"github.com/kcedar/kcedar/internal/testing/testgen"
	publicschema "github.com/kcedar/kcedar/schemagen"
	"github.com/kcedar/kcedar/server"
)

var (
	kcedarBin = flag.String("kcedar", "", "kcedar binary (default: built from this module into a temp dir)")
	reloads   = flag.Int("reloads", 300, "TestReloadSoak: policy file changes")
	nPolicies = flag.Int("policies", 1000, "TestReloadSoak: policies in the set")
	writerFor = flag.Duration("writer", 10*time.Second, "TestInPlaceWriterSoak: how long the writer runs")
	settle    = flag.String("settle", "", "TestInPlaceWriterSoak: --policy-settle for kcedar serve (default: kcedar's); 0 shows what the test catches")
)

func binary(t *testing.T) string {
	if *kcedarBin != "" {
		return *kcedarBin
	}
	bin := filepath.Join(t.TempDir(), "kcedar")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/kcedar/kcedar/cmd/kcedar")
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("building kcedar: %v", err)
	}
	return bin
}

// kcedar is a running `kcedar serve`.
type kcedar struct {
	cmd    *exec.Cmd
	base   string
	client *http.Client
}

func start(t *testing.T, policyFile string, extra ...string) *kcedar {
	t.Helper()
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	caFile := filepath.Join(dir, "ca.crt")
	args := append([]string{"serve", "--listen", addr, "--policies", policyFile, "--write-ca", caFile, "--log-level", "warn", "--shutdown-delay", "0s"}, extra...)
	cmd := exec.Command(binary(t), args...)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() })
	k := &kcedar{cmd: cmd, base: "https://" + addr}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("kcedar did not become ready")
		}
		pem, err := os.ReadFile(caFile)
		if err != nil || len(pem) == 0 {
			continue
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pem)
		k.client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, MaxIdleConnsPerHost: 8}}
		if body, code := k.get("/readyz"); code == 200 && strings.HasPrefix(body, "ok") {
			return k
		}
	}
}

func (k *kcedar) get(path string) (string, int) {
	resp, err := k.client.Get(k.base + path)
	if err != nil {
		return err.Error(), 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b), resp.StatusCode
}

var generationRE = regexp.MustCompile(`generation (\d+)`)

func (k *kcedar) generation(t *testing.T) int {
	body, _ := k.get("/readyz")
	m := generationRE.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("readyz: %s", body)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

func (k *kcedar) waitGeneration(t *testing.T, gen int) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); k.generation(t) < gen; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			body, _ := k.get("/readyz")
			t.Fatalf("generation %d not reached: %s", gen, body)
		}
	}
}

// answer posts a SubjectAccessReview and returns "allow", "deny" or "noopinion".
func answer(c *http.Client, url string, body []byte) (string, error) {
	resp, err := c.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return "", fmt.Errorf("%d: %s", resp.StatusCode, b)
	}
	return decode(b)
}

func decode(b []byte) (string, error) {
	var r struct {
		Status struct{ Allowed, Denied bool } `json:"status"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return "", err
	}
	switch {
	case r.Status.Allowed:
		return "allow", nil
	case r.Status.Denied:
		return "deny", nil
	}
	return "noopinion", nil
}

func rssKB(t *testing.T, pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		var v int64
		if n, _ := fmt.Sscanf(line, "VmRSS: %d kB", &v); n == 1 {
			return v
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

func sar(user string, groups []string, verb, resource, ns string) []byte {
	b, _ := json.Marshal(map[string]any{
		"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
		"spec": map[string]any{"user": user, "groups": groups,
			"resourceAttributes": map[string]any{"verb": verb, "resource": resource, "namespace": ns}},
	})
	return b
}

// rbacRequests are SubjectAccessReviews over the RBACLike set: hits and misses.
func rbacRequests(n int) [][]byte {
	resources := []string{"pods", "configmaps", "secrets", "serviceaccounts", "nodes"}
	verbs := []string{"get", "list", "watch", "create", "delete"}
	var out [][]byte
	for i := 0; i < n; i++ {
		ns := fmt.Sprintf("ns-%d", i%60)
		if i%7 == 0 {
			ns = "kube-system"
		}
		out = append(out, sar(fmt.Sprintf("user-%d", i*3), []string{fmt.Sprintf("team-%d", i%200), "system:authenticated"}, verbs[i%len(verbs)], resources[i%len(resources)], ns))
	}
	return out
}

// atomicWrite writes content to a temporary file and renames it over path.
func atomicWrite(t *testing.T, path, content string) {
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func TestReloadSoak(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "policies.cedar")
	content := testgen.RBACLike(*nPolicies)
	atomicWrite(t, file, content)
	k := start(t, file)
	pid := k.cmd.Process.Pid
	bodies := rbacRequests(256)

	// Light load throughout: two clients, a request every few milliseconds.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var requests, failures atomic.Int64
	for c := 0; c < 2; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for i := c; ; i++ {
				select {
				case <-stop:
					return
				case <-time.After(2 * time.Millisecond):
				}
				if _, err := answer(k.client, k.base+"/v1/authorize", bodies[i%len(bodies)]); err != nil {
					failures.Add(1)
				}
				requests.Add(1)
			}
		}(c)
	}

	gen := k.generation(t)
	begin := time.Now()
	warm := max(1, *reloads/10)
	var firstRSS int64
	var live []int64 // the live heap after each reload
	for i := 1; i <= *reloads; i++ {
		content += fmt.Sprintf("// reload %d\n", i)
		atomicWrite(t, file, content)
		k.waitGeneration(t, gen+i)
		live = append(live, k.liveHeap(t))
		if i == warm {
			time.Sleep(time.Second) // let the warm-up's garbage be collected
			firstRSS = rssKB(t, pid)
		}
	}
	took := time.Since(begin)
	time.Sleep(time.Second)
	lastRSS := rssKB(t, pid)
	close(stop)
	wg.Wait()
	rssRatio := float64(lastRSS) / float64(firstRSS)
	readings := max(1, min(10, len(live)/2)) // the least of the first and of the last
	early, late := live[:readings], live[len(live)-readings:]
	liveRatio := float64(slices.Min(late)) / float64(slices.Min(early))
	t.Logf("reload soak: %d reloads of %d policies in %s (%.0f ms each), %d requests (%d failed); live heap %d MiB after the first reloads, %d MiB after the last: %.2fx; RSS after %d reloads %d MiB, at the end %d MiB: %.2fx (bars 1.30x)",
		*reloads, *nPolicies, took.Round(time.Second), float64(took.Milliseconds())/float64(*reloads), requests.Load(), failures.Load(),
		slices.Min(early)>>20, slices.Min(late)>>20, liveRatio, warm, firstRSS/1024, lastRSS/1024, rssRatio)
	if failures.Load() > 0 {
		t.Errorf("%d requests failed", failures.Load())
	}
	if liveRatio > 1.3 {
		t.Errorf("the live heap grew %.2fx over %d reloads (bar 1.30x)", liveRatio, *reloads)
	}
	if rssRatio > 1.3 {
		t.Errorf("RSS grew %.2fx from reload %d to the end (bar 1.30x)", rssRatio, warm)
	}
}

// liveHeap is go_gc_heap_live_bytes from kcedar's /metrics: the heap the
// last collection found live.
func (k *kcedar) liveHeap(t *testing.T) int64 {
	t.Helper()
	body, code := k.get("/metrics")
	m := liveHeapRE.FindStringSubmatch(body)
	if code != 200 || m == nil {
		t.Fatalf("/metrics (%d) has no go_gc_heap_live_bytes", code)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil || v <= 0 {
		t.Fatalf("go_gc_heap_live_bytes %q", m[1])
	}
	return int64(v)
}

var liveHeapRE = regexp.MustCompile(`(?m)^go_gc_heap_live_bytes (\S+)$`)

// The in-place writer's two sets. The file starts with a permit; a reader
// that took the file after the first policy would serve the permit without
// the forbid (Allow where both sets deny).
const (
	permitTeam  = "@id(\"team-x-pods\")\npermit(principal in k8s::Group::\"team-x\", action, resource is core::pods);\n"
	forbidProd  = "@id(\"no-delete-in-prod\")\nforbid(principal, action == k8s::Action::\"delete\", resource is core::pods) when { resource has namespace && resource.namespace == \"prod\" };\n"
	permitExtra = "@id(\"u2-configmaps\")\npermit(principal == k8s::User::\"u2\", action == k8s::Action::\"get\", resource is core::configmaps);\n"
)

func inPlaceSets() (oldSet, newSet string) {
	rest := forbidProd + testgen.RBACLike(50)
	return permitTeam + rest, permitTeam + rest + permitExtra
}

func inPlaceRequests() [][]byte {
	out := [][]byte{
		sar("u1", []string{"team-x"}, "delete", "pods", "prod"), // deny in both; Allow from the permit alone
		sar("u1", []string{"team-x"}, "get", "pods", "dev"),     // allow in both
		sar("u2", nil, "get", "configmaps", "dev"),              // noopinion (old), allow (new)
		sar("u3", []string{"team-y"}, "get", "pods", "dev"),     // noopinion in both
	}
	return append(out, rbacRequests(60)...)
}

// expected computes the answers of a policy set in process, with the
// schema `kcedar serve` validates against by default.
func expected(t *testing.T, set string, bodies [][]byte) []string {
	schema := gen.ToPublic(embeddedschema.Schema(t)).(*publicschema.Schema)
	file := filepath.Join(t.TempDir(), "p.cedar")
	if err := os.WriteFile(file, []byte(set), 0o644); err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	source, err := cedar.NewFileSource(schema, []string{file}, cedar.FileSourceOptions{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := source.Ready(); err != nil {
		t.Fatal(err)
	}
	authz, err := cedar.New(source, schema, cedar.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(authz, server.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, b := range bodies {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/v1/authorize", bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		srv.ServeHTTP(rec, req)
		a, err := decode(rec.Body.Bytes())
		if rec.Code != 200 || err != nil {
			t.Fatalf("in-process answer: %d %v", rec.Code, err)
		}
		out = append(out, a)
	}
	return out
}

func TestInPlaceWriterSoak(t *testing.T) {
	oldSet, newSet := inPlaceSets()
	bodies := inPlaceRequests()
	wantOld, wantNew := expected(t, oldSet, bodies), expected(t, newSet, bodies)
	if wantOld[0] != "deny" || wantNew[0] != "deny" || wantOld[2] == wantNew[2] {
		t.Fatalf("the request mix does not tell the sets apart: old %v new %v", wantOld[:4], wantNew[:4])
	}
	if half := expected(t, permitTeam, bodies[:1]); half[0] != "allow" {
		t.Fatalf("the permit alone answers %s, want allow (the test would not see a half read)", half[0])
	}

	dir := t.TempDir()
	file := filepath.Join(dir, "policies.cedar")
	if err := os.WriteFile(file, []byte(oldSet), 0o644); err != nil {
		t.Fatal(err)
	}
	var extra []string
	if *settle != "" {
		extra = append(extra, "--policy-settle", *settle)
	}
	k := start(t, file, extra...)
	gen0 := k.generation(t)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var wrong []string
	var requests atomic.Int64
	for c := 0; c < 4; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for i := c; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				j := i % len(bodies)
				got, err := answer(k.client, k.base+"/v1/authorize", bodies[j])
				requests.Add(1)
				if err != nil || (got != wantOld[j] && got != wantNew[j]) {
					mu.Lock()
					wrong = append(wrong, fmt.Sprintf("request %d: %q (err %v), old set %q, new set %q", j, got, err, wantOld[j], wantNew[j]))
					mu.Unlock()
				}
			}
		}(c)
	}

	// The writer: truncate, first policy, pause, the rest; then a gap
	// longer than the settle window so the complete file loads; alternate.
	writes := 0
	for deadline := time.Now().Add(*writerFor); time.Now().Before(deadline); writes++ {
		content := oldSet
		if writes%2 == 0 {
			content = newSet
		}
		f, err := os.OpenFile(file, os.O_WRONLY|os.O_TRUNC, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(content[:len(permitTeam)])
		time.Sleep(100 * time.Millisecond)
		f.WriteString(content[len(permitTeam):])
		f.Close()
		time.Sleep(time.Duration(800+100*(writes%4)) * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	loads := k.generation(t) - gen0
	t.Logf("in-place writer: %d rewrites, %d loads, %d requests, %d answers outside {old, new}", writes, loads, requests.Load(), len(wrong))
	for i, w := range wrong {
		if i == 10 {
			t.Errorf("... %d more", len(wrong)-10)
			break
		}
		t.Error(w)
	}
	if loads < writes/3 {
		t.Errorf("only %d of %d rewrites loaded: the test did not exercise reloads", loads, writes)
	}
}
