package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/store"
)

// MaxBodyBytes bounds every request body.
const MaxBodyBytes = 1 << 20

// Options configure a Server.
type Options struct {
	Logger *slog.Logger
	// Keys sign and verify conditions; nil means a random key, valid only in
	// this process until it restarts.
	Keys *engine.Keyring
	// AdmissionEnforcement: on clusters without conditional authorization,
	// answer Allow for a conditional allow on requests admission is sure to
	// see, and enforce the conditions in the /v1/admit validating webhook.
	AdmissionEnforcement bool
	// RequireClientCert: the webhook endpoints (/v1/...) serve only clients
	// with a verified certificate (use with TLSOptions.ClientCAFile).
	RequireClientCert bool
	// AdmissionWebhookVerified: with AdmissionEnforcement, reports whether
	// the admission webhook that enforces conditional allows is verified in
	// place (internal/cluster/webhooks); conditional allows are answered
	// Allow only while it returns true. nil: never.
	AdmissionWebhookVerified func() bool
	// Ready, if set, must return nil for /readyz to report ready (e.g. the
	// policy objects have synced from the API server).
	Ready func() error
	// Degraded, if set, describes a problem that leaves the server ready
	// (the last good set serves) but needs an operator: /readyz reports it
	// as "degraded" (e.g. a schema refresh the policies do not validate
	// against). "" when there is none.
	Degraded func() string
	// PolicyAdmission, if set, serves POST /v1/validate-policy: the
	// validating webhook for kcedar's own policy objects.
	PolicyAdmission http.Handler
	// DecisionLog, if set, gets a line per authorization decision.
	DecisionLog *DecisionLog
	// Namespaces fills resource.namespaceObject (for SubjectAccessReviews,
	// the conditions callback and the admission webhook alike); nil leaves
	// it unknown. See internal/cluster/namespaces.
	Namespaces entities.NamespaceLookup
	// Shadow evaluates every policy in audit mode (`kcedar serve --shadow`):
	// every answer is NoOpinion, and what the policies would have decided
	// goes to the decision log and kcedar_audit_decisions_total.
	Shadow bool
}

// Server answers kube-apiserver's webhook calls from one schema and the
// policy store.
type Server struct {
	schema  atomic.Pointer[schemagen.Schema]
	store   *store.Store
	logger  *slog.Logger
	metrics *metrics
	mux     *http.ServeMux
	codec   *engine.Codec
	enforce bool
	// shadow: every policy is in audit mode (Options.Shadow).
	shadow bool
	// engine is the authorizer of the policy set serving now; it is
	// replaced (with all its caches) when the set is.
	engine atomic.Pointer[engine.Engine]
	// webhookVerified: the admission webhook that enforces conditional
	// allows is known to be installed.
	webhookVerified func() bool
	ready           func() error
	degraded        func() string
	decisionLog     *DecisionLog
	authWarn        *warnLimited
	// draining: shutting down; /readyz answers 503 so load balancers and
	// kube-apiserver's endpoints stop sending new requests.
	draining   atomic.Bool
	namespaces entities.NamespaceLookup
}

// Drain makes /readyz answer 503 from now on: the first step of a graceful
// shutdown, before the listener closes.
func (s *Server) Drain() { s.draining.Store(true) }

// New returns a server deciding with schema and the policies in the store.
// It hooks the store's reloads into the metrics.
func New(schema *schemagen.Schema, policies *store.Store, opts Options) *Server {
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	keys := opts.Keys
	if keys == nil {
		keys = engine.RandomKeyring()
	}
	s := &Server{store: policies, logger: logger, metrics: newMetrics(), mux: http.NewServeMux(), codec: engine.NewCodec(keys), enforce: opts.AdmissionEnforcement, shadow: opts.Shadow}
	s.schema.Store(schema)
	s.ready = opts.Ready
	s.degraded = opts.Degraded
	s.decisionLog = opts.DecisionLog
	s.authWarn = newWarnLimited(logger)
	s.namespaces = opts.Namespaces
	s.webhookVerified = opts.AdmissionWebhookVerified
	if s.webhookVerified == nil {
		s.webhookVerified = func() bool { return false }
	}
	s.metrics.registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "kcedar_policy_file_reads_total",
		Help: "Reads of the policy files. A poll that finds every file's status (size, times, inode) as the serving set's read left it reads nothing.",
	}, func() float64 { return float64(policies.FileReads()) }))
	prev := policies.OnReload
	policies.OnReload = func(r store.ReloadResult) {
		var gen uint64
		if cur := policies.Current(); cur != nil {
			gen = cur.Generation
		}
		s.metrics.observeReload(r, gen)
		if r.Err == nil && r.Changed {
			s.releaseReplacedSet()
		}
		if prev != nil {
			prev(r)
		}
	}
	if cur := policies.Current(); cur != nil {
		s.metrics.observeServing(policies.Hash(), cur.Len(), cur.Generation)
		if policies.LastError() != nil {
			s.metrics.loadError.Set(1)
		}
	}
	webhook := func(name string, h http.HandlerFunc) http.Handler {
		var handler http.Handler = h
		if opts.RequireClientCert {
			handler = RequireVerifiedClient(handler)
		}
		return s.instrument(name, handler)
	}
	s.registerCacheMetrics(s.metrics.registry)
	if c, ok := opts.Namespaces.(prometheus.Collector); ok {
		s.metrics.registry.MustRegister(c) // the namespace informer's sync age
	}
	s.mux.Handle("POST /v1/authorize", webhook("authorize", s.handleAuthorize))
	s.mux.Handle("POST /v1/conditions", webhook("conditions", s.handleConditions))
	s.mux.Handle("POST /v1/admit", webhook("admit", s.handleAdmit))
	if opts.PolicyAdmission != nil {
		s.mux.Handle("POST /v1/validate-policy", webhook("validate-policy", opts.PolicyAdmission.ServeHTTP))
	}
	s.registerReviews(webhook)
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	s.mux.HandleFunc("GET /livez", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	s.mux.HandleFunc("GET /readyz", s.handleReadyz)
	s.mux.Handle("GET /metrics", promhttp.HandlerFor(s.metrics.registry, promhttp.HandlerOpts{}))
	return s
}

// releaseReplacedSet runs after a reload swapped the policy set: it moves
// the server to the new set's engine, which drops the old engine and every
// cache it built, and collects them at once, so the heap goal (and with it
// RSS) follows the serving set instead of the largest transient of a
// reload (parsing and validating a large set allocates much more than the
// set keeps). The freed pages go back to the operating system by the
// runtime's background scavenger, not all at once: returning hundreds of
// MB in one call made the first decisions on the new set pay to fault
// fresh pages in (p99 in the 5 s after a 100k reload: ~2.8x steady with
// debug.FreeOSMemory, ~1.5x with runtime.GC). A reload is rare; one full
// collection is its cost.
func (s *Server) releaseReplacedSet() {
	s.currentEngine()
	runtime.GC()
}

// Schema is the schema decisions use: the serving set's (a schema refresh
// swaps the set and its schema together, store.Store.Rebase), else the one
// the server was made with.
func (s *Server) Schema() *schemagen.Schema {
	if ps := s.store.Current(); ps != nil && ps.Schema != nil {
		return ps.Schema
	}
	return s.schema.Load()
}

// Authorizer is the engine of the policy set serving now, as the seams the
// handlers use, or nil before a set is loaded.
func (s *Server) Authorizer() engine.Interface {
	if e := s.currentEngine(); e != nil {
		return e
	}
	return nil
}

// currentEngine is the engine of the policy set serving now, or nil before
// one is loaded. Engines are built once per policy set and schema, so a
// reload drops every cache the previous set built. The set and the schema
// it was validated against are read in one atomic load.
func (s *Server) currentEngine() *engine.Engine {
	ps := s.store.Current()
	if ps == nil {
		return nil
	}
	schema := ps.Schema
	if schema == nil {
		schema = s.schema.Load()
	}
	if schema == nil {
		return nil
	}
	for {
		cur := s.engine.Load()
		if cur != nil && cur.Policies() == ps && cur.Schema() == schema {
			return cur
		}
		next := engine.NewEngine(schema, ps, s.codec, engine.EngineOptions{CacheSize: engine.DefaultCacheSize, Namespaces: s.namespaces, Shadow: s.shadow})
		if s.engine.CompareAndSwap(cur, next) {
			return next
		}
	}
}

// decodeWebhook is every webhook handler's prologue: it reads the body,
// decodes it into v and checks its type with check. On failure it has
// written the error and returns false.
func (s *Server) decodeWebhook(w http.ResponseWriter, r *http.Request, endpoint string, v any, check func() error) bool {
	buf := getBodyBuffer()
	defer putBodyBuffer(buf)
	err := readBody(w, r, buf)
	if err == nil {
		err = decodeJSON(buf.Bytes(), v)
	}
	if err == nil {
		err = check()
	}
	if err != nil {
		s.writeError(w, endpoint, err)
		return false
	}
	return true
}

// authorizerOr503 is the serving engine; before a set is loaded it answers
// 503 and returns nil.
func (s *Server) authorizerOr503(w http.ResponseWriter) engine.Interface {
	az := s.Authorizer()
	if az == nil {
		http.Error(w, "no valid policy set is loaded", http.StatusServiceUnavailable)
	}
	return az
}

// ServeHTTP implements http.Handler; no panic escapes it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		if v := recover(); v != nil {
			s.logger.Error("panic while serving", "path", r.URL.Path, "panic", v, "stack", string(debug.Stack()))
			http.Error(w, "internal error", http.StatusInternalServerError)
		}
	}()
	s.mux.ServeHTTP(w, r)
}

// handleReadyz: 503 while shutting down or before a good policy set; 200
// while a good set serves, "degraded" with the last reload's error and its
// age when the latest reload failed.
func (s *Server) handleReadyz(w http.ResponseWriter, _ *http.Request) {
	if s.draining.Load() {
		http.Error(w, "not ready: shutting down", http.StatusServiceUnavailable)
		return
	}
	if s.ready != nil {
		if err := s.ready(); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
	}
	cur := s.store.Current()
	if cur == nil || s.Schema() == nil {
		msg := "not ready: no valid policy set loaded"
		if err := s.store.LastError(); err != nil {
			msg += ": " + err.Error()
		}
		http.Error(w, msg, http.StatusServiceUnavailable)
		return
	}
	serving := fmt.Sprintf("serving %d policies (generation %d, hash %.12s)", cur.Len(), cur.Generation, s.store.Hash())
	var problems []string
	if at, err := s.store.LastFailure(); err != nil {
		// Still ready: the last good set serves. Taking every replica out of
		// service for a bad edit would fail the whole cluster's requests.
		problems = append(problems, fmt.Sprintf("the latest reload failed %s ago, fix the policy files: %v", time.Since(at).Round(time.Second), err))
	}
	if s.degraded != nil {
		if d := s.degraded(); d != "" {
			problems = append(problems, d)
		}
	}
	if len(problems) > 0 {
		fmt.Fprintf(w, "degraded: %s; %s\n", serving, strings.Join(problems, "; "))
		return
	}
	fmt.Fprintf(w, "ok: %s\n", serving)
}

type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.code = code
	r.ResponseWriter.WriteHeader(code)
}

func (s *Server) instrument(endpoint string, h http.Handler) http.Handler {
	durations := newSeriesCache(func(code int) prometheus.Observer {
		return s.metrics.requestDuration.WithLabelValues(endpoint, strconv.Itoa(code))
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		h.ServeHTTP(rec, r)
		if rec.code == http.StatusUnauthorized {
			s.authWarn.warn("unauthenticated webhook request refused", "endpoint", endpoint, "remote", r.RemoteAddr)
		}
		durations.get(rec.code).Observe(time.Since(start).Seconds())
	})
}

// requestError is a 4xx with a message for the caller.
type requestError struct {
	code int
	msg  string
}

func (e *requestError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return &requestError{code: http.StatusBadRequest, msg: fmt.Sprintf(format, args...)}
}

// typeMeta is read first to refuse the wrong kinds before decoding the rest.
type typeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

// readBody reads a bounded body into buf.
func readBody(w http.ResponseWriter, r *http.Request, buf *bytes.Buffer) error {
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		return &requestError{code: http.StatusUnsupportedMediaType, msg: "content type " + ct + " is not supported; send application/json"}
	}
	if n := r.ContentLength; n > 0 && n <= MaxBodyBytes {
		buf.Grow(int(n) + bytes.MinRead) // ReadFrom wants MinRead free before it sees EOF
	}
	if _, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, MaxBodyBytes)); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return &requestError{code: http.StatusRequestEntityTooLarge, msg: fmt.Sprintf("body is larger than %d bytes", MaxBodyBytes)}
		}
		return badRequest("reading body: %v", err)
	}
	return nil
}

// checkType refuses any apiVersion and kind but the accepted ones.
func checkType(got typeMeta, accepted ...typeMeta) error {
	for _, a := range accepted {
		if got == a {
			return nil
		}
	}
	want := make([]string, len(accepted))
	for i, a := range accepted {
		want[i] = a.APIVersion + " " + a.Kind
	}
	return badRequest("apiVersion %q kind %q is not accepted here; send %s", got.APIVersion, got.Kind, strings.Join(want, " or "))
}

// decodeJSON decodes body into v, refusing trailing data. Unknown fields are
// ignored, so newer API servers can add fields.
func decodeJSON(body []byte, v any) error {
	// json.Unmarshal accepts exactly what the decoder below accepts (one
	// value, then only white space) without copying the body first; the
	// decoder is kept for the messages of what they both refuse.
	if json.Unmarshal(body, v) == nil {
		return nil
	}
	return decodeWithDecoder(body, v)
}

// decodeWithDecoder is decodeJSON by a json.Decoder, whose messages say
// what is wrong with a body.
func decodeWithDecoder(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		return badRequest("decoding body: %v", err)
	}
	// Only white space may follow. (Decoder.More is no test: it is false
	// before a stray '}' or ']'.)
	if _, err := dec.Token(); err != io.EOF {
		return badRequest("trailing data after the JSON object")
	}
	return nil
}

func (s *Server) writeError(w http.ResponseWriter, endpoint string, err error) {
	code := http.StatusInternalServerError
	var re *requestError
	if errors.As(err, &re) {
		code = re.code
		s.metrics.badRequests.WithLabelValues(endpoint).Inc()
	}
	s.logger.Debug("request refused", "endpoint", endpoint, "code", code, "err", err)
	http.Error(w, err.Error(), code)
}

// jsonContentType is the Content-Type header of every JSON response, one
// slice shared by all (net/http only reads header values).
var jsonContentType = []string{"application/json"}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header()["Content-Type"] = jsonContentType
	_ = json.NewEncoder(w).Encode(v)
}
