{{/*
Names, labels and the few derived settings every template shares.
*/}}

{{- define "cdc.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Full name: release-chart, or the release name alone when it already contains the chart name.
Truncated to 52 characters so that "<fullname>-headless" stays a valid 63-character name.
*/}}
{{- define "cdc.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "cdc.headless" -}}
{{- printf "%s-headless" (include "cdc.fullname" .) }}
{{- end }}

{{- define "cdc.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "cdc.selectorLabels" -}}
app.kubernetes.io/name: {{ include "cdc.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "cdc.labels" -}}
helm.sh/chart: {{ include "cdc.chart" . }}
{{ include "cdc.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: mysql-cdc
{{- end }}

{{- define "cdc.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{- define "cdc.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "cdc.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* True ("true") when snapshot chunks run as executor pods that the capture creates. */}}
{{- define "cdc.sparkOnKubernetes" -}}
{{- if hasPrefix "k8s://" .Values.spark.master }}true{{ end }}
{{- end }}

{{/*
Name of the Bitnami etcd dependency's Service (its "common.names.fullname").
*/}}
{{- define "cdc.etcdFullname" -}}
{{- if .Values.etcd.fullnameOverride }}
{{- .Values.etcd.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else if contains "etcd" .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-etcd" .Release.Name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{/* The --etcd value: the dependency's Service when enabled, else etcd.endpoints. */}}
{{- define "cdc.etcdEndpoints" -}}
{{- if .Values.etcd.enabled }}
{{- if not (hasKey .Subcharts "etcd") }}
{{- fail "etcd.enabled is true but the etcd dependency is not vendored: run `helm dependency build charts/cdc` (needs network), or set etcd.enabled=false and etcd.endpoints to an existing cluster" }}
{{- end }}
{{- printf "%s.%s.svc:2379" (include "cdc.etcdFullname" .) .Release.Namespace }}
{{- else }}
{{- join "," .Values.etcd.endpoints }}
{{- end }}
{{- end }}

{{/* etcd user: the configured one, else root of the Bitnami dependency with RBAC. */}}
{{- define "cdc.etcdUser" -}}
{{- if .Values.etcd.client.user }}
{{- .Values.etcd.client.user }}
{{- else if and .Values.etcd.enabled .Values.etcd.auth.rbac.create }}
{{- "root" }}
{{- end }}
{{- end }}

{{- define "cdc.etcdPasswordSecretName" -}}
{{- if .Values.etcd.client.passwordSecret.name }}
{{- .Values.etcd.client.passwordSecret.name }}
{{- else if .Values.etcd.enabled }}
{{- include "cdc.etcdFullname" . }}
{{- end }}
{{- end }}

{{- define "cdc.etcdPasswordSecretKey" -}}
{{- if .Values.etcd.client.passwordSecret.name }}
{{- .Values.etcd.client.passwordSecret.key }}
{{- else }}
{{- "etcd-root-password" }}
{{- end }}
{{- end }}

{{- define "cdc.credentialsSecretName" -}}
{{- if .Values.credentials.existingSecret }}
{{- .Values.credentials.existingSecret }}
{{- else if .Values.credentials.files }}
{{- printf "%s-credentials" (include "cdc.fullname" .) }}
{{- end }}
{{- end }}

{{- define "cdc.authSecretName" -}}
{{- if .Values.auth.existingSecret }}
{{- .Values.auth.existingSecret }}
{{- else }}
{{- printf "%s-auth" (include "cdc.fullname" .) }}
{{- end }}
{{- end }}

{{/* The key of the auth Secret holding the read-only token; empty: no read-only token. */}}
{{- define "cdc.readTokenKey" -}}
{{- if .Values.auth.existingSecret }}
{{- .Values.auth.existingSecretReadKey }}
{{- else if .Values.auth.readToken }}
{{- "read-token" }}
{{- end }}
{{- end }}

{{/* The key of the auth Secret whose token Prometheus scrapes with: the read-only one if any. */}}
{{- define "cdc.scrapeTokenKey" -}}
{{- include "cdc.readTokenKey" . | default .Values.auth.existingSecretKey }}
{{- end }}

{{/* Where the pods mount what; the args and the probes refer to these paths. */}}
{{- define "cdc.paths.config" -}}/etc/cdc/config{{- end }}
{{- define "cdc.paths.tls" -}}/etc/cdc/tls{{- end }}
{{- define "cdc.paths.auth" -}}/etc/cdc/auth{{- end }}
{{- define "cdc.paths.etcdTls" -}}/etc/cdc/etcd-tls{{- end }}

{{/* The address cdc-server advertises: the pod's stable DNS name under the headless Service. */}}
{{- define "cdc.advertiseAddr" -}}
{{- printf "$(POD_NAME).%s.%s.svc:%d" (include "cdc.headless" .) .Release.Namespace (int .Values.ports.admin) }}
{{- end }}

{{/*
The TLS health check (python -m cdc.api.health) as an exec probe command, one item a line.
The server certificate must also name 127.0.0.1; under mutual TLS it is the client certificate too.
*/}}
{{- define "cdc.healthCommand" -}}
- python
- -m
- cdc.api.health
- {{ printf "127.0.0.1:%d" (int .Values.ports.admin) | quote }}
- --timeout
- "4"
- --tls-ca
- {{ include "cdc.paths.tls" . }}/ca.crt
{{- if .Values.tls.clientAuth }}
- --tls-cert
- {{ include "cdc.paths.tls" . }}/tls.crt
- --tls-key
- {{ include "cdc.paths.tls" . }}/tls.key
{{- end }}
{{- end }}
