{{/* Names, labels and shared pod parts. Every resource name comes from here. */}}

{{- define "sluice.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "sluice.fullname" -}}
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

{{/* The name of one component's resources: (dict "root" $ "component" "web"). */}}
{{- define "sluice.componentName" -}}
{{- printf "%s-%s" (include "sluice.fullname" .root) .component | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The name of a worker pool's resources: (dict "root" $ "class" "routine"). */}}
{{- define "sluice.workerName" -}}
{{- include "sluice.componentName" (dict "root" .root "component" (printf "worker-%s" .class)) }}
{{- end }}

{{- define "sluice.configMapName" -}}
{{- include "sluice.componentName" (dict "root" . "component" "config") }}
{{- end }}

{{- define "sluice.secretName" -}}
{{- if .Values.secrets.existingSecret }}
{{- .Values.secrets.existingSecret }}
{{- else }}
{{- include "sluice.componentName" (dict "root" . "component" "secrets") }}
{{- end }}
{{- end }}

{{- define "sluice.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "sluice.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "sluice.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Selector labels of one component: (dict "root" $ "component" "web"). */}}
{{- define "sluice.selectorLabels" -}}
app.kubernetes.io/name: {{ include "sluice.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/* All labels of one component's resources. */}}
{{- define "sluice.labels" -}}
helm.sh/chart: {{ include "sluice.chart" .root }}
{{ include "sluice.selectorLabels" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/part-of: sluice
{{- with .root.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "sluice.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* The Celery queue of a class: SLUICE_QUEUES may rename it. (dict "root" $ "class" "routine") */}}
{{- define "sluice.queueName" -}}
{{- $queue := get (default dict .root.Values.config.queues) .class }}
{{- default .class (and $queue (get $queue "queue")) }}
{{- end }}

{{/* The exporter's KEDA endpoint for a class, by full DNS name: KEDA calls it from its own namespace. */}}
{{- define "sluice.scalerUrl" -}}
{{- $svc := include "sluice.componentName" (dict "root" .root "component" "exporter") }}
{{- printf "http://%s.%s.svc.%s:%v/scaler/%s" $svc .root.Release.Namespace .root.Values.clusterDomain .root.Values.exporter.service.port (include "sluice.queueName" .) }}
{{- end }}

{{/* A duration of the schema's form ("90s", "2m", "1h") in seconds. */}}
{{- define "sluice.seconds" -}}
{{- $last := sub (len .) 1 | int }}
{{- mul (substr 0 $last . | int) (get (dict "s" 1 "m" 60 "h" 3600) (substr $last (len .) .)) }}
{{- end }}

{{/* keda.latencyWindow ("2m") in seconds, for the exporter's --window. */}}
{{- define "sluice.windowSeconds" -}}
{{- include "sluice.seconds" .Values.keda.latencyWindow }}
{{- end }}

{{/* keda.floorWindow ("15m") in seconds, for the exporter's --floor-window. */}}
{{- define "sluice.floorWindowSeconds" -}}
{{- include "sluice.seconds" .Values.keda.floorWindow }}
{{- end }}

{{/* Refuse values that would deploy something unsafe; the schema cannot express these. */}}
{{- define "sluice.validate" -}}
{{- $w := .Values.workers }}
{{- if and .Values.flower.enabled (not .Values.secrets.existingSecret) (or (not .Values.flower.auth.username) (not .Values.flower.auth.password)) }}
{{- fail "flower.enabled needs flower.auth.username and flower.auth.password (or FLOWER_BASIC_AUTH in secrets.existingSecret): Flower is never deployed without authentication" }}
{{- end }}
{{- if and .Values.keda.enabled (eq .Values.keda.trigger "metrics-api") (not .Values.exporter.enabled) }}
{{- fail "keda.trigger metrics-api reads the exporter's /scaler endpoint: enable exporter, or use keda.trigger prometheus" }}
{{- end }}
{{- if lt (int (include "sluice.floorWindowSeconds" .)) (int (include "sluice.windowSeconds" .)) }}
{{- fail "keda.floorWindow must be at least keda.latencyWindow: the capacity floor is the slow signal, averaged over a longer window than latency" }}
{{- end }}
{{- if le (int $w.terminationGracePeriodSeconds) (int $w.longestTaskSeconds) }}
{{- fail "workers.terminationGracePeriodSeconds must exceed workers.longestTaskSeconds, or a scale-down kills a running task" }}
{{- end }}
{{- if lt (int .Values.config.softShutdownSeconds) (int $w.longestTaskSeconds) }}
{{- fail "config.softShutdownSeconds must be at least workers.longestTaskSeconds, so a soft shutdown lets the longest task finish" }}
{{- end }}
{{- if ge (int .Values.config.softShutdownSeconds) (int $w.terminationGracePeriodSeconds) }}
{{- fail "config.softShutdownSeconds must be below workers.terminationGracePeriodSeconds, so Celery requeues before the kubelet's SIGKILL" }}
{{- end }}
{{- range $class := list "critical" "routine" "background" }}
{{- $auto := (index $w $class).autoscaling }}
{{- if and $.Values.keda.enabled $auto.scheduled $auto.scheduled.enabled }}
{{- if not $.Values.exporter.enabled }}
{{- fail (printf "workers.%s.autoscaling.scheduled reads the exporter's /scaler endpoint: enable exporter, or set workers.%s.autoscaling.scheduled.enabled=false" $class $class) }}
{{- end }}
{{- $within := include "sluice.seconds" $auto.scheduled.lookAhead | int }}
{{- if gt $within 3600 }}
{{- fail (printf "workers.%s.autoscaling.scheduled.lookAhead must be at most 1h: Redis stages the scheduled sends of the next hour (SLUICE_SCHEDULE's staged_s), and the exporter looks no further" $class) }}
{{- end }}
{{- if lt (float64 $within) (float64 $auto.targetLatencySeconds) }}
{{- fail (printf "workers.%s.autoscaling.scheduled.lookAhead must be at least targetLatencySeconds, the span whose busiest seconds it scales for" $class) }}
{{- end }}
{{- end }}
{{- range $arg := (index $w $class).args }}
{{- if or (eq $arg "-c" "--concurrency") (hasPrefix "--concurrency=" $arg) }}
{{- fail (printf "workers.%s.args must not set --concurrency: set workers.%s.concurrency, which the capacity floor counts on" $class $class) }}
{{- end }}
{{- end }}
{{- end }}
{{- range $name, $channel := .Values.config.channels }}
{{- range $key, $_ := (default dict (get (default dict $channel) "options")) }}
{{- if regexMatch "(?i)(secret|password|passwd|token|api_?key|credential|private)" $key }}
{{- fail (printf "config.channels.%s.options.%s looks like a secret, and config is rendered into the ConfigMap: put it in secrets.channelOptions.%s.%s" $name $key $name $key) }}
{{- end }}
{{- end }}
{{- end }}
{{- range $name, $_ := .Values.config.extraEnv }}
{{- if regexMatch "(?i)(secret|password|passwd|token|api_?key|credential|private)" $name }}
{{- fail (printf "config.extraEnv.%s looks like a secret, and config is rendered into the ConfigMap: put it in secrets.extraEnv" $name) }}
{{- end }}
{{- end }}
{{- if le (int .Values.config.visibilityTimeoutSeconds) (int $w.terminationGracePeriodSeconds) }}
{{- fail "config.visibilityTimeoutSeconds must exceed workers.terminationGracePeriodSeconds, or a task still finishing on a stopping pod is handed to a second worker" }}
{{- end }}
{{- end }}

{{/* Annotations that roll pods when the settings change. */}}
{{- define "sluice.podAnnotations" -}}
checksum/config: {{ include (print .Template.BasePath "/configmap.yaml") . | sha256sum }}
{{- if not .Values.secrets.existingSecret }}
checksum/secrets: {{ dict "secrets" .Values.secrets "flower" .Values.flower.auth | toJson | sha256sum }}
{{- end }}
{{- with .Values.podAnnotations }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Pod-level fields shared by every pod. */}}
{{- define "sluice.podSpecCommon" -}}
serviceAccountName: {{ include "sluice.serviceAccountName" . }}
automountServiceAccountToken: false
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
volumes:
  - name: tmp
    emptyDir: {}
{{- with .Values.secrets.redisCaSecret }}
  - name: redis-ca
    secret:
      secretName: {{ . }}
      items:
        - key: ca.crt
          path: ca.crt
{{- end }}
{{- end }}

{{/* The secret settings every container reads, as env list items. */}}
{{- define "sluice.secretEnv" -}}
{{- include "sluice.secretEnvItems" . | trim }}
{{- end }}

{{- define "sluice.secretEnvItems" -}}
{{- range $key := concat (list "DATABASE_URL" "REDIS_URL" "DJANGO_SECRET_KEY") (keys .Values.secrets.extraEnv | sortAlpha) }}
- name: {{ $key }}
  valueFrom:
    secretKeyRef:
      name: {{ include "sluice.secretName" $ }}
      key: {{ $key }}
{{- end }}
{{- range $name := keys .Values.secrets.anymail | sortAlpha }}
- name: ANYMAIL_{{ $name }}
  valueFrom:
    secretKeyRef:
      name: {{ include "sluice.secretName" $ }}
      key: ANYMAIL_{{ $name }}
{{- end }}
{{- /* Channel secrets: optional, so an existing Secret without them still works. */}}
- name: SLUICE_CHANNEL_OPTIONS
  valueFrom:
    secretKeyRef:
      name: {{ include "sluice.secretName" . }}
      key: SLUICE_CHANNEL_OPTIONS
      optional: true
{{- /* A Redis per class, and the digest's: optional, so a class without its own uses REDIS_URL. */}}
{{- range $class := list "CRITICAL" "ROUTINE" "BACKGROUND" "DIGEST" }}
- name: REDIS_URL_{{ $class }}
  valueFrom:
    secretKeyRef:
      name: {{ include "sluice.secretName" $ }}
      key: REDIS_URL_{{ $class }}
      optional: true
{{- end }}
{{- end }}

{{/* Container fields shared by every container: image, settings, security, a writable /tmp. */}}
{{- define "sluice.containerCommon" -}}
image: {{ include "sluice.image" . | quote }}
imagePullPolicy: {{ .Values.image.pullPolicy }}
envFrom:
  - configMapRef:
      name: {{ include "sluice.configMapName" . }}
securityContext:
  {{- toYaml .Values.securityContext | nindent 2 }}
volumeMounts:
  - name: tmp
    mountPath: /tmp
{{- if .Values.secrets.redisCaSecret }}
  - name: redis-ca
    mountPath: /etc/sluice/redis-ca
    readOnly: true
{{- end }}
{{- end }}
