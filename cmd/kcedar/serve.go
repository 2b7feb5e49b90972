package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/kcedar/kcedar/cedar"
	"github.com/kcedar/kcedar/residual"
	"github.com/kcedar/kcedar/server"
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
		nsObjects            bool
		nsMaxStaleness       time.Duration
	)
	cmd := &cobra.Command{
		Use:   "serve --policies PATH...",
		Short: "Serve SubjectAccessReview decisions over HTTPS",
		Long: `Serve kube-apiserver's authorization webhook: POST /v1/authorize takes a
SubjectAccessReview (authorization.k8s.io/v1) and answers Allow, Deny or
NoOpinion from the Cedar policies. Policies are validated against the schema
(the embedded Kubernetes default unless --kubeconfig or --from-dir say
otherwise) and reloaded when their files change; an invalid edit keeps the
last good set serving. Also serves GET /healthz, /readyz and /metrics.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(policies) == 0 {
				return &exitError{2, errors.New("--policies is required (a file or directory of .cedar files; repeatable)")}
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
			schema, err := src.Load(cmd.Context())
			if err != nil {
				return fmt.Errorf("schema from %s: %w", src, err)
			}
			logger.Info("schema loaded", "from", src.String(), "resources", len(schema.Resources), "warnings", len(schema.Warnings), "took", time.Since(start).String())
			validator, err := cedar.NewSchemaValidator(schema)
			if err != nil {
				return err
			}
			keys := residual.RandomKeyring()
			if keyFile != "" {
				if keys, err = residual.LoadKeyFile(keyFile); err != nil {
					return &exitError{2, fmt.Errorf("--conditions-key-file: %w", err)}
				}
			} else {
				logger.Warn("no --conditions-key-file: conditions are signed with a random key, valid only in this process until it restarts (run one replica, or share a key file)")
			}
			store := cedar.NewStore(policies, validator, logger)
			nsInformer, nsLookup, err := namespaceInformer(src, nsObjects || src.IsLive(), nsMaxStaleness)
			if err != nil {
				return &exitError{2, err}
			}
			srv := server.New(schema, store, server.Options{Logger: logger, Keys: keys, AdmissionEnforcement: admissionEnforcement, RequireClientCert: tlsOpts.ClientCAFile != "", UnverifiedAdmissionWebhook: unverifiedWebhook, Namespaces: nsLookup})
			if err := store.Load(); err != nil {
				logger.Error("no valid policy set yet; not ready until the files are fixed", "err", err)
			}
			if host, _, err := net.SplitHostPort(listen); err == nil {
				tlsOpts.Hosts = append(tlsOpts.Hosts, host)
			}
			tlsCfg, err := tlsOpts.Config(logger)
			if err != nil {
				return &exitError{2, err}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			go store.Watch(ctx, reloadInterval)
			if nsInformer != nil {
				go nsInformer.Run(ctx)
			}
			if keyFile != "" {
				go keys.WatchFile(ctx, keyFile, reloadInterval, logger)
			}
			if admissionEnforcement && webhookKubeconfig != "" {
				go srv.WatchAdmissionWebhook(ctx, webhookKubeconfig, webhookName, webhookInterval)
			}
			return serveTLS(ctx, listen, tlsCfg, srv, logger)
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
	f.DurationVar(&reloadInterval, "reload-interval", 2*time.Second, "how often to check the policy files for changes")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&keyFile, "conditions-key-file", "", "keys that sign conditions, shared by replicas: lines \"<id> <base64 secret>\", the first signs, all verify (rotation); reloaded when it changes")
	f.StringVar(&webhookKubeconfig, "admission-webhook-kubeconfig", "", "with --admission-enforcement: kubeconfig to read the ValidatingWebhookConfiguration with; conditional allows are answered Allow only while it is verified in place")
	f.StringVar(&webhookName, "admission-webhook-name", "kcedar-conditions", "name of the ValidatingWebhookConfiguration that enforces conditions")
	f.DurationVar(&webhookInterval, "admission-webhook-check-interval", 30*time.Second, "how often to verify the ValidatingWebhookConfiguration")
	f.BoolVar(&unverifiedWebhook, "unverified-admission-webhook", false, "with --admission-enforcement: do not verify the ValidatingWebhookConfiguration (only if something else guarantees it is installed)")
	f.BoolVar(&nsObjects, "namespace-objects", false, "fill resource.namespaceObject from an informer on Namespaces of the cluster (--live/--kubeconfig/--context, else KUBECONFIG, ~/.kube/config or in-cluster); on by default with --live or --kubeconfig. Without it namespaceObject is unknown")
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

func serveTLS(ctx context.Context, listen string, cfg *tls.Config, h http.Handler, logger *slog.Logger) error {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           h,
		TLSConfig:         cfg,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelDebug),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.ServeTLS(ln, "", "") }()
	logger.Info("serving", "address", ln.Addr().String())
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	logger.Info("shutting down")
	return srv.Shutdown(shutdownCtx)
}
