package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"k8s.io/client-go/util/cert"

	"github.com/kcedar/kcedar/internal/lib/atomicfile"
	"github.com/kcedar/kcedar/internal/lib/watch"
)

// TLSOptions configure the HTTPS listener.
type TLSOptions struct {
	CertFile, KeyFile string   // serving certificate; reloaded when the files change
	ClientCAFile      string   // when set, clients must present a certificate it signed
	WriteCA           string   // without CertFile: write the self-signed CA here
	Hosts             []string // without CertFile: the self-signed certificate's names and IP addresses, beside localhost and loopback
	// Interval is how often ConfigWriteCALater's watch reads the
	// certificate files when no file system event says they changed (0:
	// every 2 seconds).
	Interval time.Duration

	// now, if set, is the clock of the handshake checks (time.Now if nil):
	// tests move it past the second between checks instead of waiting.
	now func() time.Time
}

// Config builds the TLS configuration, writing the self-signed CA (WriteCA)
// at once; the certificate files are read again on handshakes, at most once
// a second. A server should use ConfigWriteCALater.
func (o TLSOptions) Config(logger *slog.Logger) (*tls.Config, error) {
	writeCA := func() error { return nil }
	cfg, err := o.config(nil, logger, &writeCA)
	if err != nil {
		return nil, err
	}
	if err := writeCA(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// ConfigWriteCALater builds the TLS configuration, with the certificate
// files watched (file system events, and a read every Interval) until ctx
// ends, and returns the function that writes the self-signed CA to WriteCA
// (a no-op otherwise). Call it after the listener is bound: a client
// waiting for the CA file then never finds a CA for a server that could not
// start (port taken).
func (o TLSOptions) ConfigWriteCALater(ctx context.Context, logger *slog.Logger) (*tls.Config, func() error, error) {
	writeCA := func() error { return nil }
	start := func(reload func()) { watch.Start(ctx, []string{o.CertFile, o.KeyFile}, o.Interval, logger, reload) }
	cfg, err := o.config(start, logger, &writeCA)
	return cfg, writeCA, err
}

// config builds the configuration; watch, if set, starts the watch of the
// certificate files that calls reload, else they are checked on handshakes.
func (o TLSOptions) config(watch func(reload func()), logger *slog.Logger, writeCA *func() error) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	switch {
	case o.CertFile != "" && o.KeyFile != "":
		rl := &certReloader{certFile: o.CertFile, keyFile: o.KeyFile, logger: logger, watched: watch != nil, now: o.now}
		if rl.now == nil {
			rl.now = time.Now
		}
		if err := rl.load(); err != nil {
			return nil, err
		}
		cfg.GetCertificate = rl.get
		if rl.watched {
			watch(func() { rl.reload() })
		}
	case o.CertFile != "" || o.KeyFile != "":
		return nil, fmt.Errorf("the serving certificate file and its private key file go together")
	default:
		pair, err := o.selfSignedConfig(logger, writeCA)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	if o.ClientCAFile != "" {
		pemData, err := os.ReadFile(o.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("reading the client CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pemData) {
			return nil, fmt.Errorf("client CA file %s holds no PEM certificates", o.ClientCAFile)
		}
		cfg.ClientCAs = pool
		// A certificate, when given, must verify; whether one is required is
		// decided per endpoint (RequireVerifiedClient): the webhook endpoints
		// need one, health probes (kubelet sends none) and metrics do not.
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	}
	return cfg, nil
}

// selfSignedConfig makes the self-signed serving certificate and sets
// *writeCA to write its CA to WriteCA; without WriteCA it warns that clients
// have no CA to verify against.
func (o TLSOptions) selfSignedConfig(logger *slog.Logger, writeCA *func() error) (tls.Certificate, error) {
	pair, caPEM, err := selfSigned(o.Hosts)
	if err != nil {
		return tls.Certificate{}, err
	}
	if o.WriteCA == "" {
		logger.Warn("serving with a self-signed certificate whose CA is not written anywhere, so no client can verify it")
		return pair, nil
	}
	*writeCA = func() error {
		// Atomically: a client polling for the file (kube-apiserver's
		// webhook kubeconfig, a script's curl) never reads half a CA.
		if err := atomicfile.WriteFile(o.WriteCA, caPEM, 0o644); err != nil {
			return fmt.Errorf("writing the CA: %w", err)
		}
		logger.Info("serving with a self-signed certificate", "ca", o.WriteCA)
		return nil
	}
	return pair, nil
}

// certReloader serves the certificate files and reloads them when their
// contents change (checked at most once a second, on handshakes). Contents,
// not modification times, decide: a rewrite within the file system's timestamp
// granularity, or a copy that keeps an old mtime, is still picked up.
type certReloader struct {
	certFile, keyFile string
	logger            *slog.Logger
	watched           bool // reloaded by internal/lib/watch, not on handshakes
	now               func() time.Time

	mu      sync.Mutex
	cert    *tls.Certificate
	certPEM []byte // the file contents cert was loaded from
	keyPEM  []byte
	checked time.Time
}

// read reads the certificate and key files.
func (c *certReloader) read() (certPEM, keyPEM []byte, err error) {
	if certPEM, err = os.ReadFile(c.certFile); err != nil {
		return nil, nil, err
	}
	if keyPEM, err = os.ReadFile(c.keyFile); err != nil {
		return nil, nil, err
	}
	return certPEM, keyPEM, nil
}

// load reads and installs the files, failing if they do not form a pair.
func (c *certReloader) load() error {
	certPEM, keyPEM, err := c.read()
	if err != nil {
		return fmt.Errorf("loading the serving certificate: %w", err)
	}
	return c.install(certPEM, keyPEM)
}

// install serves the pair certPEM and keyPEM, if valid, from now on.
func (c *certReloader) install(certPEM, keyPEM []byte) error {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("loading the serving certificate: %w", err)
	}
	c.mu.Lock()
	c.cert, c.certPEM, c.keyPEM, c.checked = &pair, certPEM, keyPEM, c.now()
	c.mu.Unlock()
	return nil
}

// get is tls.Config.GetCertificate: the current certificate, reloaded
// first when unwatched and last checked over a second ago.
func (c *certReloader) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	now := c.now()
	due := !c.watched && now.Sub(c.checked) > time.Second
	if due {
		c.checked = now
	}
	current := c.cert
	c.mu.Unlock()
	if !due {
		return current, nil
	}
	return c.reload(), nil
}

// reload reads the files and installs them if they changed and form a valid
// pair; it returns the certificate serving afterwards.
func (c *certReloader) reload() *tls.Certificate {
	c.mu.Lock()
	current, oldCert, oldKey := c.cert, c.certPEM, c.keyPEM
	c.mu.Unlock()
	certPEM, keyPEM, err := c.read()
	if err != nil {
		c.logger.Error("reading the serving certificate failed; keeping the old one", "err", err)
		return current
	}
	if bytes.Equal(certPEM, oldCert) && bytes.Equal(keyPEM, oldKey) {
		return current
	}
	// A half-written pair (new certificate, old key) fails here and is
	// retried on the next check.
	if err := c.install(certPEM, keyPEM); err != nil {
		c.logger.Error("reloading the serving certificate failed; keeping the old one", "err", err)
		return current
	}
	c.logger.Info("serving certificate reloaded")
	c.mu.Lock()
	current = c.cert
	c.mu.Unlock()
	return current
}

// selfSigned makes a CA and a serving certificate it signs, valid for a year,
// for hosts plus localhost and the loopback addresses. It returns the serving
// pair and the CA in PEM, for TLSOptions.WriteCA.
//
// client-go's cert.GenerateSelfSignedCertKeyWithOptions builds the pair: a
// fresh CA (random serial, its key discarded) and a serving certificate it
// signs, returned as one PEM bundle, serving certificate first, then the CA.
// Every call makes a new CA, so one start's CA never verifies another's.
func selfSigned(hosts []string) (tls.Certificate, []byte, error) {
	ips, names := selfSignedSANs(hosts)
	bundle, keyPEM, err := cert.GenerateSelfSignedCertKeyWithOptions(cert.SelfSignedCertKeyOptions{
		Host:         "localhost",
		AlternateIPs: ips,
		AlternateDNS: names,
	})
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("making the self-signed certificate: %w", err)
	}
	leafPEM, caPEM, err := splitServingBundle(bundle)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	pair, err := tls.X509KeyPair(leafPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("making the self-signed certificate: %w", err)
	}
	return pair, caPEM, nil
}

// selfSignedSANs sorts hosts into the IP and DNS subject alternative names of
// the self-signed certificate, after the loopback addresses, without
// duplicates or empty names. localhost is left out: it is the certificate's
// host.
func selfSignedSANs(hosts []string) (ips []net.IP, names []string) {
	ips = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	seen := map[string]bool{"localhost": true}
	for _, ip := range ips {
		seen[ip.String()] = true
	}
	for _, h := range hosts {
		ip := net.ParseIP(h)
		if ip != nil {
			h = ip.String()
		}
		if h == "" || seen[h] {
			continue
		}
		seen[h] = true
		if ip != nil {
			ips = append(ips, ip)
		} else {
			names = append(names, h)
		}
	}
	return ips, names
}

// splitServingBundle splits client-go's self-signed bundle (serving
// certificate, then its CA) into the serving certificate and the CA, in PEM,
// and checks that the CA signed the serving certificate: the CA file kcedar
// writes must verify what it serves.
func splitServingBundle(bundle []byte) (leafPEM, caPEM []byte, err error) {
	certs, err := cert.ParseCertsPEM(bundle)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the self-signed certificate: %w", err)
	}
	if len(certs) != 2 || !certs[1].IsCA {
		return nil, nil, fmt.Errorf("the self-signed bundle holds %d certificates, want a serving certificate and its CA", len(certs))
	}
	leaf, ca := certs[0], certs[1]
	if err := leaf.CheckSignatureFrom(ca); err != nil {
		return nil, nil, fmt.Errorf("the self-signed CA did not sign the serving certificate: %w", err)
	}
	if leafPEM, err = cert.EncodeCertificates(leaf); err != nil {
		return nil, nil, err
	}
	if caPEM, err = cert.EncodeCertificates(ca); err != nil {
		return nil, nil, err
	}
	return leafPEM, caPEM, nil
}

// RequireVerifiedClient refuses requests that did not present a client
// certificate verified against TLSOptions.ClientCAFile.
func RequireVerifiedClient(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 {
			http.Error(w, "a client certificate signed by the configured client CA is required", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}
