package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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

// editSettle is the --policy-settle the -edit server runs with: kcedar
// serve's default, so an in-place writer's half-written file is never
// served (a rename and a policy object load at once all the same).
var editSettle = flag.Duration("edit-settle", 300*time.Millisecond, "with -edit: kcedar serve's --policy-settle (0 loads what it reads, half-written files included)")

// editWaysFlag: -edit-ways.
var editWaysFlag = flag.String("edit-ways", "rename,inplace,inplace-pieces,append", "with -edit: the ways of writing a change to measure, in turn: "+editWaysHelp())

// editWay is one way of writing a change to a policy file.
type editWay struct {
	name, about string
	// write replaces the file at path, whose content is old, by data.
	write func(path string, old, data []byte) error
	// appends: it can only extend a file (only the add is written this way).
	appends bool
	// settles: the store waits for the file to settle before it loads it
	// (an in-place writer); a rename is complete when it appears.
	settles bool
}

// editWays are the ways of writing -edit measures, in -edit-ways order.
var editWays = []editWay{
	{name: "rename", about: "written to a temporary file beside it and renamed over it (an atomic writer, kubelet)", write: func(path string, _, data []byte) error {
		return writeAtomically(path, data)
	}},
	{name: "inplace", about: "opened with O_TRUNC and written in one write (cp, kubectl cp, shell redirection)", settles: true, write: func(path string, _, data []byte) error {
		return writeInPlace(path, data, 1, 0)
	}},
	{name: "inplace-pieces", about: "opened with O_TRUNC and written in 8 writes 10 ms apart (an editor flushing its buffer)", settles: true, write: func(path string, _, data []byte) error {
		return writeInPlace(path, data, 8, 10*time.Millisecond)
	}},
	{name: "append", about: "the new policy appended with O_APPEND (only the add)", settles: true, appends: true, write: func(path string, old, data []byte) error {
		if !bytes.HasPrefix(data, old) {
			return fmt.Errorf("append: the change does not extend the file")
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return err
		}
		_, err = f.Write(data[len(old):])
		return errors.Join(err, f.Close())
	}},
}

func editWaysHelp() string {
	var out []string
	for _, w := range editWays {
		out = append(out, w.name+" ("+w.about+")")
	}
	return strings.Join(out, ", ")
}

// chosenEditWays are the ways -edit-ways names, in its order.
func chosenEditWays() ([]editWay, error) {
	var out []editWay
	for _, name := range strings.Split(*editWaysFlag, ",") {
		i := slices.IndexFunc(editWays, func(w editWay) bool { return w.name == strings.TrimSpace(name) })
		if i < 0 {
			return nil, fmt.Errorf("-edit-ways: unknown way %q (%s)", name, editWaysHelp())
		}
		out = append(out, editWays[i])
	}
	return out, nil
}

// measureEdit serves the zoo of n policies in editFiles files (`kcedar
// serve --policy-settle` -edit-settle), then, for each way of writing in
// -edit-ways, makes each of editChanges to one file (an appending writer
// only the add, whose file is then restored by a rename) and reports, per
// change: the time from the end of the write to the first decision that
// reflects it (and that less the settle window, for a writer the store
// waits out), the kcedar CPU it cost (from /proc, up to that decision and
// 2 s later) as a share of the full load's, and the RSS before, at peak
// (the kernel's high-water mark, reset before the change) and after.
func measureEdit(bin string, n int) error {
	ways, err := chosenEditWays()
	if err != nil {
		return err
	}
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
	fmt.Printf("edit: %d zoo policies in %d files, --policy-settle %s, full load CPU %s; idle for 2 s: %s\n", n, editFiles, *editSettle, loadCPU.Round(10*time.Millisecond), (cpuTime(pid) - idle0).Round(10*time.Millisecond))
	target := files[editFiles/2]
	base0, err := os.ReadFile(target)
	if err != nil {
		return err
	}
	m := editMeasure{client: client, base: base, pid: pid, target: target, loadCPU: loadCPU}
	// The client's connection is open before the first change, as an API
	// server's is: a change is timed, not a TLS handshake.
	if _, err := sarAllowed(client, base, []byte(`{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":{"user":"edit-warm-up","resourceAttributes":{"verb":"get","version":"v1","resource":"pods","namespace":"default"}}}`)); err != nil {
		return err
	}
	for _, way := range ways {
		old := base0
		for _, ch := range editChanges {
			data := append(append([]byte(ch.head), base0...), ch.tail...)
			if way.appends && (len(data) <= len(old) || !bytes.HasPrefix(data, old)) {
				continue
			}
			if err := m.change(way, ch, old, data, true); err != nil {
				return err
			}
			old = data
		}
		if !bytes.Equal(old, base0) { // back to base0, unmeasured
			if err := m.change(editWays[0], editChange{name: "restore", user: "edit-marker", verb: "get"}, old, base0, false); err != nil {
				return err
			}
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
	cmd := exec.Command(bin, "serve", "--listen", addr, "--policies", pdir, "--write-ca", caFile, "--log-level", "warn", "--policy-settle", editSettle.String())
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

// editMeasure is what measuring a change needs: the server and the file.
type editMeasure struct {
	client  *http.Client
	base    string // the server's URL
	pid     int
	target  string
	loadCPU time.Duration
}

// change writes data over the target's content old the way way writes,
// waits until a decision reflects it and, if report, prints what it cost.
func (m editMeasure) change(way editWay, ch editChange, old, data []byte, report bool) error {
	body, _ := json.Marshal(map[string]any{"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
		"spec": map[string]any{"user": ch.user, "resourceAttributes": map[string]any{"verb": ch.verb, "version": "v1", "resource": "pods", "namespace": "default"}}})
	steady, _ := rss(m.pid)
	_ = os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", m.pid), []byte("5"), 0) // resets VmHWM
	cpu0 := cpuTime(m.pid)
	start := time.Now()
	if err := way.write(m.target, old, data); err != nil {
		return err
	}
	t0 := time.Now() // the end of the write
	maxRSS := steady
	for {
		allowed, err := sarAllowed(m.client, m.base, body)
		if err != nil {
			return err
		}
		if cur, _ := rss(m.pid); cur > maxRSS {
			maxRSS = cur
		}
		if allowed == ch.allowed {
			break
		}
		if time.Since(t0) > 2*time.Minute {
			return fmt.Errorf("%s %s: no decision reflected the change within 2 minutes", way.name, ch.name)
		}
		time.Sleep(2 * time.Millisecond)
	}
	latency := time.Since(t0)
	cpu := cpuTime(m.pid) - cpu0
	time.Sleep(2 * time.Second)
	if !report {
		return nil
	}
	cpuAfter := cpuTime(m.pid) - cpu0
	after, peak := rss(m.pid)
	peak = max(peak, maxRSS)
	settled := ""
	if way.settles {
		settled = fmt.Sprintf(" (%s after settling; the write took %s)", (latency - *editSettle).Round(time.Millisecond), t0.Sub(start).Round(time.Millisecond))
	}
	fmt.Printf("edit %-14s %-10s served after %s%s; kcedar CPU %s (%.1f%% of the full load), %s with the 2 s after (%.1f%%); RSS steady %d MiB, peak %d MiB (%.2fx), after %d MiB (%.2fx)\n",
		way.name, ch.name, latency.Round(time.Millisecond), settled, cpu.Round(10*time.Millisecond), pct(cpu, m.loadCPU), cpuAfter.Round(10*time.Millisecond), pct(cpuAfter, m.loadCPU),
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
// it, and loads it at once.
func writeAtomically(path string, data []byte) error {
	tmp := filepath.Join(filepath.Dir(path), ".edit.tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// writeInPlace truncates the file at path and writes data in pieces
// writes, pause apart, as an editor or cp does: kcedar may read it empty or
// half written, and waits for it to settle.
func writeInPlace(path string, data []byte, pieces int, pause time.Duration) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	per := (len(data) + pieces - 1) / max(pieces, 1)
	for at := 0; at < len(data) && err == nil; at += per {
		if at > 0 {
			time.Sleep(pause)
		}
		_, err = f.Write(data[at:min(len(data), at+per)])
	}
	return errors.Join(err, f.Close())
}
