package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/kcedar/kcedar/internal/cedarlang/lint"
	"github.com/kcedar/kcedar/internal/cluster/schemarefresh"
	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/server"
	"github.com/kcedar/kcedar/internal/store"
)

func init() { rootCmd.AddCommand(newServeCmd()) }

func newServeCmd() *cobra.Command {
	var (
		listen               string
		policies             []string
		src                  schemaSource
		tlsOpts              server.TLSOptions
		reloadInterval       time.Duration
		logLevel             string
		keyFile              string
		admissionEnforcement bool
		webhookKubeconfig    string
		webhookName          string
		webhookInterval      time.Duration
		unverifiedWebhook    bool
		objects              objectOptions
		decisionLog          decisionLogOptions
		settle               time.Duration
		allowEmpty           bool
		maxPolicyLoss        float64
		keepForbids          bool
		shutdownDelay        time.Duration
		shutdownTimeout      time.Duration
		nsObjects            bool
		nsMaxStaleness       time.Duration
		schemaRefresh        time.Duration
	)
	cmd := &cobra.Command{
		Use:   "serve --policies PATH...",
		Short: "Serve SubjectAccessReview decisions over HTTPS",
		Long: `Serve kube-apiserver's authorization webhook: POST /v1/authorize takes a
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
--shutdown-timeout.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(policies) == 0 && !objects.enabled {
				return &exitError{2, errors.New("--policies or --policy-objects is required (--policies: a file or directory of .cedar files; repeatable)")}
			}
			logger, err := newLogger(logLevel)
			if err != nil {
				return &exitError{2, err}
			}
			if err := src.Validate(); err != nil {
				return &exitError{2, err}
			}
			if admissionEnforcement && webhookKubeconfig == "" && !unverifiedWebhook {
				return &exitError{2, errors.New("--admission-enforcement needs --admission-webhook-kubeconfig, so kcedar can verify that the ValidatingWebhookConfiguration enforcing its conditions is installed (or --unverified-admission-webhook to skip that check deliberately)")}
			}
			start := time.Now()
			schema, fingerprint, err := loadServeSchema(cmd.Context(), src)
			if err != nil {
				return fmt.Errorf("schema from %s: %w", src, err)
			}
			// One checker (and its validator) serves the files, the objects
			// and the admission webhook.
			checker, err := lint.NewChecker(schema)
			if err != nil {
				return err
			}
			logger.Info("schema loaded", "from", src.String(), "resources", len(schema.Resources), "warnings", len(schema.Warnings), "took", time.Since(start).String())
			keys := engine.RandomKeyring()
			if keyFile != "" {
				if keys, err = engine.LoadKeyFile(keyFile); err != nil {
					return &exitError{2, fmt.Errorf("--conditions-key-file: %w", err)}
				}
			} else {
				logger.Warn("no --conditions-key-file: conditions are signed with a random key, valid only in this process until it restarts (run one replica, or share a key file)")
			}
			if maxPolicyLoss < 0 || maxPolicyLoss > 1 {
				return &exitError{2, fmt.Errorf("--max-policy-loss %g: give a share between 0 (off) and 1", maxPolicyLoss)}
			}
			store := newPolicyStore(checker, policies, logger)
			store.Settle, store.AllowEmpty, store.MaxPolicyLoss, store.KeepForbids = settle, allowEmpty, maxPolicyLoss, keepForbids
			po, err := newPolicyObjects(&objects, checker, store, logger)
			if err != nil {
				return &exitError{2, err}
			}
			dlog, dlogFile, err := decisionLog.open()
			if err != nil {
				return &exitError{2, fmt.Errorf("--decision-log: %w", err)}
			}
			if dlogFile != nil {
				defer dlogFile.Close()
			}
			nsInformer, nsLookup, err := namespaceInformer(src, nsObjects || src.IsLive(), nsMaxStaleness)
			if err != nil {
				return &exitError{2, err}
			}
			opts := server.Options{Namespaces: nsLookup, DecisionLog: dlog, Logger: logger, Keys: keys, AdmissionEnforcement: admissionEnforcement, RequireClientCert: tlsOpts.ClientCAFile != "", UnverifiedAdmissionWebhook: unverifiedWebhook, PolicyAdmission: po.admission}
			if po.source != nil {
				opts.Ready = po.source.Ready
			}
			if schemaRefresh < 0 {
				return &exitError{2, fmt.Errorf("--schema-refresh-interval %s: give a duration, or 0 to turn schema refresh off", schemaRefresh)}
			}
			var refresher *schemarefresh.Refresher
			var runRefresh func(context.Context) error
			if src.IsLive() && schemaRefresh > 0 {
				refresher, runRefresh = startSchemaRefresh(src, schema, fingerprint, schemaRefresh, store, po, logger)
				opts.Degraded = refresher.Degraded
			}
			srv := server.New(schema, store, opts)
			registerBuildInfo(srv.Registry())
			if refresher != nil {
				if err := refresher.RegisterMetrics(srv.Registry()); err != nil {
					return err
				}
			}
			if po.source != nil {
				if err := po.source.RegisterMetrics(srv.Registry()); err != nil {
					return err
				}
			} else if err := store.Load(); err != nil {
				logger.Error("no valid policy set yet; not ready until the files are fixed (the problems are logged above)")
			}
			if host, _, err := net.SplitHostPort(listen); err == nil {
				tlsOpts.Hosts = append(tlsOpts.Hosts, host)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			tlsOpts.Context, tlsOpts.Interval = ctx, reloadInterval
			tlsCfg, writeCA, err := tlsOpts.ConfigWriteCALater(logger)
			if err != nil {
				return &exitError{2, err}
			}
			if po.source != nil {
				// Files load with the objects, once they have synced.
				po.start(ctx, func() { go store.Watch(ctx, reloadInterval) }, logger)
			} else {
				go store.Watch(ctx, reloadInterval)
			}
			if nsInformer != nil {
				go nsInformer.Run(ctx)
			}
			if runRefresh != nil {
				if err := runRefresh(ctx); err != nil {
					return fmt.Errorf("schema refresh: %w", err)
				}
			}
			if keyFile != "" {
				go keys.WatchFile(ctx, keyFile, reloadInterval, logger)
			}
			if admissionEnforcement && webhookKubeconfig != "" {
				go srv.WatchAdmissionWebhook(ctx, webhookKubeconfig, webhookName, webhookInterval)
			}
			ln, err := listenThen(listen, writeCA)
			if err != nil {
				return &exitError{2, err}
			}
			return serveTLS(ctx, ln, tlsCfg, srv, logger, shutdownDelay, shutdownTimeout)
		},
	}
	f := cmd.Flags()
	f.StringVar(&listen, "listen", "127.0.0.1:8443", "address to serve HTTPS on")
	f.StringArrayVar(&policies, "policies", nil, "policy file or directory of *.cedar files (repeatable)")
	src.AddFlags(f)
	f.StringVar(&tlsOpts.CertFile, "tls-cert-file", "", "serving certificate (PEM); reloaded when it changes")
	f.StringVar(&tlsOpts.KeyFile, "tls-private-key-file", "", "serving certificate's private key (PEM)")
	f.StringVar(&tlsOpts.ClientCAFile, "client-ca-file", "", "serve /v1/* only to clients with a certificate signed by this CA (the API server's); /healthz, /readyz and /metrics stay open")
	f.StringVar(&tlsOpts.WriteCA, "write-ca", "", "without --tls-cert-file: write the self-signed serving CA here")
	f.StringArrayVar(&tlsOpts.Hosts, "tls-san", nil, "extra host name or IP for the self-signed certificate (repeatable)")
	f.DurationVar(&reloadInterval, "reload-interval", 2*time.Second, "how often to check the policy, key and certificate files for changes when no file system event says so (events are watched too)")
	f.DurationVar(&settle, "policy-settle", store.DefaultSettle, "load changed policy files only once they read the same twice this far apart (a file renamed into place or a ConfigMap update loads at once); 0 loads what is read")
	f.BoolVar(&allowEmpty, "allow-empty-policy-set", false, "accept a policy set with no policies (it answers NoOpinion to everything); by default an empty set is a load error and the last good set keeps serving")
	f.Float64Var(&maxPolicyLoss, "max-policy-loss", 0, "refuse a reload that removes more than this share of the serving policies (e.g. 0.5); 0 turns the check off")
	f.BoolVar(&keepForbids, "keep-forbids", false, "refuse a reload that removes any forbid policy (by id)")
	f.DurationVar(&shutdownDelay, "shutdown-delay", 5*time.Second, "on SIGTERM, answer /readyz 503 for this long before closing the listener, so endpoints and load balancers stop sending requests")
	f.DurationVar(&shutdownTimeout, "shutdown-timeout", 20*time.Second, "after the listener closes, wait this long for in-flight requests before closing their connections")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&keyFile, "conditions-key-file", "", "keys that sign conditions, shared by replicas: lines \"<id> <base64 secret>\", the first signs, all verify (rotation); reloaded when it changes")
	f.StringVar(&webhookKubeconfig, "admission-webhook-kubeconfig", "", "with --admission-enforcement: kubeconfig to read the ValidatingWebhookConfiguration with; conditional allows are answered Allow only while it is verified in place")
	f.StringVar(&webhookName, "admission-webhook-name", "kcedar-conditions", "name of the ValidatingWebhookConfiguration that enforces conditions")
	f.DurationVar(&webhookInterval, "admission-webhook-check-interval", 30*time.Second, "how often to verify the ValidatingWebhookConfiguration")
	f.BoolVar(&unverifiedWebhook, "unverified-admission-webhook", false, "with --admission-enforcement: do not verify the ValidatingWebhookConfiguration (only if something else guarantees it is installed)")
	objects.addFlags(f)
	decisionLog.addFlags(f)
	f.BoolVar(&nsObjects, "namespace-objects", false, "fill resource.namespaceObject from an informer on Namespaces of the cluster (--live/--kubeconfig/--context, else KUBECONFIG, ~/.kube/config or in-cluster); on by default with --live or --kubeconfig. Without it namespaceObject is unknown")
	f.DurationVar(&schemaRefresh, "schema-refresh-interval", 5*time.Minute, "with a live cluster's schema (--live, --kubeconfig): how often to re-read discovery for changes to the cluster's API, besides watching CustomResourceDefinitions and APIServices; 0 turns schema refresh off (the schema read at startup serves until restart)")
	f.DurationVar(&nsMaxStaleness, "namespace-max-staleness", server.DefaultNamespaceMaxStaleness, "after the Namespace informer's watch fails, answer from its cache this long, then treat every namespace as unknown (forbids reading namespaceObject deny)")
	f.BoolVar(&admissionEnforcement, "admission-enforcement", false, "for clusters without conditional authorization: answer Allow for a conditional allow on requests admission always sees, and enforce the conditions at POST /v1/admit (install it with: kcedar manifests --admission-enforcement)")
	return cmd
}

func newLogger(level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: l})), nil
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

// serveTLS serves on ln until ctx ends, then shuts down gracefully: /readyz
// turns 503 (srv.Drain), the listener stays open for delay (a second signal
// cuts it short), then closes, and in-flight requests get timeout to finish.
// The last log line says how it ended.
func serveTLS(ctx context.Context, ln net.Listener, cfg *tls.Config, srv *server.Server, logger *slog.Logger, delay, timeout time.Duration) error {
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
