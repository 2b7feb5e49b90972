package server

import (
	"crypto/tls"
	"crypto/x509"

	"github.com/prometheus/client_golang/prometheus"
)

// ServingCertificateExpiry is the metric
// kcedar_serving_certificate_expiry_timestamp_seconds: when the certificate
// cfg serves now expires (the self-signed one, or TLSOptions.CertFile as
// last reloaded). An alert on it warns before the API server's webhook
// calls start failing their TLS handshakes. Register it once, for the
// configuration the listener serves:
//
//	registry.MustRegister(server.ServingCertificateExpiry(tlsConfig))
func ServingCertificateExpiry(cfg *tls.Config) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "kcedar_serving_certificate_expiry_timestamp_seconds",
		Help: "When the serving certificate kcedar presents now expires (its NotAfter, Unix seconds; 0 when there is none). It follows reloads of the certificate files.",
	}, func() float64 {
		if leaf := servingLeaf(cfg); leaf != nil {
			return float64(leaf.NotAfter.Unix())
		}
		return 0
	})
}

// servingLeaf is the leaf certificate cfg presents to a client now.
func servingLeaf(cfg *tls.Config) *x509.Certificate {
	var cert *tls.Certificate
	switch {
	case cfg.GetCertificate != nil:
		c, err := cfg.GetCertificate(&tls.ClientHelloInfo{})
		if err != nil {
			return nil
		}
		cert = c
	case len(cfg.Certificates) > 0:
		cert = &cfg.Certificates[0]
	}
	if cert == nil || len(cert.Certificate) == 0 {
		return nil
	}
	if cert.Leaf != nil {
		return cert.Leaf
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return nil
	}
	return leaf
}
