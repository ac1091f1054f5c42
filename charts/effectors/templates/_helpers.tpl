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
Labels of every object.
*/}}
{{- define "effectors.labels" -}}
helm.sh/chart: {{ include "effectors.chart" . }}
{{ include "effectors.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
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
