package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kcedar/kcedar/internal/server"
	"github.com/kcedar/kcedar/internal/store"
	"github.com/kcedar/kcedar/internal/testing/schematest"
)

// syncBuffer collects the JSON log.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) lastLine(t *testing.T) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	lines := strings.Split(strings.TrimSpace(s.b.String()), "\n")
	var m map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &m); err != nil {
		t.Fatalf("last log line is not JSON: %v: %s", err, lines[len(lines)-1])
	}
	return m
}

// TestGracefulShutdown: on the signal /readyz turns 503 while the listener
// still accepts; after the delay the listener closes; an in-flight request
// finishes (drained) or is cut after the timeout; the last log line says which.
func TestGracefulShutdown(t *testing.T) {
	for _, tc := range []struct {
		name    string
		finish  bool // the in-flight request's client finishes its body
		wantHow string
	}{
		{"drained", true, "drained"},
		{"timeout", false, "timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "p.cedar"), []byte(`@id("all") permit(principal, action, resource);`), 0o644); err != nil {
				t.Fatal(err)
			}
			store := store.NewStore([]string{dir}, nil, nil)
			if err := store.Load(); err != nil {
				t.Fatal(err)
			}
			logs := &syncBuffer{}
			logger := slog.New(slog.NewJSONHandler(logs, nil))
			srv := server.New(schematest.Schema(), store, server.Options{Logger: logger})
			tlsCfg, err := server.TLSOptions{}.Config(logger)
			if err != nil {
				t.Fatal(err)
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := ln.Addr().String()
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			const delay = 500 * time.Millisecond
			go func() { done <- serveTLS(ctx, ln, tlsCfg, srv, logger, delay, 500*time.Millisecond) }()
			client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
			base := "https://" + addr
			var code int
			for deadline := time.Now().Add(10 * time.Second); ; {
				if resp, err := client.Get(base + "/readyz"); err == nil {
					code = resp.StatusCode
					resp.Body.Close()
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("server did not start")
				}
				time.Sleep(20 * time.Millisecond)
			}
			if code != 200 {
				t.Fatalf("readyz %d", code)
			}

			// An in-flight request: headers and half the body sent.
			body := `{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":{"user":"a","resourceAttributes":{"verb":"get","resource":"pods","namespace":"x"}}}`
			pr, pw := io.Pipe()
			inflight := make(chan int, 1)
			go func() {
				req, _ := http.NewRequest(http.MethodPost, base+"/v1/authorize", pr)
				req.Header.Set("Content-Type", "application/json")
				req.ContentLength = int64(len(body))
				c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
				resp, err := c.Do(req)
				if err != nil {
					inflight <- -1
					return
				}
				resp.Body.Close()
				inflight <- resp.StatusCode
			}()
			if _, err := pw.Write([]byte(body[:20])); err != nil {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond) // let the request reach the handler

			cancel() // the signal
			time.Sleep(100 * time.Millisecond)
			resp, err := client.Get(base + "/readyz")
			if err != nil {
				t.Fatalf("the listener closed before the delay: %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode != 503 {
				t.Fatalf("readyz during the delay: %d", resp.StatusCode)
			}
			if tc.finish {
				time.Sleep(delay) // the listener is closed now, the request still open
				if _, err := pw.Write([]byte(body[20:])); err != nil {
					t.Fatal(err)
				}
				pw.Close()
			}
			select {
			case err := <-done:
				if (err == nil) != tc.finish {
					t.Fatalf("serveTLS returned %v", err)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("serveTLS did not return")
			}
			pw.Close() // (the cut request's client waits for its body writer)
			if got := <-inflight; tc.finish && got != 200 {
				t.Fatalf("in-flight request: %d, want 200", got)
			}
			last := logs.lastLine(t)
			if last["msg"] != "shutdown complete" || last["how"] != tc.wantHow {
				t.Fatalf("last log line %v", last)
			}
			if !tc.finish && last["aborted_requests"] != float64(1) {
				t.Fatalf("aborted requests: %v", last)
			}
			if _, err := client.Get(base + "/readyz"); err == nil {
				t.Fatal("the listener is still open")
			}
		})
	}
}
