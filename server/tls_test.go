package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// testCA issues certificates for tests.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t testing.TB, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a PEM certificate and key for cn; server certificates are
// for localhost and 127.0.0.1.
func (ca *testCA) issue(t testing.TB, cn string, serial int64, server bool) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature,
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.DNSNames = []string{"localhost"}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

func writeTestFile(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// serveTLS serves an "ok" handler with cfg on a loopback port.
func serveTLS(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })
	mux := http.NewServeMux()
	mux.Handle("/", ok)
	mux.Handle("/v1/", RequireVerifiedClient(ok))
	srv := &http.Server{
		Handler:  mux,
		ErrorLog: log.New(io.Discard, "", 0), // refused handshakes are expected
	}
	go func() { _ = srv.Serve(tls.NewListener(ln, cfg)) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// get makes one request on a fresh connection.
func get(addr string, cfg *tls.Config) error { return getPath(addr, "/", cfg) }

func getPath(addr, path string, cfg *tls.Config) error {
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}}
	resp, err := client.Get("https://" + addr + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != 200 || string(body) != "ok" {
		return errors.New("unexpected response " + resp.Status)
	}
	return nil
}

func pool(pemData ...[]byte) *x509.CertPool {
	p := x509.NewCertPool()
	for _, d := range pemData {
		p.AppendCertsFromPEM(d)
	}
	return p
}

func TestTLSSelfSignedWritesAVerifyingCA(t *testing.T) {
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	cfg, err := TLSOptions{WriteCA: caFile, Hosts: []string{"kcedar.example", "10.1.2.3", ""}}.Config(quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MinVersion < tls.VersionTLS12 || cfg.ClientAuth != tls.NoClientCert {
		t.Fatalf("min version %x, client auth %v", cfg.MinVersion, cfg.ClientAuth)
	}
	addr := serveTLS(t, cfg)
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := pool(caPEM)
	for _, name := range []string{"", "localhost", "kcedar.example", "10.1.2.3"} {
		if err := get(addr, &tls.Config{RootCAs: roots, ServerName: name}); err != nil {
			t.Errorf("server name %q: %v", name, err)
		}
	}
	if err := get(addr, &tls.Config{RootCAs: roots, ServerName: "other.example"}); err == nil {
		t.Error("a name the certificate does not cover verified")
	}
	if err := get(addr, &tls.Config{}); err == nil {
		t.Error("verified without the CA")
	}
	// Every start makes a new CA.
	caFile2 := filepath.Join(t.TempDir(), "ca.crt")
	if _, err := (TLSOptions{WriteCA: caFile2}).Config(quietLogger()); err != nil {
		t.Fatal(err)
	}
	caPEM2, _ := os.ReadFile(caFile2)
	if err := get(addr, &tls.Config{RootCAs: pool(caPEM2)}); err == nil {
		t.Error("another start's CA verified this server")
	}
	// Without --write-ca it still serves.
	if _, err := (TLSOptions{}).Config(quietLogger()); err != nil {
		t.Fatal(err)
	}
}

// The CA selfSigned returns (what --write-ca writes) verifies the serving
// certificate for every name it covers, as a server certificate, for about a
// year; the serving chain holds just the serving certificate.
func TestSelfSignedCAVerifiesServingCertificate(t *testing.T) {
	pair, caPEM, err := selfSigned([]string{"kcedar.example", "10.1.2.3"})
	if err != nil {
		t.Fatal(err)
	}
	if len(pair.Certificate) != 1 {
		t.Fatalf("serving chain holds %d certificates, want 1", len(pair.Certificate))
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if block, rest := pem.Decode(caPEM); block == nil || block.Type != "CERTIFICATE" || len(rest) != 0 {
		t.Fatalf("CA file is not one PEM certificate:\n%s", caPEM)
	}
	for _, name := range []string{"localhost", "kcedar.example", "10.1.2.3", "127.0.0.1", "::1"} {
		opts := x509.VerifyOptions{DNSName: name, Roots: pool(caPEM), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
		if _, err := leaf.Verify(opts); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if validity := leaf.NotAfter.Sub(leaf.NotBefore); validity < 364*24*time.Hour || validity > 366*24*time.Hour {
		t.Errorf("valid for %v, want about a year", validity)
	}
}

func TestSelfSignedSANs(t *testing.T) {
	ips, names := selfSignedSANs([]string{"", "localhost", "a.example", "a.example", "127.0.0.1", "0:0::1", "10.1.2.3", "10.1.2.3"})
	var got []string
	for _, ip := range ips {
		got = append(got, ip.String())
	}
	if want := "127.0.0.1 ::1 10.1.2.3"; strings.Join(got, " ") != want {
		t.Errorf("IPs %v, want %s", got, want)
	}
	if want := "a.example"; strings.Join(names, " ") != want {
		t.Errorf("names %v, want %s", names, want)
	}
}

func TestTLSOptionErrors(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	writeTestFile(t, notPEM, []byte("hello"))
	for _, tc := range []struct {
		opts TLSOptions
		want string
	}{
		{TLSOptions{CertFile: "x"}, "go together"},
		{TLSOptions{KeyFile: "x"}, "go together"},
		{TLSOptions{CertFile: filepath.Join(dir, "missing.crt"), KeyFile: filepath.Join(dir, "missing.key")}, "missing.crt"},
		{TLSOptions{CertFile: notPEM, KeyFile: notPEM}, "serving certificate"},
		{TLSOptions{ClientCAFile: filepath.Join(dir, "missing-ca.crt")}, "client CA file"},
		{TLSOptions{ClientCAFile: notPEM}, "no PEM certificates"},
		{TLSOptions{WriteCA: filepath.Join(dir, "no", "such", "dir", "ca.crt")}, "writing the CA"},
	} {
		if _, err := tc.opts.Config(quietLogger()); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.opts, err, tc.want)
		}
	}
}

func TestTLSClientCertificates(t *testing.T) {
	dir := t.TempDir()
	serverCA, clientCA, otherCA := newTestCA(t, "server CA"), newTestCA(t, "client CA"), newTestCA(t, "other CA")
	certPEM, keyPEM := serverCA.issue(t, "kcedar", 10, true)
	certFile, keyFile, clientCAFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), filepath.Join(dir, "client-ca.crt")
	writeTestFile(t, certFile, certPEM)
	writeTestFile(t, keyFile, keyPEM)
	writeTestFile(t, clientCAFile, clientCA.pem)
	cfg, err := TLSOptions{CertFile: certFile, KeyFile: keyFile, ClientCAFile: clientCAFile}.Config(quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	addr := serveTLS(t, cfg)
	roots := pool(serverCA.pem)
	clientCert := func(ca *testCA, server bool) []tls.Certificate {
		c, k := ca.issue(t, "kube-apiserver", 20, server)
		pair, err := tls.X509KeyPair(c, k)
		if err != nil {
			t.Fatal(err)
		}
		return []tls.Certificate{pair}
	}
	const webhook = "/v1/authorize"
	if err := getPath(addr, webhook, &tls.Config{RootCAs: roots, Certificates: clientCert(clientCA, false)}); err != nil {
		t.Fatalf("a client certificate from the client CA: %v", err)
	}
	if err := getPath(addr, webhook, &tls.Config{RootCAs: roots}); err == nil {
		t.Error("a client without a certificate was served the webhook")
	}
	if err := getPath(addr, "/healthz", &tls.Config{RootCAs: roots}); err != nil {
		t.Errorf("a probe without a certificate (as kubelet sends) was refused: %v", err)
	}
	// (Go clients send no certificate that the server's CA list does not
	// name, so for /healthz these would simply be certificate-less probes.)
	for _, path := range []string{webhook} {
		if err := getPath(addr, path, &tls.Config{RootCAs: roots, Certificates: clientCert(otherCA, false)}); err == nil {
			t.Errorf("%s: a client certificate from another CA was served", path)
		}
		if err := getPath(addr, path, &tls.Config{RootCAs: roots, Certificates: clientCert(serverCA, false)}); err == nil {
			t.Errorf("%s: a client certificate from the serving CA was served", path)
		}
		if err := getPath(addr, path, &tls.Config{RootCAs: roots, Certificates: clientCert(clientCA, true)}); err == nil {
			t.Errorf("%s: a server-auth-only certificate was accepted as a client certificate", path)
		}
	}
}

// The certificate files are reloaded when they change: checked on handshakes,
// or (ConfigWriteCALater) on file system events through internal/lib/watch,
// with a poll interval longer than the test.
func TestTLSServingCertificateReload(t *testing.T) {
	t.Run("handshake", func(t *testing.T) { testTLSReload(t, false) })
	t.Run("watched", func(t *testing.T) { testTLSReload(t, true) })
}

// Messages of the reloads the certificate files cause.
const (
	reloadedMsg = "serving certificate reloaded"
	mismatchMsg = "reloading the serving certificate failed; keeping the old one"
	unreadMsg   = "reading the serving certificate failed; keeping the old one"
	reloadWait  = 10 * time.Second
)

// reloadLog is a slog handler sending the messages of the certificate
// reloads to its channel.
type reloadLog chan string

func (l reloadLog) Enabled(context.Context, slog.Level) bool { return true }
func (l reloadLog) Handle(_ context.Context, r slog.Record) error {
	switch r.Message {
	case reloadedMsg, mismatchMsg, unreadMsg:
		l <- r.Message
	}
	return nil
}
func (l reloadLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l reloadLog) WithGroup(string) slog.Handler      { return l }

// await waits for the reload that logs want. A pair written file by file
// may fail to reload half-way (a failure before a success is skipped); a
// success while a failure is expected fails the test.
func (l reloadLog) await(t *testing.T, want string) {
	t.Helper()
	for {
		select {
		case msg := <-l:
			if msg == want {
				return
			}
			if msg == reloadedMsg {
				t.Fatalf("the certificate reloaded, want %q", want)
			}
		case <-time.After(reloadWait):
			t.Fatalf("no reload logging %q", want)
		}
	}
}

// fakeClock is a clock the test moves on.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func testTLSReload(t *testing.T, watched bool) {
	dir := t.TempDir()
	ca := newTestCA(t, "server CA")
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	c1, k1 := ca.issue(t, "kcedar", 1, true)
	writeTestFile(t, certFile, c1)
	writeTestFile(t, keyFile, k1)
	mtimes := map[string]time.Time{}
	for _, f := range []string{certFile, keyFile} {
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		mtimes[f] = st.ModTime()
	}
	clock := &fakeClock{now: time.Now()}
	opts := TLSOptions{CertFile: certFile, KeyFile: keyFile, now: clock.Now}
	logs := make(reloadLog, 100)
	cfg, err := opts.Config(slog.New(logs))
	if watched {
		opts.Interval = time.Hour
		cfg, _, err = opts.ConfigWriteCALater(t.Context(), slog.New(logs))
	}
	if err != nil {
		t.Fatal(err)
	}
	addr := serveTLS(t, cfg)
	roots := pool(ca.pem)
	serial := func() int64 {
		t.Helper()
		conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots, ServerName: "localhost"})
		if err != nil {
			t.Fatalf("handshake: %v", err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
	}
	// After a change: the reload that logs msg, then the serial served.
	// Watched, a file system event reloads; otherwise the first handshake
	// once the second between checks passed (on the fake clock).
	serving := int64(1)
	reload := func(msg string, want int64) {
		t.Helper()
		defer func() { serving = want }()
		if !watched {
			if got := serial(); got != serving { // within the second: no check
				t.Fatalf("serving %d before the check, want %d", got, serving)
			}
			clock.Add(2 * time.Second)
			if got := serial(); got != want {
				t.Fatalf("serving %d, want %d", got, want)
			}
		}
		logs.await(t, msg)
		if got := serial(); got != want {
			t.Fatalf("serving %d after %q, want %d", got, msg, want)
		}
	}
	if got := serial(); got != serving {
		t.Fatalf("serving %d", got)
	}
	testTLSReloadSteps(t, ca, certFile, keyFile, mtimes, reload)
}

// testTLSReloadSteps changes the files and checks each reload (see
// testTLSReload): contents decide, a mismatched or missing pair keeps the
// old one serving, renames are seen.
func testTLSReloadSteps(t *testing.T, ca *testCA, certFile, keyFile string, mtimes map[string]time.Time, reload func(msg string, want int64)) {
	// Replace the pair, keeping the old modification time: contents decide.
	c2, k2 := ca.issue(t, "kcedar", 2, true)
	writeTestFile(t, keyFile, k2)
	writeTestFile(t, certFile, c2)
	for f, mt := range mtimes {
		if err := os.Chtimes(f, mt, mt); err != nil {
			t.Fatal(err)
		}
	}
	reload(reloadedMsg, 2)
	// A certificate that does not match the key keeps the old pair serving.
	c3, _ := ca.issue(t, "kcedar", 3, true)
	writeTestFile(t, certFile, c3)
	reload(mismatchMsg, 2)
	// Files swapped by rename (as kubelet does for Secret volumes) are picked up.
	c4, k4 := ca.issue(t, "kcedar", 4, true)
	writeTestFile(t, certFile+".new", c4)
	writeTestFile(t, keyFile+".new", k4)
	if err := os.Rename(keyFile+".new", keyFile); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(certFile+".new", certFile); err != nil {
		t.Fatal(err)
	}
	reload(reloadedMsg, 4)
	// Missing files keep the old pair serving too.
	if err := os.Remove(certFile); err != nil {
		t.Fatal(err)
	}
	reload(unreadMsg, 4)
}
