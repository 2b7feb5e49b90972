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
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/kcedar/kcedar/cedar"
	"github.com/kcedar/kcedar/internal/cedarlang/lint"
	"github.com/kcedar/kcedar/internal/cluster/namespaces"
	"github.com/kcedar/kcedar/internal/cluster/policyobjects"
	"github.com/kcedar/kcedar/internal/cluster/schemarefresh"
	"github.com/kcedar/kcedar/internal/cluster/webhooks"
	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/handle"
	"github.com/kcedar/kcedar/internal/lib/tracing"
	"github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/store"
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
// the server and what runs beside it.
type serveParts struct {
	srv        *server.Server
	store      *store.Store
	keys       *engine.Keyring
	objects    *policyObjects
	namespaces *namespaces.Informer        // nil without --namespace-objects
	verifier   *webhooks.Verifier          // nil unless the admission webhook is verified
	apis       *webhooks.APIServices       // nil without --admission-enforcement
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
	o.tls.Context, o.tls.Interval = ctx, o.reloadInterval
	tlsCfg, writeCA, err := o.tls.ConfigWriteCALater(o.logger)
	if err != nil {
		return &exitError{2, err}
	}
	p.srv.ObserveServingCertificate(tlsCfg)
	if err := o.start(ctx, p); err != nil {
		return err
	}
	ln, err := listenThen(o.listen, writeCA)
	if err != nil {
		return &exitError{2, err}
	}
	return serveTLS(ctx, ln, tlsCfg, p.srv, o.logger, o.shutdownDelay, o.shutdownTimeout)
}

// build loads the schema, the keys and the policies' machinery and builds
// the server; nothing runs yet.
func (o *serveOptions) build(ctx context.Context) (*serveParts, error) {
	schema, fingerprint, checker, err := o.loadSchema(ctx)
	if err != nil {
		return nil, err
	}
	p := &serveParts{}
	if p.keys, err = o.loadKeys(); err != nil {
		return nil, err
	}
	p.store = newPolicyStore(checker, o.policies, o.logger)
	p.store.Settle, p.store.AllowEmpty, p.store.MaxPolicyLoss, p.store.KeepForbids = o.reload.settle, o.reload.allowEmpty, o.reload.maxPolicyLoss, o.reload.keepForbids
	if p.objects, err = newPolicyObjects(&o.objects, o.clusterConfig, checker, p.store, o.logger); err != nil {
		return nil, &exitError{2, err}
	}
	if p.namespaces, err = o.namespaceInformer(); err != nil {
		return nil, &exitError{2, err}
	}
	dlog, logFile, err := o.decisionLog.open()
	if err != nil {
		return nil, &exitError{2, fmt.Errorf("--decision-log: %w", err)}
	}
	p.logFile = logFile
	p.objects.admission.OnRefused = func(r policyobjects.RefusedWrite) { dlog.Log(refusalRecord(r)) }
	if p.tracing, err = startTracing(ctx, o.logger); err != nil {
		return nil, err
	}
	opts := server.Options{DecisionLog: dlog, Logger: o.logger, AdmissionEnforcement: o.admission.enforcement,
		RequireClientCert: o.tls.ClientCAFile != "", PolicyAdmission: p.objects.admission, TracerProvider: p.tracing.TracerProvider()}
	opts.AdmissionWebhookSees, p.verifier = o.admission.verification(o.logger)
	if p.apis = o.admission.apiServices(o.logger); p.apis != nil {
		opts.AggregatedAPI = p.apis.MayBeAggregated
	}
	if p.objects.source != nil {
		opts.Ready = p.objects.source.Ready
	}
	if o.src.IsLive() && o.schemaRefresh > 0 {
		p.refresher, p.runRefresh = startSchemaRefresh(o.src, schema, fingerprint, o.schemaRefresh, p.store, p.objects, o.logger)
	}
	opts.Degraded = p.degraded
	p.srv = server.New(o.authorizer(schema, p), opts)
	if err := p.registerMetrics(); err != nil {
		return nil, err
	}
	if p.objects.source == nil {
		if err := p.store.Load(); err != nil {
			o.logger.Error("no valid policy set yet; not ready until the files are fixed (the problems are logged above)")
		}
	}
	return p, nil
}

// loadSchema loads the schema and the checker that serves the files, the
// objects and the admission webhook.
func (o *serveOptions) loadSchema(ctx context.Context) (*schemagen.Schema, string, *lint.Checker, error) {
	start := time.Now()
	schema, fingerprint, err := loadServeSchema(ctx, o.src)
	if err != nil {
		return nil, "", nil, fmt.Errorf("schema from %s: %w", o.src, err)
	}
	checker, err := lint.NewChecker(schema)
	if err != nil {
		return nil, "", nil, err
	}
	o.logger.Info("schema loaded", "from", o.src.String(), "resources", len(schema.Resources), "warnings", len(schema.Warnings), "took", time.Since(start).String())
	return schema, fingerprint, checker, nil
}

// loadKeys reads --conditions-key-file, or makes a random key.
func (o *serveOptions) loadKeys() (*engine.Keyring, error) {
	if o.keyFile == "" {
		o.logger.Warn("no --conditions-key-file: conditions are signed with a random key, valid only in this process until it restarts (run one replica, or share a key file)")
		return engine.RandomKeyring(), nil
	}
	keys, err := engine.LoadKeyFile(o.keyFile)
	if err != nil {
		return nil, &exitError{2, fmt.Errorf("--conditions-key-file: %w", err)}
	}
	return keys, nil
}

// degraded is /readyz's degraded detail: a schema the policies refuse, a
// status Lease that cannot be taken; "" when all is well.
func (p *serveParts) degraded() string {
	var problems []string
	if p.refresher != nil {
		if d := p.refresher.Degraded(); d != "" {
			problems = append(problems, d)
		}
	}
	if p.objects.status != nil {
		if d := p.objects.status.LeaseProblem(); d != "" {
			problems = append(problems, d)
		}
	}
	if d := p.objects.webhookProblem(); d != "" {
		problems = append(problems, d)
	}
	return strings.Join(problems, "; ")
}

// authorizer is kcedar's authorizer over the policy store: the engine of
// the set serving now, built with the namespace informer and --shadow.
func (o *serveOptions) authorizer(schema *schemagen.Schema, p *serveParts) *cedar.Authorizer {
	opts := engine.EngineOptions{CacheSize: engine.DefaultCacheSize, Shadow: o.shadow, EncodedOnly: true}
	if p.namespaces != nil {
		opts.Namespaces = p.namespaces
	}
	a := cedar.Authorizer(handle.NewAuthorizer(p.store, schema, engine.NewCodec(p.keys), opts))
	return &a
}

// registerMetrics adds the metrics of everything beside the server to its
// registry.
func (p *serveParts) registerMetrics() error {
	reg := p.srv.Registry()
	registerBuildInfo(reg)
	if p.namespaces != nil {
		if err := reg.Register(p.namespaces); err != nil { // the namespace informer's sync age
			return err
		}
	}
	if p.refresher != nil {
		if err := p.refresher.RegisterMetrics(reg); err != nil {
			return err
		}
	}
	if err := p.objects.admission.RegisterMetrics(reg); err != nil {
		return err
	}
	if err := p.objects.registerWebhookMetrics(reg); err != nil {
		return err
	}
	if p.objects.source != nil {
		if err := p.objects.source.RegisterMetrics(reg); err != nil {
			return err
		}
	}
	if p.objects.status != nil {
		if err := p.objects.status.RegisterMetrics(reg); err != nil {
			return err
		}
	}
	if p.verifier != nil {
		return reg.Register(p.verifier)
	}
	return nil
}

// start runs everything beside the server until ctx ends.
func (o *serveOptions) start(ctx context.Context, p *serveParts) error {
	watchFiles := func() { go p.store.Watch(ctx, o.reloadInterval) }
	if p.objects.source != nil {
		// Files load with the objects, once they have synced.
		p.objects.start(ctx, watchFiles, o.logger)
	} else {
		watchFiles()
	}
	if p.namespaces != nil {
		go p.namespaces.Run(ctx)
	}
	if p.runRefresh != nil {
		if err := p.runRefresh(ctx); err != nil {
			return fmt.Errorf("schema refresh: %w", err)
		}
	}
	if o.keyFile != "" {
		p.keys.WatchFile(ctx, o.keyFile, o.reloadInterval, o.logger)
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

// drainingHandler is what serveTLS serves: kcedar's *server.Server (tests
// wrap it to see requests arrive and the drain begin).
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
func refusalRecord(r policyobjects.RefusedWrite) server.DecisionRecord {
	return server.DecisionRecord{Time: time.Now(), User: r.User.Username, Groups: r.User.Groups, Verb: strings.ToLower(r.Operation),
		APIGroup: policyobjects.Group, Resource: r.Resource, Namespace: r.Namespace, Name: r.Name,
		Decision: "Deny", Refusal: r.Reason, Errors: []string{r.Message}}
}
