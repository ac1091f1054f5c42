{{/*
Name of the chart, or nameOverride.
*/}}
{{- define "effectors.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Fully qualified name of the release's objects, at most 63 characters.
*/}}
{{- define "effectors.fullname" -}}
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

{{/*
Name of the node Deployment, Service and PodDisruptionBudget.
*/}}
{{- define "effectors.nodeName" -}}
{{- printf "%s-node" (include "effectors.fullname" . | trunc 58 | trimSuffix "-") }}
{{- end }}

{{/*
Chart name and version, for the helm.sh/chart label.
*/}}
{{- define "effectors.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Name of the supervisor Deployment, Service and PodDisruptionBudget.
*/}}
{{- define "effectors.supervisorName" -}}
{{- printf "%s-supervisor" (include "effectors.fullname" . | trunc 52 | trimSuffix "-") }}
{{- end }}

{{/*
Labels of every object of the release, whatever its component.
*/}}
{{- define "effectors.commonLabels" -}}
helm.sh/chart: {{ include "effectors.chart" . }}
app.kubernetes.io/name: {{ include "effectors.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: effectors
{{- end }}

{{/*
Labels of the node objects.
*/}}
{{- define "effectors.labels" -}}
{{ include "effectors.commonLabels" . }}
app.kubernetes.io/component: node
{{- end }}

{{/*
Labels of the supervisor objects.
*/}}
{{- define "effectors.supervisorLabels" -}}
{{ include "effectors.commonLabels" . }}
app.kubernetes.io/component: supervisor
{{- end }}

{{/*
Labels that select the supervisor pods.
*/}}
{{- define "effectors.supervisorSelectorLabels" -}}
app.kubernetes.io/name: {{ include "effectors.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: supervisor
{{- end }}

{{/*
The EA_NATS environment entry: from nats.url, or from a key of a Secret.
*/}}
{{- define "effectors.natsEnv" -}}
- name: EA_NATS
  {{- if .Values.nats.existingSecret.name }}
  valueFrom:
    secretKeyRef:
      name: {{ .Values.nats.existingSecret.name | quote }}
      key: {{ .Values.nats.existingSecret.key | quote }}
  {{- else }}
  value: {{ .Values.nats.url | quote }}
  {{- end }}
{{- end }}

{{/*
Supervisor image reference.
*/}}
{{- define "effectors.supervisorImage" -}}
{{- printf "%s:%s" .Values.supervisor.image.repository (.Values.supervisor.image.tag | default .Values.image.tag | default .Chart.AppVersion) }}
{{- end }}

{{/*
Port of a host:port address; fails naming the value when it has none.
*/}}
{{- define "effectors.portOf" -}}
{{- $addr := index . 0 | toString }}
{{- if or (eq $addr "") (eq $addr "off") (not (contains ":" $addr)) }}
{{- fail (printf "%s must be host:port, e.g. 0.0.0.0:%s" (index . 1) (index . 2)) }}
{{- end }}
{{- splitList ":" $addr | last }}
{{- end }}

{{/*
"true" when the gateway listens on an address other pods can reach (not
loopback): the Service then carries its port, and a token is required.
*/}}
{{- define "effectors.gatewayPublic" -}}
{{- $host := .Values.supervisor.gateway.address | toString | splitList ":" | initial | join ":" | trimPrefix "[" | trimSuffix "]" }}
{{- if not (has $host (list "127.0.0.1" "localhost" "::1")) }}true{{ end }}
{{- end }}

{{/*
Fails when the supervisors serve the gateway on a pod address without a
token: anyone reaching the Service could send records and drive
orchestrations (and ea-supervisor refuses to start so).
*/}}
{{- define "effectors.checkGateway" -}}
{{- if and .Values.supervisor.enabled .Values.supervisor.gateway.enabled (include "effectors.gatewayPublic" .) (not .Values.supervisor.gateway.token.existingSecret.name) }}
{{- fail (printf "supervisor.gateway.token.existingSecret.name is required with supervisor.gateway.address %s: the gateway then listens on the pod's address and needs a bearer token. Create a Secret (kubectl create secret generic ea-gateway --from-literal=token=$(openssl rand -hex 32)) and set supervisor.gateway.token.existingSecret.name=ea-gateway, or keep the address on 127.0.0.1 (reach it with kubectl port-forward)." .Values.supervisor.gateway.address) }}
{{- end }}
{{- end }}

{{/*
Labels that select the node pods.
*/}}
{{- define "effectors.selectorLabels" -}}
app.kubernetes.io/name: {{ include "effectors.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: node
{{- end }}

{{/*
Image reference.
*/}}
{{- define "effectors.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}

{{/*
Port of metrics.address (host:port), for the container port. Fails when the
address is empty or "off": the probes need it.
*/}}
{{- define "effectors.metricsPort" -}}
{{- $addr := .Values.metrics.address | toString }}
{{- if or (eq $addr "") (eq $addr "off") (not (contains ":" $addr)) }}
{{- fail "metrics.address must be host:port, e.g. 0.0.0.0:9464: the liveness and readiness probes use /healthz and /readyz on it" }}
{{- end }}
{{- splitList ":" $addr | last }}
{{- end }}

{{/*
Fails unless a NATS URL is given: the chart does not embed NATS.
*/}}
{{- define "effectors.checkNATS" -}}
{{- if and (not .Values.nats.url) (not .Values.nats.existingSecret.name) }}
{{- fail "nats.url is required: the effectors chart runs ea-node against an existing NATS server or cluster with JetStream and does not embed one. Set it with --set nats.url=nats://nats:4222 (or nats.existingSecret.name for a URL kept in a Secret)." }}
{{- end }}
{{- end }}

{{/*
The retention settings of the record log and dead letters, as EA_* variables
(only those set).
*/}}
{{- define "effectors.retentionEnv" -}}
{{- with .Values.retention }}
{{- if .logMaxAge }}
- name: EA_LOG_MAX_AGE
  value: {{ .logMaxAge | quote }}
{{- end }}
{{- if .logMaxBytes }}
- name: EA_LOG_MAX_BYTES
  value: {{ .logMaxBytes | quote }}
{{- end }}
{{- if .deadMaxAge }}
- name: EA_DEAD_MAX_AGE
  value: {{ .deadMaxAge | quote }}
{{- end }}
{{- if .deadMaxBytes }}
- name: EA_DEAD_MAX_BYTES
  value: {{ .deadMaxBytes | quote }}
{{- end }}
{{- end }}
{{- end }}
