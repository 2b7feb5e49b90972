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

	"github.com/kcedar/kcedar/internal/testing/schematest"
	"github.com/kcedar/kcedar/server"
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

// signalling is kcedar's server with the events TestGracefulShutdown waits
// for: a request reaching the handler (counted in flight by then), and the
// drain beginning.
type signalling struct {
	*server.Server
	entered chan struct{}
	drained chan struct{}
}

func (s *signalling) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/v1/authorize" {
		select {
		case s.entered <- struct{}{}:
		default:
		}
	}
	s.Server.ServeHTTP(w, r)
}

func (s *signalling) Drain() {
	s.Server.Drain()
	close(s.drained)
}

// closeSignal is a listener that tells when it is closed.
type closeSignal struct {
	net.Listener
	once   sync.Once
	closed chan struct{}
}

func (l *closeSignal) Close() error {
	err := l.Listener.Close()
	l.once.Do(func() { close(l.closed) })
	return err
}

// await waits for c, failing the test after ten seconds.
func await(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// shutdownServer starts serveTLS over a one-policy store on a local port;
// it returns the server, its listener, its base URL, its result and its log.
func shutdownServer(t *testing.T, ctx context.Context, delay, timeout time.Duration) (*signalling, *closeSignal, string, chan error, *syncBuffer) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "p.cedar"), []byte(`@id("all") permit(principal, action, resource);`), 0o644); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, nil))
	srv := &signalling{Server: servedPolicies(t, schematest.Schema(), []string{dir}, nil, server.Options{Logger: logger}), entered: make(chan struct{}, 1), drained: make(chan struct{})}
	tlsCfg, err := server.TLSOptions{}.Config(logger)
	if err != nil {
		t.Fatal(err)
	}
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &closeSignal{Listener: inner, closed: make(chan struct{})}
	done := make(chan error, 1)
	go func() { done <- serveTLS(ctx, ln, tlsCfg, srv, logger, delay, timeout) }()
	return srv, ln, "https://" + inner.Addr().String(), done, logs
}

// TestGracefulShutdown: on the signal /readyz turns 503 while the listener
// still accepts; after the delay the listener closes; an in-flight request
// finishes (drained) or is cut after the timeout; the last log line says which.
func TestGracefulShutdown(t *testing.T) {
	for _, tc := range []struct {
		name    string
		finish  bool          // the in-flight request's client finishes its body
		timeout time.Duration // for the in-flight requests after the listener closed
		wantHow string
	}{
		{"drained", true, time.Minute, "drained"},
		{"timeout", false, 500 * time.Millisecond, "timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			srv, ln, base, done, logs := shutdownServer(t, ctx, time.Second, tc.timeout)
			client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
			if code := readyz(t, client, base); code != 200 { // the listener accepts already
				t.Fatalf("readyz %d", code)
			}
			// An in-flight request: headers and half the body sent.
			pw, inflight := startRequest(t, base)
			await(t, srv.entered, "the request to reach the handler")

			cancel() // the signal
			await(t, srv.drained, "the drain")
			if code := readyz(t, client, base); code != 503 {
				t.Fatalf("readyz during the delay: %d", code)
			}
			if tc.finish {
				await(t, ln.closed, "the listener to close") // the request still open
				if _, err := pw.Write([]byte(authorizeBody[20:])); err != nil {
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

const authorizeBody = `{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":{"user":"a","resourceAttributes":{"verb":"get","resource":"pods","namespace":"x"}}}`

// readyz is the status of GET /readyz; the listener must accept.
func readyz(t *testing.T, client *http.Client, base string) int {
	t.Helper()
	resp, err := client.Get(base + "/readyz")
	if err != nil {
		t.Fatalf("readyz: %v", err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// startRequest sends a review's headers and its first 20 bytes; the rest is
// for the caller to write. The status (-1: no answer) comes on the channel.
func startRequest(t *testing.T, base string) (*io.PipeWriter, chan int) {
	t.Helper()
	pr, pw := io.Pipe()
	inflight := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/authorize", pr)
		req.Header.Set("Content-Type", "application/json")
		req.ContentLength = int64(len(authorizeBody))
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
		resp, err := c.Do(req)
		if err != nil {
			inflight <- -1
			return
		}
		resp.Body.Close()
		inflight <- resp.StatusCode
	}()
	if _, err := pw.Write([]byte(authorizeBody[:20])); err != nil {
		t.Fatal(err)
	}
	return pw, inflight
}
