{{/*
Names. The release's objects are named after it: installed as release
"stackyard" they are stackyard, stackyard-artifacts, stackyard-cloud-api,
... as the docs name them. Cut to 50 characters so that the longest
suffix ("-cloud-api", "-dashboard", "-leader-election") still fits a
63-character name.
*/}}
{{- define "stackyard.name" -}}
{{- .Values.nameOverride | default .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}

{{- define "stackyard.fullname" -}}
{{- $name := include "stackyard.name" . -}}
{{- $full := .Release.Name -}}
{{- if not (contains $name .Release.Name) -}}
{{- $full = printf "%s-%s" .Release.Name $name -}}
{{- end -}}
{{- .Values.fullnameOverride | default $full | trunc 50 | trimSuffix "-" -}}
{{- end -}}

{{/* selectorLabels pick the operator's pods; they never change after install. */}}
{{- define "stackyard.selectorLabels" -}}
app.kubernetes.io/name: {{ include "stackyard.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* labels go on every object the chart renders. */}}
{{- define "stackyard.labels" -}}
{{ include "stackyard.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | trunc 63 | trimSuffix "-" | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "stackyard.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- .Values.serviceAccount.name | default (include "stackyard.fullname" .) -}}
{{- else -}}
{{- required "serviceAccount.name must name an existing ServiceAccount when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/*
imageRef renders repository[:tag][@digest] from a dict with repository,
tag, digest and the fallback tag. A digest pins the image whatever the tag.
*/}}
{{- define "stackyard.imageRef" -}}
{{- $ref := .repository -}}
{{- $tag := .tag | default .defaultTag -}}
{{- if $tag -}}
{{- $ref = printf "%s:%s" $ref $tag -}}
{{- end -}}
{{- if .digest -}}
{{- $ref = printf "%s@%s" $ref .digest -}}
{{- end -}}
{{- $ref -}}
{{- end -}}

{{- define "stackyard.image" -}}
{{- include "stackyard.imageRef" (dict "repository" .Values.image.repository "tag" .Values.image.tag "digest" .Values.image.digest "defaultTag" .Chart.AppVersion) -}}
{{- end -}}

{{/*
agentImage is the workspace pods' init container, which copies the
stackyard binary out of it: by default the operator's own image, so agent
and operator are the same build.
*/}}
{{- define "stackyard.agentImage" -}}
{{- if .Values.agentImage.repository -}}
{{- include "stackyard.imageRef" (dict "repository" .Values.agentImage.repository "tag" .Values.agentImage.tag "digest" .Values.agentImage.digest "defaultTag" .Chart.AppVersion) -}}
{{- else -}}
{{- include "stackyard.image" . -}}
{{- end -}}
{{- end -}}

{{/* artifactURL is where workspace pods download Program artifacts. */}}
{{- define "stackyard.artifactURL" -}}
{{- .Values.artifacts.url | default (printf "http://%s-artifacts.%s.svc:%d" (include "stackyard.fullname" .) .Release.Namespace (int .Values.artifacts.port)) -}}
{{- end -}}

{{/*
generatedDocs splits a file of YAML documents that `make generate` copied
into files/ and returns them parsed, as a list under the key "docs"
(templates can only pass strings, so the caller uses fromYaml on this).
*/}}
{{- define "stackyard.generatedDocs" -}}
{{- $docs := list -}}
{{- range regexSplit "(?m)^---[ \t]*$" (.root.Files.Get .path) -1 -}}
{{- $doc := fromYaml . -}}
{{- if $doc.Error -}}
{{- fail (printf "%s: %s" $.path $doc.Error) -}}
{{- end -}}
{{- if $doc -}}
{{- $docs = append $docs $doc -}}
{{- end -}}
{{- end -}}
{{- toYaml (dict "docs" $docs) -}}
{{- end -}}

{{/*
dashboardURL is where users reach the dashboard (--dashboard-external-url,
which Updates link to): dashboard.externalURL, or else the first host of
the dashboard's Ingress, https when a TLS entry covers it; empty when
neither is set.
*/}}
{{- define "stackyard.dashboardURL" -}}
{{- $ingress := .Values.dashboard.ingress -}}
{{- if .Values.dashboard.externalURL -}}
{{- .Values.dashboard.externalURL -}}
{{- else if and $ingress.enabled $ingress.hosts -}}
{{- $host := (first $ingress.hosts).host -}}
{{- $scheme := "http" -}}
{{- range $ingress.tls -}}
{{- if has $host (.hosts | default list) -}}
{{- $scheme = "https" -}}
{{- end -}}
{{- end -}}
{{- if $host -}}
{{- printf "%s://%s" $scheme $host -}}
{{- end -}}
{{- end -}}
{{- end -}}
