package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	kcedarserver "github.com/kcedar/kcedar/server"
)

// The bare transport server (-bare): the least any webhook authorizer in
// Go costs. A stdlib HTTPS server with kcedar's TLS configuration and
// certificate (kcedarserver.TLSOptions, self-signed as kcedar serve makes it)
// and kcedar serve's http.Server settings, that reads the body under the
// same bound, decodes with encoding/json only the fields a webhook
// authorizer reads (bareReview: the user, the groups, the uid, the extra,
// the resource or non-resource attributes) into a small struct, and answers
// a constant Allow. It runs as a process of its own (this binary,
// -serve-bare), so that its CPU is measured from /proc as kcedar's is.

// bareAllowed is the bare server's one answer.
var bareAllowed = []byte(`{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","status":{"allowed":true}}` + "\n")

// serveBare serves the bare transport server on addr, writing its CA to
// caFile once it listens; it returns only on error.
func serveBare(addr, caFile string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	cfg, writeCA, err := kcedarserver.TLSOptions{WriteCA: caFile, Hosts: []string{host}}.ConfigWriteCALater(context.Background(), slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	if err := writeCA(); err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/authorize", bareAuthorize)
	ok := func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") }
	mux.HandleFunc("GET /healthz", ok)
	mux.HandleFunc("GET /readyz", ok)
	// kcedar serve's settings (cmd/kcedar/serve.go: serveTLS).
	hs := &http.Server{
		Handler:           mux,
		TLSConfig:         cfg,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	return hs.ServeTLS(ln, "", "")
}

// bareReview is what a webhook authorizer reads of a SubjectAccessReview,
// and all the bare server decodes of one.
type bareReview struct {
	Spec struct {
		User               string              `json:"user"`
		Groups             []string            `json:"groups"`
		UID                string              `json:"uid"`
		Extra              map[string][]string `json:"extra"`
		ResourceAttributes *struct {
			Namespace   string `json:"namespace"`
			Verb        string `json:"verb"`
			Group       string `json:"group"`
			Version     string `json:"version"`
			Resource    string `json:"resource"`
			Subresource string `json:"subresource"`
			Name        string `json:"name"`
		} `json:"resourceAttributes"`
		NonResourceAttributes *struct {
			Path string `json:"path"`
			Verb string `json:"verb"`
		} `json:"nonResourceAttributes"`
	} `json:"spec"`
}

// bareAuthorize decodes the fields of the SubjectAccessReview a webhook
// reads and answers Allow.
func bareAuthorize(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, kcedarserver.MaxBodyBytes))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var sar bareReview
	if err := json.Unmarshal(body, &sar); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(bareAllowed)
}

// startBare starts the bare transport server as a process of this binary
// and waits until it answers.
func startBare(dir string) (*server, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	caFile := filepath.Join(dir, "bare-ca.crt")
	cmd := exec.Command(self, "-serve-bare", addr, "-bare-ca", caFile)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	srv := &server{cmd: cmd, base: "https://" + addr}
	if err := srv.waitReady(caFile, "ok", 30*time.Second); err != nil {
		stopServer(cmd)
		return nil, fmt.Errorf("the bare server: %w", err)
	}
	return srv, nil
}

// waitReady waits until caFile holds a CA and /readyz, verified by it,
// answers with want as prefix.
func (srv *server) waitReady(caFile, want string, timeout time.Duration) error {
	for deadline := time.Now().Add(timeout); ; time.Sleep(50 * time.Millisecond) {
		if pem, err := os.ReadFile(caFile); err == nil && len(pem) > 0 {
			srv.pool = newPool(pem)
			if body, err := get(srv.pool, srv.base+"/readyz"); err == nil && strings.HasPrefix(body, want) {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %s", timeout)
		}
	}
}
