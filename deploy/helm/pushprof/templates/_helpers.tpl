{{/* Chart name, bounded to the 63 characters of a DNS label. */}}
{{- define "pushprof.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "pushprof.fullname" -}}
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

{{- define "pushprof.selectorLabels" -}}
app.kubernetes.io/name: {{ include "pushprof.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "pushprof.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "pushprof.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "pushprof.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "pushprof.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* Secret holding the bearer token, "" when there is none. */}}
{{- define "pushprof.tokenSecret" -}}
{{- if .Values.remoteStore.existingSecret }}
{{- .Values.remoteStore.existingSecret }}
{{- else if .Values.remoteStore.bearerToken }}
{{- include "pushprof.fullname" . }}
{{- end }}
{{- end }}

{{/* The agent config: .Values.config with remote_store filled from remoteStore. */}}
{{- define "pushprof.config" -}}
{{- $cfg := deepCopy .Values.config }}
{{- $rs := dict "address" (required "remoteStore.address is required (host:port of a Parca-compatible server)" .Values.remoteStore.address) "insecure" .Values.remoteStore.insecure "insecure_skip_verify" .Values.remoteStore.insecureSkipVerify }}
{{- if include "pushprof.tokenSecret" . }}
{{- $_ := set $rs "bearer_token_file" "/var/run/secrets/pushprof/token" }}
{{- end }}
{{- $_ := set $cfg "remote_store" (mergeOverwrite $rs (default (dict) $cfg.remote_store)) }}
{{- toYaml $cfg }}
{{- end }}
