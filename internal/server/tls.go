package server

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/kcedar/kcedar/internal/lib/watch"
)

// TLSOptions configure the HTTPS listener.
type TLSOptions struct {
	CertFile, KeyFile string // serving certificate; reloaded when the files change
	ClientCAFile      string // when set, clients must present a certificate it signed
	WriteCA           string // without CertFile: write the self-signed CA here
	Hosts             []string
	// Context, if set, reloads the certificate files on file system events
	// and every Interval (internal/lib/watch) until it ends; otherwise they are
	// checked on handshakes, at most once a second.
	Context  context.Context
	Interval time.Duration
}

// Config builds the TLS configuration, writing the self-signed CA (WriteCA)
// at once. A server should use ConfigWriteCALater and write the CA once its
// listener is bound.
func (o TLSOptions) Config(logger *slog.Logger) (*tls.Config, error) {
	cfg, writeCA, err := o.ConfigWriteCALater(logger)
	if err != nil {
		return nil, err
	}
	if err := writeCA(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// ConfigWriteCALater builds the TLS configuration and returns the function
// that writes the self-signed CA to WriteCA (a no-op otherwise). Call it after
// the listener is bound: a client waiting for the CA file then never finds a
// CA for a server that could not start (port taken).
func (o TLSOptions) ConfigWriteCALater(logger *slog.Logger) (*tls.Config, func() error, error) {
	writeCA := func() error { return nil }
	cfg, err := o.config(logger, &writeCA)
	return cfg, writeCA, err
}

func (o TLSOptions) config(logger *slog.Logger, writeCA *func() error) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	switch {
	case o.CertFile != "" && o.KeyFile != "":
		rl := &certReloader{certFile: o.CertFile, keyFile: o.KeyFile, logger: logger, watched: o.Context != nil}
		if err := rl.load(); err != nil {
			return nil, err
		}
		cfg.GetCertificate = rl.get
		if rl.watched {
			watch.Start(o.Context, []string{o.CertFile, o.KeyFile}, o.Interval, logger, func() { rl.reload() })
		}
	case o.CertFile != "" || o.KeyFile != "":
		return nil, fmt.Errorf("--tls-cert-file and --tls-private-key-file go together")
	default:
		cert, caPEM, err := selfSigned(o.Hosts)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{cert}
		if o.WriteCA != "" {
			*writeCA = func() error {
				if err := os.WriteFile(o.WriteCA, caPEM, 0o644); err != nil {
					return fmt.Errorf("writing the CA: %w", err)
				}
				logger.Info("serving with a self-signed certificate", "ca", o.WriteCA)
				return nil
			}
		} else {
			logger.Warn("serving with a self-signed certificate whose CA is not written anywhere; pass --write-ca FILE")
		}
	}
	if o.ClientCAFile != "" {
		pemData, err := os.ReadFile(o.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("reading --client-ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pemData) {
			return nil, fmt.Errorf("--client-ca-file %s holds no PEM certificates", o.ClientCAFile)
		}
		cfg.ClientCAs = pool
		// A certificate, when given, must verify; whether one is required is
		// decided per endpoint (RequireVerifiedClient): the webhook endpoints
		// need one, health probes (kubelet sends none) and metrics do not.
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	}
	return cfg, nil
}

// certReloader serves the certificate files and reloads them when their
// contents change (checked at most once a second, on handshakes). Contents,
// not modification times, decide: a rewrite within the file system's timestamp
// granularity, or a copy that keeps an old mtime, is still picked up.
type certReloader struct {
	certFile, keyFile string
	logger            *slog.Logger
	watched           bool // reloaded by internal/lib/watch, not on handshakes

	mu      sync.Mutex
	cert    *tls.Certificate
	certPEM []byte // the file contents cert was loaded from
	keyPEM  []byte
	checked time.Time
}

func (c *certReloader) read() (certPEM, keyPEM []byte, err error) {
	if certPEM, err = os.ReadFile(c.certFile); err != nil {
		return nil, nil, err
	}
	if keyPEM, err = os.ReadFile(c.keyFile); err != nil {
		return nil, nil, err
	}
	return certPEM, keyPEM, nil
}

func (c *certReloader) load() error {
	certPEM, keyPEM, err := c.read()
	if err != nil {
		return fmt.Errorf("loading the serving certificate: %w", err)
	}
	return c.install(certPEM, keyPEM)
}

func (c *certReloader) install(certPEM, keyPEM []byte) error {
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("loading the serving certificate: %w", err)
	}
	c.mu.Lock()
	c.cert, c.certPEM, c.keyPEM, c.checked = &cert, certPEM, keyPEM, time.Now()
	c.mu.Unlock()
	return nil
}

func (c *certReloader) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	due := !c.watched && time.Since(c.checked) > time.Second
	if due {
		c.checked = time.Now()
	}
	cert := c.cert
	c.mu.Unlock()
	if !due {
		return cert, nil
	}
	return c.reload(), nil
}

// reload reads the files and installs them if they changed and form a valid
// pair; it returns the certificate serving afterwards.
func (c *certReloader) reload() *tls.Certificate {
	c.mu.Lock()
	cert, oldCert, oldKey := c.cert, c.certPEM, c.keyPEM
	c.mu.Unlock()
	certPEM, keyPEM, err := c.read()
	if err != nil {
		c.logger.Error("reading the serving certificate failed; keeping the old one", "err", err)
		return cert
	}
	if bytes.Equal(certPEM, oldCert) && bytes.Equal(keyPEM, oldKey) {
		return cert
	}
	// A half-written pair (new certificate, old key) fails here and is
	// retried on the next check.
	if err := c.install(certPEM, keyPEM); err != nil {
		c.logger.Error("reloading the serving certificate failed; keeping the old one", "err", err)
		return cert
	}
	c.logger.Info("serving certificate reloaded")
	c.mu.Lock()
	cert = c.cert
	c.mu.Unlock()
	return cert
}

// selfSigned makes a CA and a serving certificate for hosts (plus localhost
// and the loopback addresses), valid for a year.
func selfSigned(hosts []string) (tls.Certificate, []byte, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	// Random serials: every start makes a new CA with the same name, and
	// clients may cache certificates by issuer and serial.
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	serial2, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "kcedar self-signed CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(365 * 24 * time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial2,
		Subject:      pkix.Name{CommonName: "kcedar"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	cert, err := tls.X509KeyPair(
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	return cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), nil
}

// RequireVerifiedClient refuses requests that did not present a client
// certificate verified against --client-ca-file.
func RequireVerifiedClient(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 {
			http.Error(w, "a client certificate signed by the configured client CA is required", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}
