package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
)

// endpoint is what every webhook handler shares: the logger, the metrics,
// the tracer and the decision log.
type endpoint struct {
	logger            *slog.Logger
	metrics           *metrics
	tracer            trace.Tracer // nil: tracing off
	decisionLog       *DecisionLog
	authWarn          *warnLimited
	requireClientCert bool
}

// newEndpoint is the shared part of the handlers opts configures.
func newEndpoint(opts Options) (*endpoint, error) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	e := &endpoint{logger: logger, metrics: m, decisionLog: opts.DecisionLog, authWarn: newWarnLimited(logger), requireClientCert: opts.RequireClientCert}
	if opts.TracerProvider != nil {
		e.tracer = opts.TracerProvider.Tracer(tracerName)
	}
	return e, nil
}

// webhook is the handler of a webhook endpoint named name: h traced,
// refused to unverified clients (RequireClientCert), instrumented, and
// recovering from any panic.
func (e *endpoint) webhook(name string, h http.HandlerFunc) http.Handler {
	handler := e.traced(name, h)
	if e.requireClientCert {
		handler = RequireVerifiedClient(handler)
	}
	return e.recovering(e.instrument(name, handler))
}

// recovering answers 500 for a panic of h, and logs it.
func (e *endpoint) recovering(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				e.logger.Error("panic while serving", "path", r.URL.Path, "panic", v, "stack", string(debug.Stack()))
				http.Error(w, "internal error", http.StatusInternalServerError)
			}
		}()
		h.ServeHTTP(w, r)
	})
}

// decodeWebhook is every webhook handler's prologue: it reads the body,
// decodes it into v and checks its type with check. On failure it has
// written the error and returns false.
func (e *endpoint) decodeWebhook(w http.ResponseWriter, r *http.Request, endpoint string, v any, check func() error) bool {
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
		e.writeError(w, endpoint, err)
		return false
	}
	return true
}

type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.code = code
	r.ResponseWriter.WriteHeader(code)
}

// instrument records h's durations by status code, and warns of refused
// clients.
func (e *endpoint) instrument(endpoint string, h http.Handler) http.Handler {
	durations := newSeriesCache(func(code int) prometheus.Observer {
		return e.metrics.requestDuration.WithLabelValues(endpoint, strconv.Itoa(code))
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		h.ServeHTTP(rec, r)
		if rec.code == http.StatusUnauthorized {
			e.authWarn.warn("unauthenticated webhook request refused", "endpoint", endpoint, "remote", r.RemoteAddr)
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
		if decodeSARFast(body, sar) {
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

// writeError answers err: its code for a requestError (counted as a bad
// request), else 500.
func (e *endpoint) writeError(w http.ResponseWriter, endpoint string, err error) {
	code := http.StatusInternalServerError
	var re *requestError
	if errors.As(err, &re) {
		code = re.code
		e.metrics.badRequests.WithLabelValues(endpoint).Inc()
	}
	e.logger.Debug("request refused", "endpoint", endpoint, "code", code, "err", err)
	http.Error(w, err.Error(), code)
}

// jsonContentType is the Content-Type header of every JSON response, one
// slice shared by all (net/http only reads header values).
var jsonContentType = []string{"application/json"}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header()["Content-Type"] = jsonContentType
	_ = json.NewEncoder(w).Encode(v)
}
