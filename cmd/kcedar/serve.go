package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/kcedar/kcedar/cedar"
	"github.com/kcedar/kcedar/internal/cluster/namespaces"
	"github.com/kcedar/kcedar/internal/cluster/schemarefresh"
	"github.com/kcedar/kcedar/internal/cluster/webhooks"
	"github.com/kcedar/kcedar/internal/lib/tracing"
	gen "github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/residual"
	publicschema "github.com/kcedar/kcedar/schemagen"
	"github.com/kcedar/kcedar/server"
)

func init() { rootCmd.AddCommand(newServeCmd()) }

const serveLong = `Serve kube-apiserver's authorization webhook: POST /v1/authorize takes a
SubjectAccessReview (authorization.k8s.io/v1) and answers Allow, Deny or
NoOpinion from the Cedar policies. Policies are validated against the schema
(the embedded Kubernetes default unless --kubeconfig or --from-dir say
otherwise) and reloaded when their files change, once the files are stable
(--policy-settle; renames and ConfigMap updates at once); an invalid edit, an
empty set or a refused shrink (--max-policy-loss, --keep-forbids) keeps the
last good set serving. With --policy-objects, the policies of CedarPolicy and
NamespacedCedarPolicy objects join the files' (one set, one validation), and
/readyz is 503 until the objects have synced from the API server. With a
live cluster's schema (--live, --kubeconfig), the schema follows the
cluster's API (CRDs and APIServices are watched, discovery is re-read every
--schema-refresh-interval): the policies move to a new schema only if all of
them validate against it; otherwise the last good set keeps serving with the
previous schema, and the objects it refuses report Accepted=False. POST
/v1/validate-policy is the validating webhook for those kinds. Also serves
GET /healthz, /livez, /readyz and /metrics. On SIGTERM /readyz turns 503, the
listener closes after --shutdown-delay and in-flight requests get
--shutdown-timeout.

One connection to the cluster serves every cluster feature (the live schema,
policy objects, the status Lease, namespace objects and the admission webhook
check): --kubeconfig and --context, else KUBECONFIG, ~/.kube/config, else
the in-cluster config.`

func newServeCmd() *cobra.Command {
	o := &serveOptions{}
	cmd := &cobra.Command{
		Use:   "serve --policies PATH...",
		Short: "Serve SubjectAccessReview decisions over HTTPS",
		Long:  serveLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Complete(); err != nil {
				return &exitError{2, err}
			}
			if err := o.Validate(); err != nil {
				return &exitError{2, err}
			}
			return o.Run(cmd.Context())
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

// serveParts are what serve builds from its options before anything runs:
// the server, its policy source and authorizer, and what runs beside them.
type serveParts struct {
	srv        *server.Server
	source     *cedar.FileSource
	registry   *prometheus.Registry // what /metrics serves
	keys       *residual.Keyring    // nil: a random key
	objects    *policyObjects       // nil without --policy-objects
	namespaces *namespaces.Informer // nil without --namespace-objects
	verifier   *webhooks.Verifier   // nil unless the admission webhook is verified
	apis       *webhooks.APIServices
	refresher  *schemarefresh.Refresher    // nil without schema refresh
	runRefresh func(context.Context) error // starts the refresher
	logFile    io.Closer                   // the decision log's file, if any
	tracing    *tracing.Provider           // nil: tracing off (no OTEL_* variable turns it on)
}

// Run serves until a signal, then shuts down gracefully.
func (o *serveOptions) Run(ctx context.Context) error {
	p, err := o.build(ctx)
	if err != nil {
		return err
	}
	if p.logFile != nil {
		defer p.logFile.Close()
	}
	defer flushTraces(p.tracing, o.logger, o.shutdownTimeout)
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	o.tls.Interval = o.reloadInterval
	tlsCfg, writeCA, err := o.tls.ConfigWriteCALater(ctx, o.logger)
	if err != nil {
		return &exitError{2, err}
	}
	p.registry.MustRegister(server.ServingCertificateExpiry(tlsCfg))
	if err := o.start(ctx, p); err != nil {
		return err
	}
	ln, err := listenThen(o.listen, writeCA)
	if err != nil {
		return &exitError{2, err}
	}
	return serveTLS(ctx, ln, tlsCfg, withMetrics(p.srv, p.registry), o.logger, o.shutdownDelay, o.shutdownTimeout)
}

// build loads the schema and the keys, and builds the policy source, the
// authorizer and the server on them; nothing runs yet.
func (o *serveOptions) build(ctx context.Context) (*serveParts, error) {
	schema, fingerprint, err := o.loadSchema(ctx)
	if err != nil {
		return nil, err
	}
	p := &serveParts{registry: newServeRegistry()}
	if p.keys, err = o.loadKeys(); err != nil {
		return nil, err
	}
	if p.namespaces, err = o.namespaceInformer(); err != nil {
		return nil, &exitError{2, err}
	}
	dlog, logFile, err := o.decisionLog.open()
	if err != nil {
		return nil, &exitError{2, fmt.Errorf("--decision-log: %w", err)}
	}
	p.logFile = logFile
	if p.tracing, err = startTracing(ctx, o.logger); err != nil {
		return nil, err
	}
	authz, err := o.buildPolicies(p, schema, dlog)
	if err != nil {
		return nil, err
	}
	if o.src.IsLive() && o.schemaRefresh > 0 {
		p.refresher, p.runRefresh = startSchemaRefresh(o.src, schema, fingerprint, o.schemaRefresh, p.source, p.objects, o.logger)
	}
	if p.srv, err = server.New(authz, o.serverOptions(p, authz, dlog)); err != nil {
		return nil, err
	}
	return p, p.registerMetrics()
}

// buildPolicies builds the policy source (files, and policy objects) and the
// authorizer over it, and subscribes serve's collection policy to its
// loads.
func (o *serveOptions) buildPolicies(p *serveParts, schema *gen.Schema, dlog *server.DecisionLog) (*cedar.Authorizer, error) {
	public := gen.ToPublic(schema).(*publicschema.Schema)
	opts := cedar.FileSourceOptions{Logger: o.logger, Settle: o.reload.settle, ReloadInterval: o.reloadInterval, AllowEmpty: o.reload.allowEmpty,
		MaxPolicyLoss: o.reload.maxPolicyLoss, KeepForbids: o.reload.keepForbids, Registerer: p.registry,
		OnRefusedWrite: func(r cedar.RefusedWrite) { dlog.Log(refusalRecord(r)) }}
	var err error
	if p.objects, err = newPolicyObjects(&o.objects, o.clusterConfig, o.logger); err != nil {
		return nil, &exitError{2, err}
	}
	opts.PolicyObjects = p.objects.source()
	if p.source, err = cedar.NewFileSource(public, o.policies, opts); err != nil {
		return nil, &exitError{2, err}
	}
	p.objects.follow(p.source)
	aopts := cedar.Options{Keys: p.keys, Shadow: o.shadow, Registerer: p.registry}
	if p.namespaces != nil {
		aopts.Namespaces = p.namespaces
	}
	authz, err := cedar.New(p.source, public, aopts)
	if err != nil {
		return nil, err
	}
	// After the authorizer, which moves to each new set first.
	gc := newCollector(o.gcHeadroomBytes)
	p.source.Subscribe(gc.reloaded)
	if p.objects == nil {
		// The first set loaded with the source: its transient garbage goes
		// before serving starts.
		runtime.GC()
		gc.keepHeadroom()
	}
	return authz, nil
}

// serverOptions are the server's pieces: kcedar's authorizer on every
// endpoint, the policy webhook, the decision log, readiness.
func (o *serveOptions) serverOptions(p *serveParts, authz *cedar.Authorizer, dlog *server.DecisionLog) server.Options {
	opts := server.Options{Logger: o.logger, Registerer: p.registry, TracerProvider: p.tracing.TracerProvider(), DecisionLog: dlog,
		RequireClientCert: o.tls.ClientCAFile != "", Admitter: authz, Reviewer: authz, PolicyAdmission: p.source.PolicyWebhook(),
		Ready: p.source.Ready, Status: func() string { return p.source.Status().String() }, Degraded: p.degraded}
	if o.admission.enforcement {
		opts.AdmissionEnforcer = authz
	}
	opts.AdmissionWebhookSees, p.verifier = o.admission.verification(o.logger)
	if p.apis = o.admission.apiServices(o.logger); p.apis != nil {
		opts.AggregatedAPI = p.apis.MayBeAggregated
	}
	return opts
}

// loadSchema loads the schema; for a live cluster also the fingerprint of
// its documents, for schema refresh.
func (o *serveOptions) loadSchema(ctx context.Context) (*gen.Schema, string, error) {
	start := time.Now()
	schema, fingerprint, err := loadServeSchema(ctx, o.src)
	if err != nil {
		return nil, "", fmt.Errorf("schema from %s: %w", o.src, err)
	}
	o.logger.Info("schema loaded", "from", o.src.String(), "resources", len(schema.Resources), "warnings", len(schema.Warnings), "took", time.Since(start).String())
	return schema, fingerprint, nil
}

// loadKeys reads --conditions-key-file; nil (a random key) without it.
func (o *serveOptions) loadKeys() (*residual.Keyring, error) {
	if o.keyFile == "" {
		o.logger.Warn("no --conditions-key-file: conditions are signed with a random key, valid only in this process until it restarts (run one replica, or share a key file)")
		return nil, nil
	}
	keys, err := residual.LoadKeyFile(o.keyFile)
	if err != nil {
		return nil, &exitError{2, fmt.Errorf("--conditions-key-file: %w", err)}
	}
	return keys, nil
}

// degraded is /readyz's degraded detail: a failed reload the last good set
// outlives, a status Lease that cannot be taken, a schema the policies
// refuse, an unverified policy webhook; "" when all is well.
func (p *serveParts) degraded() string {
	var problems []string
	if d := p.source.Status().Degraded(); d != "" {
		problems = append(problems, d)
	}
	if p.refresher != nil {
		if d := p.refresher.Degraded(); d != "" {
			problems = append(problems, d)
		}
	}
	if d := p.objects.webhookProblem(); d != "" {
		problems = append(problems, d)
	}
	return strings.Join(problems, "; ")
}

// registerMetrics adds the metrics of what runs beside the server to the
// registry.
func (p *serveParts) registerMetrics() error {
	if p.namespaces != nil {
		if err := p.registry.Register(p.namespaces); err != nil { // the namespace informer's sync age
			return err
		}
	}
	if p.refresher != nil {
		if err := p.refresher.RegisterMetrics(p.registry); err != nil {
			return err
		}
	}
	if err := p.objects.registerWebhookMetrics(p.registry); err != nil {
		return err
	}
	if p.verifier != nil {
		return p.registry.Register(p.verifier)
	}
	return nil
}

// start runs everything beside the server until ctx ends.
func (o *serveOptions) start(ctx context.Context, p *serveParts) error {
	if p.objects != nil {
		p.objects.start(ctx, p.source, o.logger)
	} else {
		go func() { _ = p.source.Run(ctx) }()
	}
	if p.namespaces != nil {
		go p.namespaces.Run(ctx)
	}
	if p.runRefresh != nil {
		if err := p.runRefresh(ctx); err != nil {
			return fmt.Errorf("schema refresh: %w", err)
		}
	}
	if p.keys != nil {
		if err := p.keys.WatchFile(ctx, o.keyFile, o.reloadInterval, o.logger); err != nil {
			return err
		}
	}
	if p.verifier != nil {
		go p.verifier.Run(ctx, func() (kubernetes.Interface, error) { return o.clusterClient("--admission-enforcement") })
	}
	if p.apis != nil {
		go p.apis.Run(ctx, func() (dynamic.Interface, error) {
			cfg, err := o.clusterConfig("--admission-enforcement")
			if err != nil {
				return nil, err
			}
			return dynamic.NewForConfig(cfg)
		})
	}
	return nil
}

// listenThen binds listen, then runs after (which writes --write-ca): a CA
// file appears only for a server that is listening.
func listenThen(listen string, after func() error) (net.Listener, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("%w (is another kcedar serve running? pick another --listen)", err)
	}
	if err := after(); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// drainingHandler is what serveTLS serves: kcedar's *server.Server with
// /metrics (tests wrap it to see requests arrive and the drain begin).
type drainingHandler interface {
	http.Handler
	Drain() // /readyz answers 503 from now on
}

// serveTLS serves on ln until ctx ends, then shuts down gracefully: /readyz
// turns 503 (srv.Drain), the listener stays open for delay (a second signal
// cuts it short), then closes, and in-flight requests get timeout to finish.
// The last log line says how it ended.
func serveTLS(ctx context.Context, ln net.Listener, cfg *tls.Config, srv drainingHandler, logger *slog.Logger, delay, timeout time.Duration) error {
	var inFlight atomic.Int64
	hs := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			inFlight.Add(1)
			defer inFlight.Add(-1)
			srv.ServeHTTP(w, r)
		}),
		TLSConfig:         cfg,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          log.New(server.TLSErrorLog(logger), "", 0), // TLS handshake failures at WARN, rate limited
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.ServeTLS(ln, "", "") }()
	logger.Info("serving", "address", ln.Addr().String())
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	begin := time.Now()
	srv.Drain()
	logger.Info("shutting down: /readyz answers 503; the listener closes after the delay", "delay", delay.String(), "timeout", timeout.String())
	// A second signal skips the rest of the delay.
	again := make(chan os.Signal, 1)
	signal.Notify(again, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(again)
	select {
	case <-time.After(delay):
	case <-again:
		logger.Warn("second signal: closing the listener now")
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := hs.Shutdown(shutdownCtx)
	how, level := "drained", slog.LevelInfo
	aborted := inFlight.Load()
	if err != nil {
		how, level = "timeout", slog.LevelWarn
		_ = hs.Close()
	}
	logger.Log(context.Background(), level, "shutdown complete", "how", how, "took", time.Since(begin).Round(time.Millisecond).String(), "aborted_requests", aborted)
	if err != nil {
		return fmt.Errorf("shutdown: %d requests did not finish within --shutdown-timeout %s", aborted, timeout)
	}
	return nil
}

// refusalRecord is the decision log's line for a refused write of a policy
// object: a Deny of the write, with the refusal's reason and message.
func refusalRecord(r cedar.RefusedWrite) server.DecisionRecord {
	return server.DecisionRecord{Time: time.Now(), User: r.User.Username, Groups: r.User.Groups, Verb: strings.ToLower(r.Operation),
		APIGroup: policyObjectsGroup, Resource: r.Resource, Namespace: r.Namespace, Name: r.Name,
		Decision: "Deny", Refusal: r.Reason, Errors: []string{r.Message}}
}
