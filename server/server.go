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
	"go.opentelemetry.io/otel/trace"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/kcedar/kcedar/cedar"
	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/handle"
	"github.com/kcedar/kcedar/internal/store"
)

// MaxBodyBytes bounds every request body.
const MaxBodyBytes = 1 << 20

// Options configure a Server.
type Options struct {
	Logger *slog.Logger
	// AdmissionEnforcement: on clusters without conditional authorization,
	// answer Allow for a conditional allow on requests admission is sure to
	// see, and enforce the conditions in the /v1/admit validating webhook.
	AdmissionEnforcement bool
	// RequireClientCert: the webhook endpoints (/v1/...) serve only clients
	// with a verified certificate (use with TLSOptions.ClientCAFile).
	RequireClientCert bool
	// AdmissionWebhookSees: with AdmissionEnforcement, reports whether the
	// admission webhook that enforces conditional allows is verified in
	// place and sees the writes of the user of username in groups (its
	// matchConditions leave some identities out); a conditional allow is
	// answered Allow only while it returns true for the review's user. nil:
	// never.
	AdmissionWebhookSees func(username string, groups []string) bool
	// AggregatedAPI: with AdmissionEnforcement, reports whether a group
	// and version may be served by an aggregated API server (its
	// APIService names a service) rather than by kube-apiserver itself.
	// kube-apiserver proxies such requests past its admission webhooks, so
	// a conditional allow on them is folded (Deny if a deny condition may
	// hold, else NoOpinion), never answered Allow. version "" or "*" is any
	// version of the group, group "*" any group. nil: every group version
	// may be (conditional allows are always folded); kcedar serve follows
	// the APIServices with an informer (webhooks.APIServices).
	AggregatedAPI func(group, version string) bool
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
	// TracerProvider, if set, traces every webhook call: a span per call
	// (kcedar.authorize, kcedar.conditions, kcedar.admit,
	// kcedar.validate_policy, ...), the child of the caller's span when the
	// request carries W3C trace context, with the decision, the deciding
	// policies and the engine's stats as attributes. nil: no tracing, at no
	// cost.
	TracerProvider trace.TracerProvider
}

// Server answers kube-apiserver's webhook calls with one authorizer.
type Server struct {
	authz authorizer.Authorizer
	// serving is the engine of the policy set serving now when authz is
	// kcedar's (nil otherwise); it is replaced (with all its caches) when
	// the set is.
	serving *engine.Serving
	// store is the reloading store behind the authorizer (kcedar serve);
	// nil for a fixed policy set.
	store   *store.Store
	logger  *slog.Logger
	metrics *metrics
	mux     *http.ServeMux
	enforce bool
	// webhookSees: the admission webhook that enforces conditional
	// allows is known to be installed.
	webhookSees func(username string, groups []string) bool
	// aggregated: a group version may be served by an aggregated API
	// server, whose requests kube-apiserver's admission never sees.
	aggregated  func(group, version string) bool
	ready       func() error
	degraded    func() string
	decisionLog *DecisionLog
	authWarn    *warnLimited
	tracer      trace.Tracer // nil: tracing off
	// draining: shutting down; /readyz answers 503 so load balancers and
	// kube-apiserver's endpoints stop sending new requests.
	draining atomic.Bool
	// collecting: a collection ahead of the next change runs (collectAhead).
	collecting atomic.Bool
}

// Drain makes /readyz answer 503 from now on: the first step of a graceful
// shutdown, before the listener closes.
func (s *Server) Drain() { s.draining.Store(true) }

// New returns a server deciding with authz. With kcedar's own authorizer (a
// *cedar.Authorizer) it serves every endpoint; any other
// authorizer.Authorizer (a union holding kcedar's, say) is served through
// that interface alone: SubjectAccessReviews, the callback in upstream's
// shape, health, readiness and metrics.
func New(authz authorizer.Authorizer, opts Options) *Server {
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	s := &Server{authz: authz, logger: logger, metrics: newMetrics(), mux: http.NewServeMux(), enforce: opts.AdmissionEnforcement,
		ready: opts.Ready, degraded: opts.Degraded, decisionLog: opts.DecisionLog, authWarn: newWarnLimited(logger), webhookSees: opts.AdmissionWebhookSees}
	if s.webhookSees == nil {
		s.webhookSees = func(string, []string) bool { return false }
	}
	if s.aggregated = opts.AggregatedAPI; s.aggregated == nil {
		s.aggregated = func(string, string) bool { return true }
	}
	if opts.TracerProvider != nil {
		s.tracer = opts.TracerProvider.Tracer(tracerName)
	}
	if k, ok := authz.(*cedar.Authorizer); ok && k != nil {
		h := handle.Authorizer(*k)
		s.serving, s.store = h.Serving(), h.Store()
	}
	if s.store != nil {
		s.observeStore()
	}
	webhook := func(name string, h http.HandlerFunc) http.Handler {
		handler := s.traced(name, h)
		if opts.RequireClientCert {
			handler = RequireVerifiedClient(handler)
		}
		return s.instrument(name, handler)
	}
	s.mux.Handle("POST /v1/authorize", webhook("authorize", s.handleAuthorize))
	s.mux.Handle("POST /v1/conditions", webhook("conditions", s.handleConditions))
	s.metrics.countBadRequestsOf("authorize", "conditions")
	if s.serving != nil {
		s.registerCacheMetrics(s.metrics.registry)
		s.mux.Handle("POST /v1/admit", webhook("admit", s.handleAdmit))
		s.registerReviews(webhook)
		s.metrics.countBadRequestsOf("admit", "resourceaccessreview", "rulesreview")
	}
	if opts.PolicyAdmission != nil {
		s.mux.Handle("POST /v1/validate-policy", webhook("validate-policy", opts.PolicyAdmission.ServeHTTP))
	}
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	s.mux.HandleFunc("GET /livez", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	s.mux.HandleFunc("GET /readyz", s.handleReadyz)
	s.mux.Handle("GET /metrics", promhttp.HandlerFor(s.metrics.registry, promhttp.HandlerOpts{}))
	return s
}

// observeStore hooks the store's reloads into the metrics.
func (s *Server) observeStore() {
	policies := s.store
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
		switch {
		case r.Err == nil && r.Changed && r.Incremental:
			// Built by the change: it allocated little, and a full
			// collection would cost as much as a full load's did.
			s.serving.Engine()
			s.collectAhead()
		case r.Err == nil && r.Changed:
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
}

// releaseReplacedSet runs after a reload swapped the policy set: it moves
// the server to the new set's engine, which drops the old engine and every
// cache it built, and collects them at once, so the heap goal (and with it
// RSS) follows the serving set instead of the largest transient of a
// reload (parsing and validating a large set allocates much more than the
// set keeps). The freed pages go back to the operating system by the
// runtime's background scavenger, not all at once: returning hundreds of
// MB in one call made the first decisions on the new set pay to fault
// fresh pages in. A reload is rare; one full collection is its cost.
func (s *Server) releaseReplacedSet() {
	s.serving.Engine()
	runtime.GC()
}

// collectAhead runs after a load by the change. Such a load allocates a
// few tens of MB, so after several the heap reaches its goal, and the
// collection (marking the whole serving set: hundreds of ms of CPU at
// 100,000 policies) would start inside whichever change comes next and
// slow it. When the heap is past most of its goal, it collects now, in the
// background, while nothing waits on it.
func (s *Server) collectAhead() {
	if !heapNearGoal(readHeap()) || !s.collecting.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer s.collecting.Store(false)
		runtime.GC()
	}()
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

// engineOr503 is the engine serving now; before a set is loaded it answers
// 503 and returns nil.
func (s *Server) engineOr503(w http.ResponseWriter) *engine.Engine {
	e := s.serving.Engine()
	if e == nil {
		http.Error(w, "no valid policy set is loaded", http.StatusServiceUnavailable)
	}
	return e
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
	if s.store == nil {
		s.readyFixed(w)
		return
	}
	cur := s.store.Current()
	if cur == nil || s.serving.Schema() == nil {
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

// readyFixed is /readyz for a fixed policy set, or another authorizer:
// ready once the engine can be built.
func (s *Server) readyFixed(w http.ResponseWriter) {
	if s.serving == nil {
		io.WriteString(w, "ok\n")
		return
	}
	e := s.serving.Engine()
	if e == nil {
		http.Error(w, "not ready: no valid policy set loaded", http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintf(w, "ok: serving %d policies (generation %d)\n", e.Policies().Len(), e.Generation())
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
	if sar, ok := v.(*sarRequest); ok {
		if json.Valid(body) && decodeSARFast(body, sar) {
			return nil
		}
		*sar = sarRequest{} // start over: the fast path may have set fields
	}
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
