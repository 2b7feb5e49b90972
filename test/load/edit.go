package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/kcedar/kcedar/internal/testing/testgen/zoo"
)

// editFiles is how many files -edit spreads the policies over.
const editFiles = 8

// editChange is one change -edit makes to one policy file: the file's new
// tail (after the generated policies), and a SubjectAccessReview whose
// answer tells that the change serves (allowed: whether it should be).
type editChange struct {
	name    string
	tail    string
	user    string
	verb    string
	allowed bool
	head    string // the file's new head (before the generated policies)
}

// editChanges add a policy to one file, edit it, and remove it; then insert
// one at the top of the file (every later policy of the file moves) and
// remove it.
var editChanges = []editChange{
	{name: "add", tail: "\n@id(\"edit-marker\")\npermit (principal == k8s::User::\"edit-marker\", action == k8s::Action::\"get\", resource is core::pods);\n", user: "edit-marker", verb: "get", allowed: true},
	{name: "edit", tail: "\n@id(\"edit-marker\")\npermit (principal == k8s::User::\"edit-marker\", action == k8s::Action::\"list\", resource is core::pods);\n", user: "edit-marker", verb: "list", allowed: true},
	{name: "remove", user: "edit-marker", verb: "list", allowed: false},
	{name: "insert-top", head: "@id(\"edit-top\")\npermit (principal == k8s::User::\"edit-top\", action == k8s::Action::\"get\", resource is core::pods);\n\n", user: "edit-top", verb: "get", allowed: true},
	{name: "remove-top", user: "edit-top", verb: "get", allowed: false},
}

// measureEdit serves the zoo of n policies in editFiles files (`kcedar serve
// --policy-settle 0`), then makes each of editChanges to one file and
// reports, per change (written to a temporary file renamed into place):
// the time from the write to the first decision that
// reflects it, the kcedar CPU it cost (from /proc, up to that decision and
// 2 s later) as a share of the full load's, and the RSS before, at peak
// (the kernel's high-water mark, reset before the change) and after.
func measureEdit(bin string, n int) error {
	dir, err := os.MkdirTemp("", "kcedar-edit-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	pdir := filepath.Join(dir, "policies")
	files, err := writeEditFiles(pdir, zoo.Policies(n, 1))
	if err != nil {
		return err
	}
	srv, pool, base, err := startEditServer(bin, dir, pdir, n)
	if err != nil {
		return err
	}
	defer stopServer(srv) // SIGTERM: a KCEDAR_CPU_PROFILE is written
	pid := srv.Process.Pid
	loadCPU := cpuTime(pid)
	time.Sleep(3 * time.Second) // the load's garbage collected
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: 10 * time.Second}
	idle0 := cpuTime(pid)
	time.Sleep(2 * time.Second)
	fmt.Printf("edit: %d zoo policies in %d files, full load CPU %s; idle for 2 s: %s\n", n, editFiles, loadCPU.Round(10*time.Millisecond), (cpuTime(pid) - idle0).Round(10*time.Millisecond))
	target := files[editFiles/2]
	base0, err := os.ReadFile(target)
	if err != nil {
		return err
	}
	for _, ch := range editChanges {
		if err := measureChange(client, base, pid, target, base0, ch, loadCPU); err != nil {
			return err
		}
	}
	return nil
}

// writeEditFiles writes text's policies as editFiles files in dir.
func writeEditFiles(dir, text string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	docs := strings.SplitAfter(text, "\n\n")
	per := (len(docs) + editFiles - 1) / editFiles
	var files []string
	for i := 0; i < editFiles; i++ {
		f := filepath.Join(dir, fmt.Sprintf("zoo-%d.cedar", i))
		chunk := strings.Join(docs[min(len(docs), i*per):min(len(docs), (i+1)*per)], "")
		if err := os.WriteFile(f, []byte(chunk), 0o644); err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	return files, nil
}

// startEditServer starts kcedar serve on pdir and waits until it serves n
// policies.
func startEditServer(bin, dir, pdir string, n int) (*exec.Cmd, *x509.CertPool, string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, "", err
	}
	addr := ln.Addr().String()
	ln.Close()
	caFile := filepath.Join(dir, "ca.crt")
	cmd := exec.Command(bin, "serve", "--listen", addr, "--policies", pdir, "--write-ca", caFile, "--log-level", "warn", "--policy-settle", "0")
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, nil, "", err
	}
	want := fmt.Sprintf("serving %d policies", n)
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		if pem, err := os.ReadFile(caFile); err == nil && len(pem) > 0 {
			pool := x509.NewCertPool()
			pool.AppendCertsFromPEM(pem)
			if body, err := get(pool, "https://"+addr+"/readyz"); err == nil && strings.Contains(body, want) {
				return cmd, pool, "https://" + addr, nil
			}
		}
		if time.Since(start) > 5*time.Minute {
			cmd.Process.Kill()
			cmd.Wait()
			return nil, nil, "", fmt.Errorf("kcedar did not serve %d policies within 5 minutes", n)
		}
	}
}

// measureChange writes base0 + ch.tail to target and measures until a
// decision reflects it.
func measureChange(client *http.Client, base string, pid int, target string, base0 []byte, ch editChange, loadCPU time.Duration) error {
	body, _ := json.Marshal(map[string]any{"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
		"spec": map[string]any{"user": ch.user, "resourceAttributes": map[string]any{"verb": ch.verb, "version": "v1", "resource": "pods", "namespace": "default"}}})
	steady, _ := rss(pid)
	_ = os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0) // resets VmHWM
	cpu0 := cpuTime(pid)
	t0 := time.Now()
	if err := writeAtomically(target, append(append([]byte(ch.head), base0...), ch.tail...)); err != nil {
		return err
	}
	maxRSS := steady
	for {
		allowed, err := sarAllowed(client, base, body)
		if err != nil {
			return err
		}
		if cur, _ := rss(pid); cur > maxRSS {
			maxRSS = cur
		}
		if allowed == ch.allowed {
			break
		}
		if time.Since(t0) > 2*time.Minute {
			return fmt.Errorf("%s: no decision reflected the change within 2 minutes", ch.name)
		}
		time.Sleep(2 * time.Millisecond)
	}
	latency := time.Since(t0)
	cpu := cpuTime(pid) - cpu0
	time.Sleep(2 * time.Second)
	cpuAfter := cpuTime(pid) - cpu0
	after, peak := rss(pid)
	peak = max(peak, maxRSS)
	fmt.Printf("edit %-10s served after %s; kcedar CPU %s (%.1f%% of the full load), %s with the 2 s after (%.1f%%); RSS steady %d MiB, peak %d MiB (%.2fx), after %d MiB (%.2fx)\n",
		ch.name, latency.Round(time.Millisecond), cpu.Round(10*time.Millisecond), pct(cpu, loadCPU), cpuAfter.Round(10*time.Millisecond), pct(cpuAfter, loadCPU),
		steady/1024, peak/1024, float64(peak)/float64(steady), after/1024, float64(after)/float64(steady))
	return nil
}

func pct(d, of time.Duration) float64 { return 100 * float64(d) / float64(max(of, 1)) }

// sarAllowed posts one SubjectAccessReview and says whether it was allowed.
func sarAllowed(client *http.Client, base string, body []byte) (bool, error) {
	resp, err := client.Post(base+"/v1/authorize", "application/json", bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	var out struct {
		Status struct {
			Allowed bool `json:"allowed"`
		} `json:"status"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return false, err
	}
	return out.Status.Allowed, nil
}

// writeAtomically writes data to a temporary file beside path and renames
// it into place, as an editor or kubelet does: kcedar never reads half of
// it, and with --policy-settle 0 loads it at once.
func writeAtomically(path string, data []byte) error {
	tmp := filepath.Join(filepath.Dir(path), ".edit.tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
