{{/* Names and labels. */}}
{{- define "tollgate.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "tollgate.cp" -}}{{ include "tollgate.fullname" . }}-controlplane{{- end -}}
{{- define "tollgate.dp" -}}{{ include "tollgate.fullname" . }}-dataplane{{- end -}}

{{- define "tollgate.labels" -}}
app.kubernetes.io/name: tollgate
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* Selector labels of one component: include with (dict "ctx" $ "component" "controlplane"). */}}
{{- define "tollgate.selector" -}}
app.kubernetes.io/name: tollgate
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "tollgate.image" -}}{{ printf "%s:%s" .Values.image.repository (toString .Values.image.tag) }}{{- end -}}

{{/* Refuse a termination grace period that cannot hold preStop + drain + shutdown timeout. */}}
{{- define "tollgate.checkGrace" -}}
{{- $need := add .v.preStopSleepSeconds .v.drainDelaySeconds .v.shutdownTimeoutSeconds -}}
{{- if le (int .v.terminationGracePeriodSeconds) (int $need) -}}
{{- fail (printf "%s.terminationGracePeriodSeconds (%v) must exceed preStopSleepSeconds + drainDelaySeconds + shutdownTimeoutSeconds (%v)" .name .v.terminationGracePeriodSeconds $need) -}}
{{- end -}}
{{- end -}}
