package server

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// The expiry metric reports the NotAfter of the certificate the listener
// presents: the self-signed one, or the one of --tls-cert-file.
func TestServingCertificateExpiryMetric(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, "server CA")
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	certPEM, keyPEM := ca.issue(t, "kcedar", 1, true)
	writeTestFile(t, certFile, certPEM)
	writeTestFile(t, keyFile, keyPEM)
	block, _ := pem.Decode(certPEM)
	fromFile, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	selfSignedCfg, err := TLSOptions{WriteCA: filepath.Join(dir, "ca.crt")}.Config(slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	selfLeaf, err := x509.ParseCertificate(selfSignedCfg.Certificates[0].Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	fileCfg, err := TLSOptions{CertFile: certFile, KeyFile: keyFile}.Config(slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		cfg  *tls.Config
		want float64
	}{
		{"self-signed", selfSignedCfg, float64(selfLeaf.NotAfter.Unix())},
		{"certificate files", fileCfg, float64(fromFile.NotAfter.Unix())},
		{"no certificate", &tls.Config{}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			reg.MustRegister(ServingCertificateExpiry(c.cfg))
			families, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, f := range families {
				if f.GetName() == "kcedar_serving_certificate_expiry_timestamp_seconds" {
					found = true
					if v := f.GetMetric()[0].GetGauge().GetValue(); v != c.want {
						t.Fatalf("expiry %v, want %v", v, c.want)
					}
				}
			}
			if !found {
				t.Fatal("no kcedar_serving_certificate_expiry_timestamp_seconds series")
			}
		})
	}
}
