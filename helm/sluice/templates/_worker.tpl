{{/* A worker pool's Deployment, ScaledObject and PodDisruptionBudget: (dict "root" $ "class" "routine"). */}}

{{- define "sluice.worker.deployment" -}}
{{- $root := .root }}
{{- $pool := index $root.Values.workers .class }}
{{- $component := printf "worker-%s" .class }}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "sluice.workerName" . }}
  labels:
    {{- include "sluice.labels" (dict "root" $root "component" $component) | nindent 4 }}
spec:
  {{- if not $root.Values.keda.enabled }}
  replicas: {{ $pool.replicas }}
  {{- end }}
  revisionHistoryLimit: 3
  selector:
    matchLabels:
      {{- include "sluice.selectorLabels" (dict "root" $root "component" $component) | nindent 6 }}
  strategy:
    type: RollingUpdate
    rollingUpdate:
      # A new pod starts before an old one stops: a rollout never shrinks the pool.
      maxSurge: 1
      maxUnavailable: 0
  template:
    metadata:
      labels:
        {{- include "sluice.selectorLabels" (dict "root" $root "component" $component) | nindent 8 }}
      annotations:
        {{- include "sluice.podAnnotations" $root | nindent 8 }}
    spec:
      {{- include "sluice.podSpecCommon" $root | nindent 6 }}
      # SIGTERM starts Celery's warm shutdown: no new messages, running tasks finish. The kubelet
      # waits this long before SIGKILL, longer than the longest task (checked in sluice.validate).
      terminationGracePeriodSeconds: {{ $root.Values.workers.terminationGracePeriodSeconds }}
      containers:
        - name: worker
          {{- include "sluice.containerCommon" $root | nindent 10 }}
          command: ["python", "manage.py", "worker", {{ .class | quote }}]
          # The slots per pod come from values, not the code's profile, so that the capacity
          # floor of the ScaledObject counts the slots the pod really runs.
          args:
            - "--concurrency"
            - {{ $pool.concurrency | quote }}
            {{- with $pool.args }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          env:
            {{- include "sluice.secretEnv" $root | nindent 12 }}
          resources:
            {{- toYaml $pool.resources | nindent 12 }}
{{- end }}

{{- define "sluice.worker.pdb" -}}
{{- $root := .root }}
{{- $pool := index $root.Values.workers .class }}
{{- $component := printf "worker-%s" .class }}
{{- if $pool.pdb.enabled }}
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ include "sluice.workerName" . }}
  labels:
    {{- include "sluice.labels" (dict "root" $root "component" $component) | nindent 4 }}
spec:
  maxUnavailable: {{ $pool.pdb.maxUnavailable }}
  selector:
    matchLabels:
      {{- include "sluice.selectorLabels" (dict "root" $root "component" $component) | nindent 6 }}
{{- end }}
{{- end }}

{{- define "sluice.worker.scaledobject" -}}
{{- $root := .root }}
{{- $keda := $root.Values.keda }}
{{- $auto := (index $root.Values.workers .class).autoscaling }}
{{- $component := printf "worker-%s" .class }}
{{- if $keda.enabled }}
{{- $behavior := mergeOverwrite (deepCopy $keda.behavior) (deepCopy (default dict $auto.behavior)) }}
{{- if ne (toString $keda.tolerance) "0.1" }}
{{- $_ := set $behavior.scaleUp "tolerance" (toString $keda.tolerance) }}
{{- $_ := set $behavior.scaleDown "tolerance" (toString $keda.tolerance) }}
{{- end }}
{{- $queue := include "sluice.queueName" . }}
{{- $floor := $auto.capacityFloor }}
{{- /* Busy slots one pod may carry: its slots × the target utilization. */}}
{{- $perPod := toString (mulf (index $root.Values.workers .class).concurrency $floor.targetUtilization) }}
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata:
  name: {{ include "sluice.workerName" . }}
  labels:
    {{- include "sluice.labels" (dict "root" $root "component" $component) | nindent 4 }}
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: {{ include "sluice.workerName" . }}
  pollingInterval: {{ $keda.pollingInterval }}
  cooldownPeriod: {{ $keda.cooldownPeriod }}
  minReplicaCount: {{ $auto.minReplicas }}
  maxReplicaCount: {{ $auto.maxReplicas }}
  advanced:
    horizontalPodAutoscalerConfig:
      name: {{ include "sluice.workerName" . }}
      behavior:
        {{- toYaml $behavior | nindent 8 }}
  # The HPA takes the largest of the triggers' proposals. Latency does not divide across pods, so
  # its target is a Value: the HPA asks for ceil(ready pods × latency / target), fast on a backlog.
  # Latency is zero whenever the pool keeps up and cannot tell how many pods are enough; busy slots
  # (Little's law) can, and do divide across pods: as an AverageValue the HPA keeps
  # ceil(busy slots / per-pod target), so a scale-down stops at what the arriving work needs.
  # Its activation is one pod's worth: a trickle below it leaves waking and sleeping to latency.
  triggers:
    {{- if eq $keda.trigger "prometheus" }}
    {{- $selector := printf "queue=%q" $queue }}
    {{- if $keda.prometheus.matchNamespace }}
    {{- $selector = printf "%s,namespace=%q" $selector $root.Release.Namespace }}
    {{- end }}
    - type: prometheus
      name: latency
      metricType: Value
      metadata:
        serverAddress: {{ $keda.prometheus.serverAddress | quote }}
        query: {{ printf "max(max_over_time(sluice_queue_latency_seconds{%s}[%s]))" $selector $keda.latencyWindow | quote }}
        threshold: {{ toString $auto.targetLatencySeconds | quote }}
        activationThreshold: {{ toString $auto.activationLatencySeconds | quote }}
        # No series is an error, not a zero: a broken scrape must not scale the pool down.
        ignoreNullValues: "false"
      {{- with $keda.prometheus.authenticationRef }}
      authenticationRef:
        name: {{ . }}
      {{- end }}
    {{- if $floor.enabled }}
    - type: prometheus
      name: busy-slots
      metricType: AverageValue
      metadata:
        serverAddress: {{ $keda.prometheus.serverAddress | quote }}
        query: {{ printf "sum(avg_over_time(sluice_busy_slots{%s}[%s]))" $selector $keda.latencyWindow | quote }}
        threshold: {{ $perPod | quote }}
        activationThreshold: {{ $perPod | quote }}
        ignoreNullValues: "false"
      {{- with $keda.prometheus.authenticationRef }}
      authenticationRef:
        name: {{ . }}
      {{- end }}
    {{- end }}
    {{- else }}
    - type: metrics-api
      name: latency
      metricType: Value
      metadata:
        url: {{ include "sluice.scalerUrl" . | quote }}
        format: json
        valueLocation: {{ $keda.metricsApi.valueLocation | quote }}
        targetValue: {{ toString $auto.targetLatencySeconds | quote }}
        activationTargetValue: {{ toString $auto.activationLatencySeconds | quote }}
    {{- if $floor.enabled }}
    - type: metrics-api
      name: busy-slots
      metricType: AverageValue
      metadata:
        url: {{ include "sluice.scalerUrl" . | quote }}
        format: json
        valueLocation: "busy_slots"
        targetValue: {{ $perPod | quote }}
        activationTargetValue: {{ $perPod | quote }}
    {{- end }}
    {{- end }}
    {{- /* The scheduled trigger: the busy slots the pool will need when the busiest span of the scheduled sends
    due within the look-ahead comes due (the exporter's JSON whatever keda.trigger says: a per-second peak is no
    Prometheus series). The span is the pool's latency target: draining the busiest T seconds of them at their own
    rate keeps each one's wait near T. With the floor on it adds the floor's busy slots, and with nothing scheduled
    it then reads what the floor reads: at a utilization no lower than the floor's it changes nothing. */}}
    {{- $sched := $auto.scheduled }}
    {{- if and $sched $sched.enabled }}
    {{- $within := include "sluice.seconds" $sched.lookAhead | int }}
    {{- $span := max 1 (ceil $auto.targetLatencySeconds | int) }}
    {{- $schedPerPod := toString (mulf (index $root.Values.workers .class).concurrency $sched.targetUtilization) }}
    - type: metrics-api
      name: scheduled
      metricType: AverageValue
      metadata:
        url: {{ printf "%s?within=%d&span=%d" (include "sluice.scalerUrl" .) $within $span | quote }}
        format: json
        valueLocation: {{ ternary "busy_slots_ahead" "scheduled_busy_slots" $floor.enabled | quote }}
        targetValue: {{ $schedPerPod | quote }}
        activationTargetValue: {{ $schedPerPod | quote }}
    {{- end }}
{{- end }}
{{- end }}
