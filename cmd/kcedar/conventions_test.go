package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

func TestUnknownSubcommand(t *testing.T) {
	root := &cobra.Command{Use: "kcedar"}
	root.AddCommand(newSchemaCmdForTest())
	requireSubcommands(root)
	out, code := run(t, root, "schema", "exprt")
	if code != 2 || !strings.Contains(out, `did you mean "kcedar schema export"?`) {
		t.Errorf("exit %d:\n%s", code, out)
	}
	if out, code := run(t, root, "schema"); code != 0 || !strings.Contains(out, "Available Commands") {
		t.Errorf("bare group: exit %d:\n%s", code, out)
	}
}

// newSchemaCmdForTest is the schema group as registered on rootCmd.
func newSchemaCmdForTest() *cobra.Command {
	for _, c := range rootCmd.Commands() {
		if c.Name() == "schema" {
			cp := &cobra.Command{Use: c.Use, Short: c.Short}
			cp.AddCommand(newSchemaExportCmd(), newSchemaCaptureCmd())
			return cp
		}
	}
	panic("no schema command")
}

func TestOutputFormatFlag(t *testing.T) {
	dir := t.TempDir()
	out, code := run(t, newSchemaExportCmd(), "-o", "json")
	if code != 0 || !strings.HasPrefix(out, "{") {
		t.Fatalf("-o json: exit %d: %.100s", code, out)
	}
	path := filepath.Join(dir, "s.cedarschema")
	out, code = run(t, newSchemaExportCmd(), "-o", path)
	if code != 0 || !strings.Contains(out, "deprecated: use --file") {
		t.Fatalf("-o PATH: exit %d: %.200s", code, out)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
	if out, code = run(t, newSchemaExportCmd(), "--file", path, "-o", "yaml.txt"); code == 0 {
		t.Fatalf("--file and -o PATH: exit 0: %.200s", out)
	}
}

func writeCA(t *testing.T, dir string) string {
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"}, NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	certFile, _ := writeSelfSigned(t, dir, "ca", tmpl)
	return certFile
}

// writeSelfSigned writes the certificate tmpl describes, signed by its own
// new key, as DIR/NAME.crt, and the key as DIR/NAME.key.
func writeSelfSigned(t *testing.T, dir, name string, tmpl *x509.Certificate) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

func TestManifestsInputs(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("KUBECONFIG", filepath.Join(dir, "none")) // no cluster to read the version of
	ca := writeCA(t, dir)
	notPEM := filepath.Join(dir, "not.pem")
	os.WriteFile(notPEM, []byte("hello\n"), 0o644)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--url", "https://host:8443/v1/authorize", "--ca-file", ca}, 0, "server: https://host:8443/v1/authorize\n"},
		{[]string{"--url", "https://host:8443/", "--ca-file", ca, "--conditions-review"}, 0, "server: https://host:8443/v1/conditions\n"},
		{[]string{"--url", "https://proxy/kcedar", "--ca-file", ca}, 0, "server: https://proxy/kcedar/v1/authorize\n"},
		{[]string{"--url", "http://host:8443", "--ca-file", ca}, 2, "scheme must be https"},
		{[]string{"--url", "host:8443", "--ca-file", ca}, 2, "scheme must be https"},
		{[]string{"--url", "https://host:8443?x=1", "--ca-file", ca}, 2, "query"},
		{[]string{"--url", "https://host:8443", "--ca-file", notPEM}, 2, "no PEM certificate"},
		{[]string{"--url", "https://host:8443", "--ca-file", ca, "--client-certificate", notPEM, "--client-key", notPEM}, 2, "not a PEM certificate and its key"},
	} {
		out, code := run(t, newManifestsCmd(), tc.args...)
		if code != tc.code || !strings.Contains(out, tc.want) {
			t.Errorf("%v: exit %d, want %d ~ %q:\n%s", tc.args, code, tc.code, tc.want, out)
		}
		if strings.Contains(out, "/v1/authorize/v1/authorize") {
			t.Errorf("%v: path doubled:\n%s", tc.args, out)
		}
	}
}

// --write-ca is written only once the listener is bound.
func TestListenThenWritesAfterBind(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	called := false
	if _, err := listenThen(taken.Addr().String(), func() error { called = true; return nil }); err == nil || called {
		t.Fatalf("port taken: err %v, CA written %v", err, called)
	}
	ln, err := listenThen("127.0.0.1:0", func() error { called = true; return nil })
	if err != nil || !called {
		t.Fatalf("free port: err %v, CA written %v", err, called)
	}
	ln.Close()
}
