{{/* Chart name, overridable with nameOverride. */}}
{{- define "switchboard.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Resource name: the release name, suffixed with the chart name unless it already holds it. */}}
{{- define "switchboard.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains (include "switchboard.name" .) .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "switchboard.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Labels that select the pods; never change them on an installed release. */}}
{{- define "switchboard.selectorLabels" -}}
app.kubernetes.io/name: {{ include "switchboard.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Labels of every resource. */}}
{{- define "switchboard.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "switchboard.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/*
One config value as a quoted environment value: lists joined with commas, numbers as integers
(Helm reads YAML numbers as floats, which would print 1800000 as 1.8e+06), the rest as text.
*/}}
{{- define "switchboard.envValue" -}}
{{- if kindIs "slice" . -}}
{{- join "," . | quote -}}
{{- else if or (kindIs "float64" .) (kindIs "int64" .) (kindIs "int" .) -}}
{{- int64 . | toString | quote -}}
{{- else -}}
{{- toString . | quote -}}
{{- end -}}
{{- end -}}

{{/* The environment variable of a dotted config key: session.max_sessions -> SWITCHBOARD_SESSION__MAX_SESSIONS. */}}
{{- define "switchboard.envName" -}}
SWITCHBOARD_{{ . | replace "." "__" | upper }}
{{- end -}}

{{/*
The config keys given from Secrets, as YAML: key -> {name, key} of the secretKeyRef. Their
variables come from the Secret and they leave the ConfigMap.
*/}}
{{- define "switchboard.secretKeys" -}}
{{- $refs := dict -}}
{{- with .Values.redis.passwordSecret }}
{{- $_ := set $refs "redis.password" (dict "name" . "key" $.Values.redis.passwordSecretKey) }}
{{- end }}
{{- with .Values.redis.sentinelPasswordSecret }}
{{- $_ := set $refs "redis.sentinel_password" (dict "name" . "key" $.Values.redis.sentinelPasswordSecretKey) }}
{{- end }}
{{- with .Values.auth.publicKeysSecret }}
{{- $_ := set $refs "auth.jwt_public_keys_pem" (dict "name" . "key" $.Values.auth.publicKeysSecretKey) }}
{{- end }}
{{- with .Values.auth.hs256SecretsSecret }}
{{- $_ := set $refs "auth.jwt_hs256_secrets" (dict "name" . "key" $.Values.auth.hs256SecretsSecretKey) }}
{{- end }}
{{- with .Values.auth.introspectionClientSecret }}
{{- $_ := set $refs "auth.introspection_client_secret" (dict "name" . "key" $.Values.auth.introspectionClientSecretKey) }}
{{- end }}
{{- with .Values.mrtr.stateKeysSecret }}
{{- $_ := set $refs "stateless.mrtr.state_keys" (dict "name" . "key" $.Values.mrtr.stateKeysSecretKey) }}
{{- end }}
{{- toYaml $refs -}}
{{- end -}}

{{/*
A duration of the config (humantime: "30s", "1m 30s", "500ms") in whole seconds, rounded up;
empty when it uses units other than ms, s, m and h (then the chart checks nothing).
*/}}
{{- define "switchboard.durationSeconds" -}}
{{- $text := nospace (toString .) -}}
{{- if regexMatch "^([0-9]+(ms|s|m|h))+$" $text -}}
{{- $unit := dict "ms" 0.001 "s" 1.0 "m" 60.0 "h" 3600.0 -}}
{{- $total := 0.0 -}}
{{- range regexFindAll "[0-9]+(ms|s|m|h)" $text -1 -}}
{{- $n := regexFind "^[0-9]+" . -}}
{{- $total = addf $total (mulf (float64 $n) (get $unit (trimPrefix $n .))) -}}
{{- end -}}
{{- ceil $total | int -}}
{{- end -}}
{{- end -}}

{{/*
config."http.max_body" as an nginx size (ingress-nginx proxy-body-size): sizes as the node reads
them (bytesize: 4MiB, 16KiB, 64kB, 4096), written as Nm or Nk (nginx's 1024s) or plain bytes.
*/}}
{{- define "switchboard.nginxBodySize" -}}
{{- $raw := index .Values.config "http.max_body" | default "4MiB" -}}
{{- $bytes := 0 -}}
{{- if or (kindIs "float64" $raw) (kindIs "int64" $raw) (kindIs "int" $raw) -}}
{{- $bytes = int64 $raw -}}
{{- else -}}
{{- $text := lower (nospace (toString $raw)) -}}
{{- $number := regexFind "^[0-9]+(\\.[0-9]+)?" $text -}}
{{- $factors := dict "" 1 "b" 1 "k" 1000 "kb" 1000 "ki" 1024 "kib" 1024 "m" 1000000 "mb" 1000000 "mi" 1048576 "mib" 1048576 "g" 1000000000 "gb" 1000000000 "gi" 1073741824 "gib" 1073741824 -}}
{{- $suffix := trimPrefix $number $text -}}
{{- if or (not $number) (not (hasKey $factors $suffix)) -}}
{{- fail (printf "config.\"http.max_body\" %q: not a size the chart can turn into proxy-body-size (use e.g. 4MiB)" $text) -}}
{{- end -}}
{{- $bytes = mulf (float64 $number) (index $factors $suffix) | int64 -}}
{{- end -}}
{{- if eq (mod $bytes 1048576) 0 -}}
{{ div $bytes 1048576 }}m
{{- else if eq (mod $bytes 1024) 0 -}}
{{ div $bytes 1024 }}k
{{- else -}}
{{ $bytes }}
{{- end -}}
{{- end -}}
