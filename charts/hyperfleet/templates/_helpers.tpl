{{/* Name of the chart, overridable. */}}
{{- define "hyperfleet.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Prefix of every object name: the release name, unless it already contains the chart name. */}}
{{- define "hyperfleet.fullname" -}}
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

{{- define "hyperfleet.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels on every object. */}}
{{- define "hyperfleet.labels" -}}
helm.sh/chart: {{ include "hyperfleet.chart" . }}
app.kubernetes.io/name: {{ include "hyperfleet.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: hyperfleet
{{- end }}

{{/* Selector labels of one component (manager or bootstrap-service); pass (list . "component"). */}}
{{- define "hyperfleet.selectorLabels" -}}
{{- $ctx := index . 0 -}}
app.kubernetes.io/name: {{ include "hyperfleet.name" $ctx }}
app.kubernetes.io/instance: {{ $ctx.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end }}

{{- define "hyperfleet.managerImage" -}}
{{- printf "%s:%s" .Values.manager.image.repository (default .Chart.AppVersion .Values.manager.image.tag) }}
{{- end }}

{{- define "hyperfleet.bootstrapImage" -}}
{{- printf "%s:%s" .Values.bootstrapService.image.repository (default .Chart.AppVersion .Values.bootstrapService.image.tag) }}
{{- end }}

{{/* namespace/name of the identity CA Secret shared by the manager and the bootstrap service. */}}
{{- define "hyperfleet.caSecret" -}}
{{- default (printf "%s/%s-bootstrap-ca" .Release.Namespace (include "hyperfleet.fullname" .)) .Values.identity.caSecret }}
{{- end }}

{{/* Secret holding the GitHub webhook secret (key "secret"). */}}
{{- define "hyperfleet.webhookSecretName" -}}
{{- default (printf "%s-github-webhook" (include "hyperfleet.fullname" .)) .Values.manager.webhook.existingSecret }}
{{- end }}

{{- define "hyperfleet.consoleImage" -}}
{{- printf "%s:%s" .Values.console.image.repository (default .Chart.AppVersion .Values.console.image.tag) }}
{{- end }}

{{/* Secret with the console's client secret and session key (keys client-secret, session-key). */}}
{{- define "hyperfleet.consoleSecretName" -}}
{{- default (printf "%s-console-secrets" (include "hyperfleet.fullname" .)) .Values.console.existingSecret }}
{{- end }}
