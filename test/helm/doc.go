// Package helm tests kcedar's Helm chart (charts/kcedar): it renders the chart
// with Helm's Go SDK and compares it, object by object and field by field,
// with the kustomize manifests of deploy/ rendered with kustomize's Go API;
// it lints the chart, checks its values schema, its monitoring (PromQL that
// parses, metric names kcedar defines, a ServiceMonitor that selects the
// metrics Service) and, with the build tag e2e, installs the rendered chart
// into a real kube-apiserver and runs kcedar with the chart's arguments.
//
// It is a module of its own (with a replace of kcedar to ../..), so Helm and
// Prometheus stay out of kcedar's go.mod.
package helm
