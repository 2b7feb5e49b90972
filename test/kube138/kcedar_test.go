package kube138

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// kcedarServer is a running `kcedar serve`.
type kcedarServer struct {
	base   string // https://127.0.0.1:PORT
	caFile string // its serving CA (--write-ca)
	client *http.Client
	stderr *lockedBuffer
	stop   func() // stops it (SIGTERM) and waits for it to exit
}

// lockedBuffer collects a process's stderr while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startKcedar runs `kcedar serve` on the policy files or directories paths,
// with a self-signed certificate whose CA it writes, and waits until it is
// ready. It stops it (SIGTERM) when the test ends.
func startKcedar(t *testing.T, paths []string, extra ...string) *kcedarServer {
	t.Helper()
	var lastErr error
	for range 3 { // a port picked free can be taken before kcedar binds it
		k, err := tryStartKcedar(t, paths, extra)
		if err == nil {
			return k
		}
		lastErr = err
	}
	t.Fatalf("kcedar serve %v: %v", paths, lastErr)
	return nil
}

func tryStartKcedar(t *testing.T, paths, extra []string) (*kcedarServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	k := &kcedarServer{base: "https://" + addr, caFile: filepath.Join(t.TempDir(), "ca.crt"), stderr: &lockedBuffer{}}
	args := []string{"serve", "--listen", addr, "--write-ca", k.caFile, "--log-level", "warn", "--shutdown-delay", "0s"}
	for _, p := range paths {
		args = append(args, "--policies", p)
	}
	cmd := exec.Command(kcedarBinary(t), append(args, extra...)...)
	cmd.Stderr = k.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	k.stop = func() { cmd.Process.Signal(syscall.SIGTERM); <-exited }
	t.Cleanup(k.stop)
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); {
		select {
		case <-exited:
			return nil, fmt.Errorf("exited before it was ready: %s", k.stderr)
		case <-time.After(50 * time.Millisecond):
		}
		if k.ready() {
			return k, nil
		}
	}
	return nil, fmt.Errorf("not ready after 60 s: %s", k.stderr)
}

// ready reports whether the CA is written and /readyz answers ok; it sets
// k.client once the CA is there.
func (k *kcedarServer) ready() bool {
	pem, err := os.ReadFile(k.caFile)
	if err != nil || len(pem) == 0 {
		return false
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return false
	}
	k.client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := k.client.Get(k.base + "/readyz")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode == http.StatusOK && strings.HasPrefix(string(body), "ok")
}

// post sends in as JSON to path and decodes the 200 answer into out.
func (k *kcedarServer) post(t *testing.T, path string, in, out any) {
	t.Helper()
	body, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := k.client.Post(k.base+path, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %s: %s\n  sent: %s", path, resp.Status, data, body)
	}
	if err := json.Unmarshal(data, out); err != nil {
		t.Fatalf("POST %s: %v: %s", path, err, data)
	}
}

// manifests runs `kcedar manifests --conditions-review` for k (and extra
// flags) into a temporary directory and returns the paths of the
// AuthorizationConfiguration and of the webhook kubeconfig it names.
func (k *kcedarServer) manifests(t *testing.T, extra ...string) (authorizationConfig, kubeconfig string) {
	t.Helper()
	dir := t.TempDir()
	kubeconfig = filepath.Join(dir, "kcedar-webhook.kubeconfig")
	args := append([]string{"manifests", "--url", k.base, "--ca-file", k.caFile, "--conditions-review",
		"--output-dir", dir, "--webhook-kubeconfig-path", kubeconfig}, extra...)
	out, err := exec.Command(kcedarBinary(t), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("kcedar %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return filepath.Join(dir, "authorization-config.yaml"), kubeconfig
}
