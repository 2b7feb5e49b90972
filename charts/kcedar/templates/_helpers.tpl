{{/* The chart name, or nameOverride. */}}
{{- define "kcedar.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The prefix of every object name: fullnameOverride, else the release
name, with the chart name appended unless the release name contains it. */}}
{{- define "kcedar.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Chart name and version, for the helm.sh/chart label. */}}
{{- define "kcedar.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The standard labels of every object. */}}
{{- define "kcedar.labels" -}}
helm.sh/chart: {{ include "kcedar.chart" . }}
app.kubernetes.io/name: {{ include "kcedar.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The labels selecting kcedar's pods. */}}
{{- define "kcedar.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kcedar.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: authorizer
{{- end }}

{{/* The labels of the metrics Service, which the ServiceMonitor selects. */}}
{{- define "kcedar.metricsLabels" -}}
{{ include "kcedar.labels" . }}
app.kubernetes.io/component: metrics
{{- end }}

{{- define "kcedar.metricsSelectorLabels" -}}
app.kubernetes.io/name: {{ include "kcedar.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: metrics
{{- end }}

{{/* The Prometheus job of the metrics Service (the operator names jobs after it). */}}
{{- define "kcedar.metricsJob" -}}
{{ include "kcedar.fullname" . }}-metrics
{{- end }}

{{- define "kcedar.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "kcedar.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name: name the ServiceAccount kcedar runs as when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "kcedar.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{- define "kcedar.isDaemonSet" -}}
{{- if eq .Values.kind "DaemonSet" }}true{{ end }}
{{- end }}

{{/* The address kcedar listens on. */}}
{{- define "kcedar.listen" -}}
{{- if .Values.listenAddress }}
{{- .Values.listenAddress }}
{{- else if include "kcedar.isDaemonSet" . }}
{{- printf "127.0.0.1:%d" (int .Values.port) }}
{{- else }}
{{- printf ":%d" (int .Values.port) }}
{{- end }}
{{- end }}

{{- define "kcedar.servingSecretName" -}}
{{- .Values.tls.existingSecret | default (printf "%s-serving-cert" (include "kcedar.fullname" .)) }}
{{- end }}

{{- define "kcedar.clientCASecretName" -}}
{{- .Values.clientCA.existingSecret | default (printf "%s-client-ca" (include "kcedar.fullname" .)) }}
{{- end }}

{{- define "kcedar.conditionKeysSecretName" -}}
{{- .Values.conditionKeys.existingSecret | default (printf "%s-condition-keys" (include "kcedar.fullname" .)) }}
{{- end }}

{{- define "kcedar.policiesConfigMapName" -}}
{{- .Values.policies.existingConfigMap | default (printf "%s-policies" (include "kcedar.fullname" .)) }}
{{- end }}

{{- define "kcedar.hasPolicyFiles" -}}
{{- if or .Values.policies.files .Values.policies.existingConfigMap }}true{{ end }}
{{- end }}

{{/* The DNS names of the generated serving certificate. */}}
{{- define "kcedar.servingDNSNames" -}}
{{- $fn := include "kcedar.fullname" . }}
{{- $ns := .Release.Namespace }}
{{- if include "kcedar.isDaemonSet" . }}
{{- toJson (concat (list "localhost") .Values.tls.extraDNSNames) }}
{{- else }}
{{- toJson (concat (list (printf "%s.%s.svc" $fn $ns) (printf "%s.%s.svc.cluster.local" $fn $ns) (printf "%s.%s" $fn $ns) $fn) .Values.tls.extraDNSNames) }}
{{- end }}
{{- end }}

{{- define "kcedar.servingIPs" -}}
{{- if include "kcedar.isDaemonSet" . }}
{{- toJson (concat (list "127.0.0.1") .Values.tls.extraIPs) }}
{{- else }}
{{- toJson .Values.tls.extraIPs }}
{{- end }}
{{- end }}

{{/* kcedar serve's arguments. */}}
{{- define "kcedar.args" -}}
- serve
- --listen={{ include "kcedar.listen" . }}
{{- if .Values.policyObjects.enabled }}
- --policy-objects
{{- if ne .Values.policyObjects.statusLeaseName "kcedar-policy-status" }}
- --status-lease-name={{ .Values.policyObjects.statusLeaseName }}
{{- end }}
{{- end }}
{{- if .Values.schema.live }}
- --live
{{- end }}
- --tls-cert-file=/etc/kcedar/pki/tls.crt
- --tls-private-key-file=/etc/kcedar/pki/tls.key
- --client-ca-file=/etc/kcedar/client-ca/ca.crt
- --conditions-key-file=/etc/kcedar/keys/keys
{{- if include "kcedar.hasPolicyFiles" . }}
- --policies=/etc/kcedar/policies
{{- end }}
{{- if include "kcedar.admissionEnforcement" . }}
- --admission-enforcement
{{- end }}
{{- range .Values.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end }}

{{/*
How conditions are enforced: conditions.enforcement, with "auto" resolved
by the cluster's version (.Capabilities.KubeVersion) as kcedar manifests
resolves it: native on Kubernetes 1.38 and later, else admissionWebhook.
*/}}
{{- define "kcedar.conditionsEnforcement" -}}
{{- $e := .Values.conditions.enforcement -}}
{{- if eq $e "auto" -}}
{{- if semverCompare ">=1.38.0-0" .Capabilities.KubeVersion.Version }}native{{ else }}admissionWebhook{{ end -}}
{{- else -}}
{{- $e -}}
{{- end -}}
{{- end -}}

{{/* "true" when kcedar serve runs with --admission-enforcement, else "". */}}
{{- define "kcedar.admissionEnforcement" -}}
{{- if has (include "kcedar.conditionsEnforcement" .) (list "admissionWebhook" "both") }}true{{ end -}}
{{- end -}}

{{/* The kcedar manifests flags of the chosen enforcement. */}}
{{- define "kcedar.manifestsConditionsFlags" -}}
{{- $e := include "kcedar.conditionsEnforcement" . -}}
{{- if eq $e "native" }} --conditions-review
{{- else if eq $e "admissionWebhook" }} --admission-enforcement
{{- else if eq $e "both" }} --conditions-review --admission-enforcement
{{- else }} --conditions-review=false --admission-enforcement=false
{{- end -}}
{{- end -}}

{{/* Refuse value combinations that cannot serve. */}}
{{- define "kcedar.validate" -}}
{{- if not (or .Values.policyObjects.enabled (include "kcedar.hasPolicyFiles" .)) }}
{{- fail "kcedar needs policies: set policyObjects.enabled, policies.files or policies.existingConfigMap" }}
{{- end }}
{{- if not (or .Values.tls.existingSecret .Values.tls.generate) }}
{{- fail "tls: set tls.existingSecret (a kubernetes.io/tls Secret) or tls.generate" }}
{{- end }}
{{- if not (or .Values.clientCA.existingSecret .Values.clientCA.cert .Values.clientCA.generate) }}
{{- fail "clientCA: set clientCA.existingSecret, clientCA.cert or clientCA.generate: kcedar only accepts the API server's client certificate" }}
{{- end }}
{{- end }}
