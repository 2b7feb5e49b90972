{{/* The pod template of the Deployment and the DaemonSet. */}}
{{- define "kcedar.podTemplate" -}}
{{- $ds := include "kcedar.isDaemonSet" . }}
{{- $probeHost := "" }}
{{- if hasPrefix "127.0.0.1:" (include "kcedar.listen" .) }}{{ $probeHost = "127.0.0.1" }}{{ end -}}
metadata:
  labels:
    {{- include "kcedar.labels" . | nindent 4 }}
    app.kubernetes.io/component: authorizer
    {{- with .Values.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- with .Values.podAnnotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  serviceAccountName: {{ include "kcedar.serviceAccountName" . }}
  {{- if $ds }}
  hostNetwork: true
  dnsPolicy: ClusterFirstWithHostNet
  {{- end }}
  priorityClassName: {{ .Values.priorityClassName | default (ternary "system-node-critical" "system-cluster-critical" (eq $ds "true")) }}
  {{- with .Values.imagePullSecrets }}
  imagePullSecrets:
  {{- range . }}
  - name: {{ . }}
  {{- end }}
  {{- end }}
  {{- $nodeSelector := .Values.nodeSelector }}
  {{- $tolerations := .Values.tolerations }}
  {{- if $ds }}
  {{- $nodeSelector = merge (deepCopy .Values.nodeSelector) .Values.daemonSet.nodeSelector }}
  {{- $tolerations = concat .Values.daemonSet.tolerations .Values.tolerations }}
  {{- end }}
  {{- with $nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- if or (and (not $ds) .Values.deployment.spreadOverNodes) .Values.topologySpreadConstraints }}
  topologySpreadConstraints:
  {{- if and (not $ds) .Values.deployment.spreadOverNodes }}
  - maxSkew: 1
    topologyKey: kubernetes.io/hostname
    whenUnsatisfiable: ScheduleAnyway
    labelSelector:
      matchLabels:
        {{- include "kcedar.selectorLabels" . | nindent 8 }}
  {{- end }}
  {{- with .Values.topologySpreadConstraints }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
  {{- end }}
  securityContext:
    {{- toYaml .Values.podSecurityContext | nindent 4 }}
  containers:
  - name: kcedar
    image: {{ include "kcedar.image" . }}
    imagePullPolicy: {{ .Values.image.pullPolicy }}
    args:
    {{- include "kcedar.args" . | nindent 4 }}
    env:
    - name: POD_NAMESPACE
      valueFrom:
        fieldRef:
          fieldPath: metadata.namespace
    - name: GOMEMLIMIT
      valueFrom:
        resourceFieldRef:
          resource: limits.memory
    ports:
    - name: https
      containerPort: {{ .Values.port }}
    {{- range $probe := list (dict "kind" "startupProbe" "path" "/livez" "period" 2 "failures" 60) (dict "kind" "livenessProbe" "path" "/livez" "period" 10 "failures" 3) (dict "kind" "readinessProbe" "path" "/readyz" "period" 2 "failures" 2) }}
    {{ $probe.kind }}:
      httpGet:
        path: {{ $probe.path }}
        port: {{ $.Values.port }}
        scheme: HTTPS
        {{- with $probeHost }}
        host: {{ . }}
        {{- end }}
      periodSeconds: {{ $probe.period }}
      failureThreshold: {{ $probe.failures }}
    {{- end }}
    resources:
      {{- toYaml .Values.resources | nindent 6 }}
    securityContext:
      {{- toYaml .Values.securityContext | nindent 6 }}
    volumeMounts:
    - {name: serving-cert, mountPath: /etc/kcedar/pki, readOnly: true}
    - {name: client-ca, mountPath: /etc/kcedar/client-ca, readOnly: true}
    - {name: condition-keys, mountPath: /etc/kcedar/keys, readOnly: true}
    {{- if include "kcedar.hasPolicyFiles" . }}
    - {name: policies, mountPath: /etc/kcedar/policies, readOnly: true}
    {{- end }}
  volumes:
  - name: serving-cert
    secret: {secretName: {{ include "kcedar.servingSecretName" . }}}
  - name: client-ca
    secret: {secretName: {{ include "kcedar.clientCASecretName" . }}}
  - name: condition-keys
    secret: {secretName: {{ include "kcedar.conditionKeysSecretName" . }}}
  {{- if include "kcedar.hasPolicyFiles" . }}
  - name: policies
    configMap: {name: {{ include "kcedar.policiesConfigMapName" . }}}
  {{- end }}
{{- end }}
