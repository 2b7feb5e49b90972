package server

import "github.com/prometheus/client_golang/prometheus"

// Registry is the registry /metrics serves, for other parts of kcedar (the
// policy object source, build info) to add their metrics to.
func (s *Server) Registry() *prometheus.Registry { return s.metrics.registry }
