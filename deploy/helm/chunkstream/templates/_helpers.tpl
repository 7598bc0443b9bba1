{{/*
Everything structural comes from the kustomize base's files (files/ links to deploy/k8s):
these helpers read them once and hand out what every template needs.
*/}}

{{- define "chunkstream.fullname" -}}
{{- .Values.fullnameOverride | default .Release.Name -}}
{{- end -}}

{{/* The base's kustomization.yaml, parsed. */}}
{{- define "chunkstream.kustomization" -}}
{{- .Files.Get "files/base/kustomization.yaml" -}}
{{- end -}}

{{/*
Labels of every object: the base's `labels` pairs (the instance is the release's name), plus
the two that say Helm made it. JSON, for fromJson.
*/}}
{{- define "chunkstream.labels" -}}
{{- $k := include "chunkstream.kustomization" . | fromYaml -}}
{{- $labels := dict -}}
{{- range $k.labels -}}
{{- $labels = merge $labels .pairs -}}
{{- end -}}
{{- $_ := set $labels "app.kubernetes.io/instance" .Release.Name -}}
{{- $_ := set $labels "app.kubernetes.io/managed-by" .Release.Service -}}
{{- $_ := set $labels "helm.sh/chart" (printf "%s-%s" .Chart.Name .Chart.Version) -}}
{{- toJson $labels -}}
{{- end -}}

{{/* Selector labels: the base's pairs with includeSelectors, the instance the release's. */}}
{{- define "chunkstream.selectorLabels" -}}
{{- $k := include "chunkstream.kustomization" . | fromYaml -}}
{{- $labels := dict -}}
{{- range $k.labels -}}
{{- if .includeSelectors -}}
{{- $labels = merge $labels .pairs -}}
{{- end -}}
{{- end -}}
{{- $_ := set $labels "app.kubernetes.io/instance" .Release.Name -}}
{{- toJson $labels -}}
{{- end -}}

{{/* The ConfigMap's data: the base's configMapGenerator literals, .Values.config over them. */}}
{{- define "chunkstream.config" -}}
{{- $k := include "chunkstream.kustomization" . | fromYaml -}}
{{- $data := dict -}}
{{- range (index $k.configMapGenerator 0).literals -}}
{{- $kv := splitn "=" 2 . -}}
{{- $_ := set $data $kv._0 $kv._1 -}}
{{- end -}}
{{- range $key, $value := .Values.config -}}
{{- $_ := set $data $key (toString $value) -}}
{{- end -}}
{{- toJson $data -}}
{{- end -}}

{{/* The image: values, else deploy/k8s/components/image. */}}
{{- define "chunkstream.image" -}}
{{- $image := index (.Files.Get "files/image/kustomization.yaml" | fromYaml).images 0 -}}
{{- $repository := .Values.image.repository | default $image.newName -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" $repository .Values.image.digest -}}
{{- else if and (not .Values.image.tag) $image.digest -}}
{{- printf "%s@%s" $repository $image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repository (.Values.image.tag | default $image.newTag) -}}
{{- end -}}
{{- end -}}

{{/* A base object's metadata as this release names it (suffix after the base's "chunkstream"). */}}
{{- define "chunkstream.metadata" -}}
{{- $root := index . 0 -}}
{{- $obj := index . 1 -}}
{{- $suffix := trimPrefix "chunkstream" $obj.metadata.name -}}
{{- $_ := set $obj.metadata "name" (printf "%s%s" (include "chunkstream.fullname" $root) $suffix) -}}
{{- $_ := set $obj.metadata "namespace" $root.Release.Namespace -}}
{{- $_ := set $obj.metadata "labels" (merge (include "chunkstream.labels" $root | fromJson) ($obj.metadata.labels | default dict)) -}}
{{- end -}}
