package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kcedar/kcedar/cedar"
	"github.com/kcedar/kcedar/internal/cluster/namespaces"
	"github.com/kcedar/kcedar/server"
)

// serveOptions are kcedar serve's flags. AddFlags registers them, Complete
// fills in what follows from them, Validate refuses bad combinations, and
// Run serves.
type serveOptions struct {
	listen   string
	policies []string
	// src is the schema source, and its --kubeconfig and --context are the
	// one connection to the cluster (clusterConfig).
	src             schemaSource
	tls             server.TLSOptions
	reloadInterval  time.Duration
	logLevel        string
	keyFile         string
	reload          reloadOptions
	shutdownDelay   time.Duration
	shutdownTimeout time.Duration
	objects         objectOptions
	decisionLog     decisionLogOptions
	admission       admissionOptions
	nsObjects       bool
	nsMaxStaleness  time.Duration
	schemaRefresh   time.Duration
	// shadow: every policy is in audit mode (--shadow).
	shadow bool
	// gcHeadroom is --gc-min-headroom, parsed into gcHeadroomBytes by
	// Validate.
	gcHeadroom      string
	gcHeadroomBytes uint64

	// Set by Complete.
	logger *slog.Logger
}

// reloadOptions are serve's flags that guard policy reloads.
type reloadOptions struct {
	settle        time.Duration
	allowEmpty    bool
	maxPolicyLoss float64
	keepForbids   bool
}

// AddFlags registers serve's flags on f.
func (o *serveOptions) AddFlags(f *pflag.FlagSet) {
	f.StringVar(&o.listen, "listen", "127.0.0.1:8443", "address to serve HTTPS on")
	f.StringArrayVar(&o.policies, "policies", nil, "policy file or directory of *.cedar files (repeatable)")
	o.src.AddFlags(f)
	f.Lookup("kubeconfig").Usage = "kubeconfig of the cluster, for every cluster feature: the live schema (implied), policy objects, the status Lease, namespace objects and the admission webhook check. Without it: KUBECONFIG, ~/.kube/config, else the in-cluster config"
	f.Lookup("context").Usage = "kubeconfig context of the cluster (with --kubeconfig or --live)"
	o.addTLSFlags(f)
	f.DurationVar(&o.reloadInterval, "reload-interval", 2*time.Second, "how often to check the policy, key and certificate files for changes when no file system event says so (events are watched too)")
	o.reload.addFlags(f)
	f.DurationVar(&o.shutdownDelay, "shutdown-delay", 5*time.Second, "on SIGTERM, answer /readyz 503 for this long before closing the listener, so endpoints and load balancers stop sending requests")
	f.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 20*time.Second, "after the listener closes, wait this long for in-flight requests before closing their connections")
	f.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&o.keyFile, "conditions-key-file", "", "keys that sign conditions, shared by replicas: lines \"<id> <base64 secret>\", the first signs, all verify (rotation); reloaded when it changes")
	o.admission.addFlags(f)
	o.objects.addFlags(f)
	o.decisionLog.addFlags(f)
	f.BoolVar(&o.nsObjects, "namespace-objects", false, "fill resource.namespaceObject from an informer on the cluster's Namespaces; on by default with --live or --kubeconfig. Without it namespaceObject is unknown")
	f.DurationVar(&o.schemaRefresh, "schema-refresh-interval", 5*time.Minute, "with a live cluster's schema (--live, --kubeconfig): how often to re-read discovery for changes to the cluster's API, besides watching CustomResourceDefinitions and APIServices; 0 turns schema refresh off (the schema read at startup serves until restart)")
	f.BoolVar(&o.shadow, "shadow", false, "shadow mode, for placing kcedar in front of RBAC for the first time: evaluate every policy as if annotated @enforcement(\"audit\"), answer NoOpinion to every request, and record what the policies would have decided in the decision log (--decision-log) and kcedar_audit_decisions_total")
	f.StringVar(&o.gcHeadroom, "gc-min-headroom", "64Mi", "the least the heap may grow between garbage collections (a quantity: 64Mi, 1Gi). With the Go runtime's own pacing the heap grows by the live heap, so a small policy set, whose live heap is mostly the schema, is collected so often that marking costs about as much as deciding; 64Mi takes about a third off its CPU per review in process, for up to that much more memory (RSS settles that far above its size after a collection). A large set's live heap leaves more room than this already. 0 keeps the runtime's pacing; GOGC in the environment overrides it; GOMEMLIMIT caps the heap whatever this says")
	f.DurationVar(&o.nsMaxStaleness, "namespace-max-staleness", namespaces.DefaultMaxStaleness, "after the Namespace informer's watch fails, answer from its cache this long, then treat every namespace as unknown (forbids reading namespaceObject deny)")
}

func (o *serveOptions) addTLSFlags(f *pflag.FlagSet) {
	f.StringVar(&o.tls.CertFile, "tls-cert-file", "", "serving certificate (PEM); reloaded when it changes")
	f.StringVar(&o.tls.KeyFile, "tls-private-key-file", "", "serving certificate's private key (PEM)")
	f.StringVar(&o.tls.ClientCAFile, "client-ca-file", "", "serve /v1/* only to clients with a certificate signed by this CA (the API server's); /healthz, /readyz and /metrics stay open")
	f.StringVar(&o.tls.WriteCA, "write-ca", "", "without --tls-cert-file: write the self-signed serving CA here")
	f.StringArrayVar(&o.tls.Hosts, "tls-san", nil, "extra host name or IP for the self-signed certificate (repeatable)")
}

func (o *reloadOptions) addFlags(f *pflag.FlagSet) {
	f.DurationVar(&o.settle, "policy-settle", cedar.DefaultSettle, "load changed policy files only once they read the same twice this far apart (a file renamed into place or a ConfigMap update loads at once); 0 loads what is read")
	f.BoolVar(&o.allowEmpty, "allow-empty-policy-set", false, "accept a policy set with no policies (it answers NoOpinion to everything); by default an empty set is a load error and the last good set keeps serving")
	f.Float64Var(&o.maxPolicyLoss, "max-policy-loss", 0, "refuse a reload that removes more than this share of the serving policies (e.g. 0.5); 0 turns the check off")
	f.BoolVar(&o.keepForbids, "keep-forbids", false, "refuse a reload that removes any forbid policy (by id)")
}

// Complete fills in what follows from the flags: the logger (klog's too), the namespace
// informer's default (on with a live cluster) and the listen host as a
// name of the self-signed certificate.
func (o *serveOptions) Complete() error {
	logger, err := newServeLogger(os.Stderr, o.logLevel)
	if err != nil {
		return err
	}
	o.logger = logger
	o.nsObjects = o.nsObjects || o.src.IsLive()
	if host, _, err := net.SplitHostPort(o.listen); err == nil {
		o.tls.Hosts = append(o.tls.Hosts, host)
	}
	return nil
}

// Validate refuses flags that cannot serve.
func (o *serveOptions) Validate() error {
	if len(o.policies) == 0 && !o.objects.enabled {
		return errors.New("--policies or --policy-objects is required (--policies: a file or directory of .cedar files; repeatable)")
	}
	if err := o.src.Validate(); err != nil {
		return err
	}
	if o.reload.maxPolicyLoss < 0 || o.reload.maxPolicyLoss > 1 {
		return fmt.Errorf("--max-policy-loss %g: give a share between 0 (off) and 1", o.reload.maxPolicyLoss)
	}
	headroom, err := resource.ParseQuantity(o.gcHeadroom)
	if err != nil || headroom.Sign() < 0 {
		return fmt.Errorf("--gc-min-headroom %q: give a size such as 64Mi, or 0 for the Go runtime's default", o.gcHeadroom)
	}
	o.gcHeadroomBytes = uint64(headroom.Value())
	if o.schemaRefresh < 0 {
		return fmt.Errorf("--schema-refresh-interval %s: give a duration, or 0 to turn schema refresh off", o.schemaRefresh)
	}
	return nil
}

// clusterConfig is serve's one connection to the cluster, for every feature
// that needs one (named in errors): --kubeconfig and --context, else
// KUBECONFIG, ~/.kube/config, else the in-cluster config.
func (o *serveOptions) clusterConfig(feature string) (*rest.Config, error) {
	cfg, err := o.src.RESTConfig()
	if err != nil {
		return nil, fmt.Errorf("%s: %w (outside a cluster, give --kubeconfig or set KUBECONFIG)", feature, err)
	}
	return cfg, nil
}

// clusterClient is a typed client on the connection (clusterConfig).
func (o *serveOptions) clusterClient(feature string) (kubernetes.Interface, error) {
	cfg, err := o.clusterConfig(feature)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

// namespaceInformer builds the informer that fills namespaceObject (nil
// without --namespace-objects).
func (o *serveOptions) namespaceInformer() (*namespaces.Informer, error) {
	if !o.nsObjects {
		return nil, nil
	}
	client, err := o.clusterClient("--namespace-objects")
	if err != nil {
		return nil, err
	}
	inf := namespaces.NewInformer(client)
	inf.MaxStaleness = o.nsMaxStaleness
	return inf, nil
}
