package framework

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// stopGrace is how long Stop waits after SIGTERM before sending SIGKILL.
const stopGrace = 5 * time.Second

// Process is a child process started by StartProcess. Its stdout and stderr
// go to LogFile; it runs in its own process group, which Stop signals as a
// whole.
type Process struct {
	Name    string   // the executable as given
	Args    []string // arguments, without the executable
	LogFile string   // stdout+stderr of the process

	cmd      *exec.Cmd
	done     chan struct{} // closed once the process has been reaped
	waitErr  error         // the result of Wait, valid once done is closed
	stopOnce sync.Once
}

// StartProcess starts name (a path, or a command looked up in PATH) with args,
// its output captured in a log file of a fresh temporary directory. The test's
// Cleanup stops it (SIGTERM to its process group, SIGKILL after 5 s); if the
// test failed, the log directory is kept and the log's tail and path are
// printed. The process also gets SIGKILL if the test binary dies. When the
// log shows a Go data race report ("WARNING: DATA RACE", see KcedarBinary),
// Cleanup fails the test.
func StartProcess(t testing.TB, name string, args ...string) *Process {
	t.Helper()
	dir, err := os.MkdirTemp("", "kcedar-e2e-proc-")
	if err != nil {
		t.Fatalf("StartProcess %s: %v", name, err)
	}
	p, err := startProcess(filepath.Join(dir, filepath.Base(name)+".log"), name, args...)
	if err != nil {
		os.RemoveAll(dir)
		t.Fatalf("StartProcess: %v", err)
	}
	t.Cleanup(func() {
		p.Stop()
		logs := p.Logs()
		if strings.Contains(logs, "WARNING: DATA RACE") {
			t.Errorf("%s reported a data race; see %s", filepath.Base(name), p.LogFile)
		}
		if t.Failed() {
			t.Logf("%s (exit: %v): kept log %s; last lines:\n%s", p, p.ExitErr(), p.LogFile, tail(logs, 40))
			return
		}
		os.RemoveAll(dir)
	})
	return p
}

// startProcess starts the process with output to logFile (created; its
// directory must exist).
func startProcess(logFile, name string, args ...string) (*Process, error) {
	f, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_TRUNC|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close() // the child has its own copy
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = f, f // *os.File: no copying goroutines
	cmd.SysProcAttr = sysProcAttr()
	p := &Process{Name: name, Args: args, LogFile: logFile, cmd: cmd, done: make(chan struct{})}
	onSpawnThread(func() { err = cmd.Start() })
	if err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// String returns the executable's base name and pid.
func (p *Process) String() string {
	return fmt.Sprintf("%s[%d]", filepath.Base(p.Name), p.Pid())
}

// Pid returns the process id (which is also its process group id).
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// ExitErr returns the process's exit status as exec.Cmd.Wait reports it (nil
// for exit code 0), or nil while it is still running.
func (p *Process) ExitErr() error {
	if !p.Exited() {
		return nil
	}
	return p.waitErr
}

// Stop sends SIGTERM to the process group, SIGKILL after 5 s if the process
// has not exited by then, and returns once it has been reaped. It is
// idempotent and safe to call concurrently.
func (p *Process) Stop() { p.stop(stopGrace) }

func (p *Process) stop(grace time.Duration) {
	p.stopOnce.Do(func() {
		pgid := p.Pid()
		if !p.Exited() {
			_ = syscall.Kill(-pgid, syscall.SIGTERM)
			select {
			case <-p.done:
			case <-time.After(grace):
				_ = syscall.Kill(-pgid, syscall.SIGKILL)
				<-p.done
			}
		}
		// Whatever the leader left behind in its group.
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	})
}

// Logs returns everything the process has written to stdout and stderr so far.
func (p *Process) Logs() string {
	b, err := os.ReadFile(p.LogFile)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", p.LogFile, err)
	}
	return string(b)
}

// WaitForTCP waits until addr (host:port) accepts TCP connections. It fails
// the test with the log's tail if the process exits first or timeout passes.
func (p *Process) WaitForTCP(t testing.TB, addr string, timeout time.Duration) {
	t.Helper()
	if err := p.waitForTCP(addr, timeout); err != nil {
		t.Fatalf("%v; last lines of %s:\n%s", err, p.LogFile, tail(p.Logs(), 40))
	}
}

func (p *Process) waitForTCP(addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if p.Exited() {
			return fmt.Errorf("%s exited (%v) before listening on %s", p, p.waitErr, addr)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not listening on %s after %v: %v", p, addr, timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// WaitForTLS waits until the process serves TLS on addr with a certificate
// that the CA in caFile (which the process writes, as kcedar serve
// --write-ca does) verifies, and returns that CA's PEM. Listening is not
// enough: a server may bind before it writes its CA, and a client configured
// with no CA or an old one fails every webhook call.
func (p *Process) WaitForTLS(t testing.TB, addr, caFile string, timeout time.Duration) []byte {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		caPEM, err := handshakeWithCA(addr, caFile)
		if err == nil {
			return caPEM
		}
		if p.Exited() {
			t.Fatalf("%s exited (%v) before serving TLS on %s; last lines of %s:\n%s", p, p.waitErr, addr, p.LogFile, tail(p.Logs(), 40))
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not serving TLS on %s with the CA in %s after %v: %v; last lines of %s:\n%s", p, addr, caFile, timeout, err, p.LogFile, tail(p.Logs(), 40))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// handshakeWithCA completes one TLS handshake with addr, verifying its
// certificate against the CA in caFile, and returns the CA's PEM.
func handshakeWithCA(addr, caFile string) ([]byte, error) {
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("%s holds no certificate yet", caFile)
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, &tls.Config{RootCAs: pool, ServerName: host})
	if err != nil {
		return nil, err
	}
	conn.Close()
	return caPEM, nil
}

// Child processes are forked from one OS thread that is locked and never
// exits: Pdeathsig fires when the *thread* that forked the child dies, and Go
// may retire idle threads, which would kill the child early.
var (
	spawnOnce sync.Once
	spawnCh   chan func()
)

func onSpawnThread(f func()) {
	spawnOnce.Do(func() {
		spawnCh = make(chan func())
		go func() {
			runtime.LockOSThread() // never unlocked
			for f := range spawnCh {
				f()
			}
		}()
	})
	done := make(chan struct{})
	spawnCh <- func() { defer close(done); f() }
	<-done
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	s = strings.TrimRight(s, "\n")
	i := len(s)
	for ; n > 0; n-- {
		j := strings.LastIndexByte(s[:i], '\n')
		if j < 0 {
			return s
		}
		i = j
	}
	if i == len(s) {
		return ""
	}
	return s[i+1:]
}

// FreePort returns a TCP port on 127.0.0.1 that is free right now and that
// this process has not handed out before (another process may still take it
// before it is used).
func FreePort(t testing.TB) int {
	t.Helper()
	p, err := freePort()
	if err != nil {
		t.Fatalf("FreePort: %v", err)
	}
	return p
}

var (
	portsMu   sync.Mutex
	portsUsed = map[int]bool{}
)

func freePort() (int, error) {
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		p := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !portsUsed[p] {
			portsUsed[p] = true
			return p, nil
		}
	}
	return 0, errors.New("no unused free port found in 100 tries")
}
