//go:build e2e

package e2e

import "fmt"

// webhookBeforeRBAC is the AuthorizationConfiguration of the tests that put
// kcedar before RBAC: no decision cache (every request reaches kcedar),
// failurePolicy Deny. Its kubeconfig is webhookFiles'.
const webhookBeforeRBAC = `apiVersion: apiserver.config.k8s.io/v1
kind: AuthorizationConfiguration
authorizers:
- type: Webhook
  name: kcedar
  webhook:
    timeout: 3s
    subjectAccessReviewVersion: v1
    matchConditionSubjectAccessReviewVersion: v1
    failurePolicy: Deny
    authorizedTTL: 1s
    unauthorizedTTL: 1s
    cacheAuthorizedRequests: false
    cacheUnauthorizedRequests: false
    connectionInfo:
      type: KubeConfigFile
      kubeConfigFile: {{.Dir}}/kcedar-webhook.kubeconfig
- type: RBAC
  name: rbac
`

// webhookFiles are the files webhookBeforeRBAC names: kcedar's CA and the
// webhook kubeconfig for kcedar at addr.
func webhookFiles(addr string, caPEM []byte) map[string]string {
	return map[string]string{
		"kcedar-ca.crt": string(caPEM),
		"kcedar-webhook.kubeconfig": fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: kcedar
  cluster:
    server: https://%s/v1/authorize
    certificate-authority: {{.Dir}}/kcedar-ca.crt
users:
- name: kube-apiserver
  user: {}
contexts:
- name: webhook
  context: {cluster: kcedar, user: kube-apiserver}
current-context: webhook
`, addr),
	}
}
