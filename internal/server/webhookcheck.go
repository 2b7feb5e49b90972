package server

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// CheckAdmissionWebhook reports why a ValidatingWebhookConfiguration does not
// enforce kcedar's conditions: it must fail closed and send CREATE, UPDATE,
// DELETE and CONNECT of every group, version, resource and subresource to
// kcedar's /v1/admit.
func CheckAdmissionWebhook(vwc *admissionregistrationv1.ValidatingWebhookConfiguration) error {
	for _, wh := range vwc.Webhooks {
		if err := checkWebhook(wh); err == nil {
			return nil
		} else if len(vwc.Webhooks) == 1 {
			return fmt.Errorf("webhook %s: %w", wh.Name, err)
		}
	}
	return fmt.Errorf("%s has no webhook that sends every write and connect to kcedar's /v1/admit with failurePolicy Fail", vwc.Name)
}

func checkWebhook(wh admissionregistrationv1.ValidatingWebhook) error {
	if wh.FailurePolicy == nil || *wh.FailurePolicy != admissionregistrationv1.Fail {
		return fmt.Errorf("failurePolicy is not Fail")
	}
	path := ""
	switch {
	case wh.ClientConfig.URL != nil:
		path = *wh.ClientConfig.URL
	case wh.ClientConfig.Service != nil && wh.ClientConfig.Service.Path != nil:
		path = *wh.ClientConfig.Service.Path
	}
	if !strings.HasSuffix(path, "/v1/admit") {
		return fmt.Errorf("it does not call kcedar's /v1/admit (%q)", path)
	}
	if wh.NamespaceSelector != nil && (len(wh.NamespaceSelector.MatchLabels) > 0 || len(wh.NamespaceSelector.MatchExpressions) > 0) ||
		wh.ObjectSelector != nil && (len(wh.ObjectSelector.MatchLabels) > 0 || len(wh.ObjectSelector.MatchExpressions) > 0) ||
		len(wh.MatchConditions) > 0 {
		return fmt.Errorf("it is narrowed by selectors or match conditions")
	}
	need := []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete, admissionregistrationv1.Connect}
	for _, op := range need {
		covered := false
		for _, r := range wh.Rules {
			opOK := slices.Contains(r.Operations, op) || slices.Contains(r.Operations, admissionregistrationv1.OperationAll)
			scopeOK := r.Scope == nil || *r.Scope == admissionregistrationv1.AllScopes
			if opOK && scopeOK && slices.Contains(r.APIGroups, "*") && slices.Contains(r.APIVersions, "*") && slices.Contains(r.Resources, "*/*") {
				covered = true
				break
			}
		}
		if !covered {
			return fmt.Errorf("no rule sends %s of every group, version, resource and subresource (*/*)", op)
		}
	}
	return nil
}

func (s *Server) checkAdmissionWebhookOnce(ctx context.Context, kubeconfig, name string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("reading %s: %w", kubeconfig, err)
	}
	cfg.Timeout = 10 * time.Second
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	vwc, err := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	return CheckAdmissionWebhook(vwc)
}

// WatchAdmissionWebhook checks the named ValidatingWebhookConfiguration now
// and every interval, and tells the server whether the admission webhook
// stands behind its conditional Allows. Until it does, the server folds
// conditional allows like any other conditional answer.
// The kubeconfig is read at every check, so it may appear after kcedar starts.
func (s *Server) WatchAdmissionWebhook(ctx context.Context, kubeconfig, name string, interval time.Duration) {
	check := func() {
		err := s.checkAdmissionWebhookOnce(ctx, kubeconfig, name)
		ok := err == nil
		if prev := s.webhookVerified.Swap(ok); prev != ok || !ok {
			if ok {
				s.logger.Info("admission webhook verified: conditional allows are answered Allow and enforced in admission", "webhook", name)
			} else {
				s.logger.Error("admission webhook not in place: conditional allows are folded (NoOpinion, or Deny with deny conditions) until it is", "webhook", name, "err", err)
			}
		}
		if ok {
			s.metrics.webhookVerified.Set(1)
		} else {
			s.metrics.webhookVerified.Set(0)
		}
	}
	check()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			check()
		}
	}
}
