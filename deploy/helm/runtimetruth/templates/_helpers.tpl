{{/*
Names and labels.
*/}}
{{- define "runtimetruth.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "runtimetruth.fullname" -}}
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

{{/* The name of a component's objects: (dict "root" $ "component" "verifier"). */}}
{{- define "runtimetruth.componentName" -}}
{{- printf "%s-%s" (include "runtimetruth.fullname" .root | trunc 52 | trimSuffix "-") .component }}
{{- end }}

{{- define "runtimetruth.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "runtimetruth.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: runtimetruth
{{- end }}

{{/* (dict "root" $ "component" "verifier") */}}
{{- define "runtimetruth.componentLabels" -}}
{{ include "runtimetruth.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "runtimetruth.selectorLabels" -}}
app.kubernetes.io/name: {{ include "runtimetruth.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "runtimetruth.serviceAccountName" -}}
{{- $sa := (index .root.Values .component).serviceAccount }}
{{- if $sa.create }}
{{- default (include "runtimetruth.componentName" .) $sa.name }}
{{- else }}
{{- default "default" $sa.name }}
{{- end }}
{{- end }}

{{/* The image of a component. */}}
{{- define "runtimetruth.image" -}}
{{- $g := .root.Values.image }}
{{- $i := (index .root.Values .component).image }}
{{- $repo := $i.repository }}
{{- if $g.registry }}{{ $repo = printf "%s/%s" (trimSuffix "/" $g.registry) $i.repository }}{{ end }}
{{- if $i.digest }}
{{- printf "%s@%s" $repo $i.digest }}
{{- else }}
{{- printf "%s:%s" $repo (default (default .root.Chart.AppVersion $g.tag) $i.tag) }}
{{- end }}
{{- end }}

{{/*
The platform's keys every service has (pkg/platform/servicemain): the
HTTP port of /healthz, /readyz and /metrics (http.listen, host:port;
http.shutdown_delay), logging (log.*) and OpenTelemetry (telemetry.*).
This is the one place that names them.
*/}}
{{- define "runtimetruth.platformConfig" -}}
{{- $h := .Values.health }}
{{- $t := .Values.telemetry }}
{{- $otlp := dict "timeout" $t.otlp.timeout }}
{{- with $t.otlp.endpoint }}{{ $_ := set $otlp "endpoint" . }}{{ end }}
{{- $c := dict
  "http" (dict "listen" (printf ":%d" (int $h.port)) "shutdown_delay" $h.shutdownDelay)
  "log" (dict "level" .Values.log.level "format" .Values.log.format)
  "telemetry" (dict "otlp" $otlp "trace_sample_ratio" $t.traceSampleRatio) }}
{{- toYaml $c }}
{{- end }}

{{/* The effective NATS settings of a component: the global ones with the component's merged over them. */}}
{{- define "runtimetruth.nats" -}}
{{- $svc := index .root.Values .component }}
{{- toYaml (mustMergeOverwrite (deepCopy .root.Values.nats) (deepCopy (default dict $svc.nats))) }}
{{- end }}

{{- define "runtimetruth.secretsDir" -}}/etc/runtimetruth/secrets{{- end }}

{{/* The nats section of a component's config file (YAML). */}}
{{- define "runtimetruth.natsConfig" -}}
{{- $n := include "runtimetruth.nats" . | fromYaml }}
{{- $dir := include "runtimetruth.secretsDir" . }}
{{- $c := dict "url" $n.url }}
{{- if eq $n.auth.type "userPassword" }}
{{- $_ := set $c "user" $n.auth.user }}
{{- else if eq $n.auth.type "creds" }}
{{- $_ := set $c "creds_file" (printf "%s/nats-auth/%s" $dir $n.auth.credsKey) }}
{{- else if eq $n.auth.type "nkey" }}
{{- $_ := set $c "nkey_seed_file" (printf "%s/nats-auth/%s" $dir $n.auth.nkeySeedKey) }}
{{- end }}
{{- if $n.tls.enabled }}
{{- $tls := dict }}
{{- if $n.tls.caSecret }}
{{- $_ := set $tls "ca_file" (printf "%s/nats-ca/%s" $dir $n.tls.caKey) }}
{{- end }}
{{- if $n.tls.clientCertSecret }}
{{- $_ := set $tls "cert_file" (printf "%s/nats-client/tls.crt" $dir) }}
{{- $_ := set $tls "key_file" (printf "%s/nats-client/tls.key" $dir) }}
{{- end }}
{{- if $tls }}{{ $_ := set $c "tls" $tls }}{{ end }}
{{- end }}
{{- toYaml $c }}
{{- end }}

{{/* Environment variables for NATS (the password, from its Secret). */}}
{{- define "runtimetruth.natsEnv" -}}
{{- $n := include "runtimetruth.nats" . | fromYaml }}
{{- if eq $n.auth.type "userPassword" }}
- name: {{ printf "RUNTIMETRUTH_%s_NATS_PASSWORD" (upper .component) }}
  valueFrom:
    secretKeyRef:
      name: {{ $n.auth.existingSecret }}
      key: {{ $n.auth.passwordKey }}
{{- end }}
{{- end }}

{{/* Volumes for NATS credentials and TLS. */}}
{{- define "runtimetruth.natsVolumes" -}}
{{- $n := include "runtimetruth.nats" . | fromYaml }}
{{- if and (has $n.auth.type (list "creds" "nkey")) $n.auth.hostPath }}
# The node's own credential, provisioned on the node (nats.auth.hostPath).
- name: nats-auth
  hostPath:
    path: {{ $n.auth.hostPath }}
    type: Directory
{{- else if has $n.auth.type (list "creds" "nkey") }}
- name: nats-auth
  secret:
    secretName: {{ $n.auth.existingSecret }}
    defaultMode: 0440
    items:
      - key: {{ ternary $n.auth.credsKey $n.auth.nkeySeedKey (eq $n.auth.type "creds") }}
        path: {{ ternary $n.auth.credsKey $n.auth.nkeySeedKey (eq $n.auth.type "creds") }}
{{- end }}
{{- if and $n.tls.enabled $n.tls.caSecret }}
- name: nats-ca
  secret:
    secretName: {{ $n.tls.caSecret }}
    defaultMode: 0440
    items:
      - key: {{ $n.tls.caKey }}
        path: {{ $n.tls.caKey }}
{{- end }}
{{- if and $n.tls.enabled $n.tls.clientCertSecret }}
- name: nats-client
  secret:
    secretName: {{ $n.tls.clientCertSecret }}
    defaultMode: 0440
    items:
      - {key: tls.crt, path: tls.crt}
      - {key: tls.key, path: tls.key}
{{- end }}
{{- end }}

{{- define "runtimetruth.natsVolumeMounts" -}}
{{- $n := include "runtimetruth.nats" . | fromYaml }}
{{- $dir := include "runtimetruth.secretsDir" . }}
{{- if has $n.auth.type (list "creds" "nkey") }}
- name: nats-auth
  mountPath: {{ $dir }}/nats-auth
  readOnly: true
{{- end }}
{{- if and $n.tls.enabled $n.tls.caSecret }}
- name: nats-ca
  mountPath: {{ $dir }}/nats-ca
  readOnly: true
{{- end }}
{{- if and $n.tls.enabled $n.tls.clientCertSecret }}
- name: nats-client
  mountPath: {{ $dir }}/nats-client
  readOnly: true
{{- end }}
{{- end }}

{{/* The config file's directory and a component's file in it. */}}
{{- define "runtimetruth.configDir" -}}/etc/runtimetruth/config{{- end }}
{{- define "runtimetruth.configFile" -}}{{ .component }}.yaml{{- end }}

{{/* Pod and container security contexts: the global ones with the component's merged over them. */}}
{{- define "runtimetruth.podSecurityContext" -}}
{{- $svc := index .root.Values .component }}
{{- toYaml (mustMergeOverwrite (deepCopy .root.Values.podSecurityContext) (deepCopy (default dict $svc.podSecurityContext))) }}
{{- end }}

{{- define "runtimetruth.securityContext" -}}
{{- $svc := index .root.Values .component }}
{{- toYaml (mustMergeOverwrite (deepCopy .root.Values.securityContext) (deepCopy (default dict $svc.securityContext))) }}
{{- end }}

{{/* The container's port, probes and the config checksum's source. */}}
{{- define "runtimetruth.ports" -}}
- name: http
  containerPort: {{ .root.Values.health.port }}
  protocol: TCP
{{- end }}

{{- define "runtimetruth.probes" -}}
{{- $h := .root.Values.health }}
livenessProbe:
  httpGet:
    path: /healthz
    port: http
  {{- toYaml $h.livenessProbe | nindent 2 }}
readinessProbe:
  httpGet:
    path: /readyz
    port: http
  {{- toYaml $h.readinessProbe | nindent 2 }}
{{- end }}

{{/* Pod-template annotations: the checksum of the component's ConfigMap, so that a config change rolls the pods. */}}
{{- define "runtimetruth.podAnnotations" -}}
checksum/config: {{ include (printf "runtimetruth.%s.configmap" .component) .root | sha256sum }}
{{- with (index .root.Values .component).podAnnotations }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Common pod settings. */}}
{{- define "runtimetruth.podCommon" -}}
{{- $svc := index .root.Values .component }}
serviceAccountName: {{ include "runtimetruth.serviceAccountName" . }}
automountServiceAccountToken: false
enableServiceLinks: false
securityContext:
  {{- include "runtimetruth.podSecurityContext" . | nindent 2 }}
terminationGracePeriodSeconds: {{ $svc.terminationGracePeriodSeconds }}
{{- with .root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $svc.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with $svc.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $svc.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $svc.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* Volumes and mounts every component has: its config file and a writable /tmp. */}}
{{- define "runtimetruth.commonVolumes" -}}
- name: config
  configMap:
    name: {{ include "runtimetruth.componentName" . }}
- name: tmp
  emptyDir:
    sizeLimit: 64Mi
{{- end }}

{{- define "runtimetruth.commonVolumeMounts" -}}
- name: config
  mountPath: {{ include "runtimetruth.configDir" . }}
  readOnly: true
- name: tmp
  mountPath: /tmp
{{- end }}

{{/* The container's command line. */}}
{{- define "runtimetruth.args" -}}
- --config
- {{ include "runtimetruth.configDir" . }}/{{ include "runtimetruth.configFile" . }}
{{- end }}

{{/* A component's config file: the rendered dict with its `config` values merged over it. */}}
{{- define "runtimetruth.renderConfig" -}}
{{- $extra := deepCopy (default dict (index .root.Values .component).config) }}
{{- $platform := include "runtimetruth.platformConfig" .root | fromYaml }}
{{- toYaml (mustMergeOverwrite .config $platform $extra) }}
{{- end }}

{{/* The ConfigMap of a component (also the source of its checksum). */}}
{{- define "runtimetruth.configMap" -}}
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ include "runtimetruth.componentName" . }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "runtimetruth.componentLabels" . | nindent 4 }}
data:
  {{ include "runtimetruth.configFile" . }}: |
    {{- include "runtimetruth.renderConfig" . | nindent 4 }}
{{- end }}

{{/* The ports of a host:port address (syslog), or nothing. */}}
{{- define "runtimetruth.addressPort" -}}
{{- $parts := splitList ":" . }}
{{- if gt (len $parts) 1 }}{{ last $parts }}{{ end }}
{{- end }}

{{/* The ClickHouse DSN, with the password as a $(VAR) reference to the environment. */}}
{{- define "runtimetruth.clickhouseDSN" -}}
{{- $c := .Values.clickhouse }}
{{- $auth := $c.user }}
{{- if $c.passwordSecret.name }}{{ $auth = printf "%s:$(RUNTIMETRUTH_CLICKHOUSE_PASSWORD)" $c.user }}{{ end }}
{{- $params := list }}
{{- range $k, $v := $c.params }}{{ $params = append $params (printf "%s=%v" $k $v) }}{{ end }}
{{- if $c.secure }}{{ $params = append $params "secure=true" }}{{ end }}
{{- $q := "" }}
{{- if $params }}{{ $q = printf "?%s" (join "&" $params) }}{{ end }}
{{- printf "clickhouse://%s@%s:%d/%s%s" $auth $c.host (int $c.port) $c.database $q }}
{{- end }}
