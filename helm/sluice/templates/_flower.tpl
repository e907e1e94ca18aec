{{/* The classes that get a Flower of their own, comma-separated: flower.classes, or critical's plus each class
whose Redis URL (secrets.redisUrls) differs from critical's and from the classes before it. Flower and
`celery inspect` see one broker: the workers and task events of the classes on that Redis only. */}}
{{- define "sluice.flowerClasses" -}}
{{- if .Values.flower.classes -}}
{{- join "," .Values.flower.classes -}}
{{- else -}}
{{- $urls := .Values.secrets.redisUrls | default dict -}}
{{- $seen := list (default .Values.secrets.redisUrl $urls.critical) -}}
{{- $classes := list "critical" -}}
{{- range $class := list "routine" "background" -}}
{{- $url := default $.Values.secrets.redisUrl (index $urls $class) -}}
{{- if not (has $url $seen) -}}
{{- $seen = append $seen $url -}}
{{- $classes = append $classes $class -}}
{{- end -}}
{{- end -}}
{{- join "," $classes -}}
{{- end -}}
{{- end }}

{{/* Whether `class` gets a Flower (dict "root" . "class" "routine"). */}}
{{- define "sluice.flowerFor" -}}
{{- if and .root.Values.flower.enabled (has .class (splitList "," (include "sluice.flowerClasses" .root))) -}}
true
{{- end -}}
{{- end }}

{{/* Flower's component name: "flower" for critical's (the name it always had), "flower-<class>" for the others. */}}
{{- define "sluice.flowerComponent" -}}
{{- if eq .class "critical" -}}flower{{- else -}}flower-{{ .class }}{{- end -}}
{{- end }}

{{/* A Flower Deployment on one class's Redis (dict "root" . "class" "routine"). */}}
{{- define "sluice.flower.deployment" -}}
{{- if include "sluice.flowerFor" . }}
{{- $root := .root }}
{{- $component := include "sluice.flowerComponent" . }}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "sluice.componentName" (dict "root" $root "component" $component) }}
  labels:
    {{- include "sluice.labels" (dict "root" $root "component" $component) | nindent 4 }}
spec:
  replicas: 1
  revisionHistoryLimit: 3
  selector:
    matchLabels:
      {{- include "sluice.selectorLabels" (dict "root" $root "component" $component) | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "sluice.selectorLabels" (dict "root" $root "component" $component) | nindent 8 }}
      annotations:
        {{- include "sluice.podAnnotations" $root | nindent 8 }}
    spec:
      {{- include "sluice.podSpecCommon" $root | nindent 6 }}
      containers:
        - name: flower
          {{- include "sluice.containerCommon" $root | nindent 10 }}
          # On this class's Redis: its workers, their task events and `inspect` answers.
          command: ["python", "manage.py", "flower", "--class", {{ .class | quote }}, "--port=5555"]
          env:
            {{- include "sluice.secretEnv" $root | nindent 12 }}
            # Flower reads its basic auth ("user:password") from this variable; the key is
            # required, so the pod cannot start without it.
            - name: FLOWER_BASIC_AUTH
              valueFrom:
                secretKeyRef:
                  name: {{ include "sluice.secretName" $root }}
                  key: FLOWER_BASIC_AUTH
          ports:
            - name: http
              containerPort: 5555
              protocol: TCP
          readinessProbe:
            httpGet:
              path: /healthcheck
              port: http
            periodSeconds: 15
          resources:
            {{- toYaml $root.Values.flower.resources | nindent 12 }}
{{- end }}
{{- end }}

{{/* The Service in front of one class's Flower (dict "root" . "class" "routine"). */}}
{{- define "sluice.flower.service" -}}
{{- if include "sluice.flowerFor" . }}
{{- $component := include "sluice.flowerComponent" . }}
apiVersion: v1
kind: Service
metadata:
  name: {{ include "sluice.componentName" (dict "root" .root "component" $component) }}
  labels:
    {{- include "sluice.labels" (dict "root" .root "component" $component) | nindent 4 }}
spec:
  type: ClusterIP
  selector:
    {{- include "sluice.selectorLabels" (dict "root" .root "component" $component) | nindent 4 }}
  ports:
    - name: http
      port: {{ .root.Values.flower.service.port }}
      targetPort: http
      protocol: TCP
{{- end }}
{{- end }}
