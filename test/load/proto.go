package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"time"
)

// proto: -proto, the HTTP version the load speaks: "h1" (HTTP/1.1, one
// request at a time on each of -conns connections) or "h2" (HTTP/2: -conns
// concurrent streams multiplexed over -h2-conns connections, one by
// default, as kube-apiserver's webhook client does).
var proto = "h1"

// h2Conns: -h2-conns.
var h2Conns = 1

// clients returns the client each of workers uses, and a function that
// closes their connections. Over HTTP/1.1 every worker has its own
// connection; over HTTP/2 the workers share h2Conns connections round
// robin, each opened by one request before the load starts (concurrent
// first requests could otherwise dial several).
func clients(pool *x509.CertPool, base string, workers int) ([]*http.Client, func(), error) {
	var transports []*http.Transport
	newTransport := func(h2 bool) *http.Transport {
		cfg := &tls.Config{RootCAs: pool}
		tr := &http.Transport{TLSClientConfig: cfg, MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1, ForceAttemptHTTP2: h2}
		if !h2 {
			cfg.NextProtos = []string{"http/1.1"}
		}
		transports = append(transports, tr)
		return tr
	}
	closeAll := func() {
		for _, tr := range transports {
			tr.CloseIdleConnections()
		}
	}
	out := make([]*http.Client, workers)
	switch proto {
	case "h1":
		for i := range out {
			out[i] = &http.Client{Transport: newTransport(false), Timeout: 10 * time.Second}
		}
	case "h2":
		shared := make([]*http.Client, max(1, h2Conns))
		for i := range shared {
			shared[i] = &http.Client{Transport: newTransport(true), Timeout: 10 * time.Second}
			if err := openH2(shared[i], base); err != nil {
				closeAll()
				return nil, nil, err
			}
		}
		for i := range out {
			out[i] = shared[i%len(shared)]
		}
	default:
		return nil, nil, fmt.Errorf("unknown -proto %q (h1 or h2)", proto)
	}
	return out, closeAll, nil
}

// openH2 opens c's connection with one request and checks that it speaks
// HTTP/2.
func openH2(c *http.Client, base string) error {
	resp, err := c.Get(base + "/healthz")
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.ProtoMajor != 2 {
		return fmt.Errorf("-proto h2: the server answered over %s", resp.Proto)
	}
	return nil
}

// protoName describes the load's protocol and connections.
func protoName(workers int) string {
	if proto == "h2" {
		return fmt.Sprintf("HTTP/2, %d streams over %d connection(s)", workers, max(1, h2Conns))
	}
	return fmt.Sprintf("HTTP/1.1, %d connections", workers)
}
