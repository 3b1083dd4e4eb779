{{/* The chart name, or nameOverride. */}}
{{- define "informant.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The full name of every resource (Deployment, ServiceAccount, RBAC, Service, the CacheConfig,
the Lease): fullnameOverride, else <release>-<name>, else <release> when it already contains
the name. Truncated to 63 characters (DNS label).
*/}}
{{- define "informant.fullname" -}}
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

{{/* chart-version, as the helm.sh/chart label. */}}
{{- define "informant.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every resource. */}}
{{- define "informant.labels" -}}
helm.sh/chart: {{ include "informant.chart" . }}
{{ include "informant.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: informant
{{- end }}

{{/* Labels the Deployment, Service and PodDisruptionBudget select pods by. */}}
{{- define "informant.selectorLabels" -}}
app.kubernetes.io/name: {{ include "informant.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The manager's ServiceAccount name. */}}
{{- define "informant.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "informant.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
Whether leader election is on: leaderElection.enabled (the default, as kubebuilder's scaffold
passes --leader-elect even to one replica: a RollingUpdate runs the old and the new pod at once).
Off with more than one replica would run several managers at once: refused.
*/}}
{{- define "informant.leaderElect" -}}
{{- if .Values.leaderElection.enabled }}true
{{- else if gt (int .Values.replicaCount) 1 }}
{{- fail "leaderElection.enabled=false needs replicaCount 1: more replicas without a Lease would all reconcile and write status at once" }}
{{- end }}
{{- end }}

{{/*
The sharding the chart renders into its CacheConfig's spec.sharding, as YAML {ring, key}; empty
when sharding.enabled is off. The one place the sharding values are checked: sharding written
into cacheConfig.spec is refused (the chart would not give the replicas their identity, the
member Leases' RBAC or the PodDisruptionBudget), and so is a ring of fewer than two replicas
unless sharding.allowSingleReplica says so.
*/}}
{{- define "informant.sharding" -}}
{{- if hasKey (.Values.cacheConfig.spec | default (dict)) "sharding" -}}
{{- fail "cacheConfig.spec.sharding: set sharding.enabled (with sharding.ring and sharding.key) instead; the chart then also gives each replica its pod name as identity, the RBAC of the member Leases and a PodDisruptionBudget" -}}
{{- end -}}
{{- if .Values.sharding.enabled -}}
{{- if and (lt (int .Values.replicaCount) 2) (not .Values.sharding.allowSingleReplica) -}}
{{- fail (printf "sharding.enabled needs replicaCount 2 or more (it is %d): one replica shares the objects with nobody; raise replicaCount, or set sharding.allowSingleReplica=true for a ring of one that replicas added later (kubectl scale, an autoscaler) join" (int .Values.replicaCount)) -}}
{{- end -}}
{{- toYaml (dict "ring" (.Values.sharding.ring | default (include "informant.fullname" .)) "key" (.Values.sharding.key | default "namespace")) -}}
{{- end -}}
{{- end -}}

{{/*
The webhook Service's name, <fullname>-webhook (a DNS label: the full name cut to fit); also the
name of the webhook configurations the manager owns and the stem of its certificates' names.
*/}}
{{- define "informant.webhookService" -}}
{{- printf "%s-webhook" (include "informant.fullname" . | trunc 55 | trimSuffix "-") -}}
{{- end }}

{{/*
Whether the webhook endpoint is on ("true", else empty), once the webhook values are checked
together: a value that would have no effect is refused, every such value at once.
*/}}
{{- define "informant.webhook" -}}
{{- $w := .Values.webhook -}}
{{- $certManager := eq $w.certificates "certManager" -}}
{{- $errors := list -}}
{{- if not $w.enabled -}}
{{- if $certManager -}}
{{- $errors = append $errors "webhook.certificates=certManager: needs webhook.enabled=true (without the endpoint no certificate is served)" -}}
{{- end -}}
{{- if $w.injectCRDs -}}
{{- $errors = append $errors "webhook.injectCRDs: needs webhook.enabled=true (without the endpoint no caBundle is written)" -}}
{{- end -}}
{{- if ($w.clientCA | default (dict)).configMap -}}
{{- $errors = append $errors "webhook.clientCA.configMap: needs webhook.enabled=true (without the endpoint no client certificate is asked)" -}}
{{- end -}}
{{- end -}}
{{- if and (not $certManager) (($w.certManager | default (dict)).issuerRef) -}}
{{- $errors = append $errors "webhook.certManager.issuerRef: only with webhook.certificates=certManager (managed certificates are made by the manager)" -}}
{{- end -}}
{{- if and $certManager $w.injectCRDs -}}
{{- $errors = append $errors (printf "webhook.injectCRDs: managed certificates only (the manager writes no caBundle with cert-manager's certificate); annotate the CRDs with cert-manager.io/inject-ca-from: %s/%s instead" .Release.Namespace (include "informant.webhookService" .)) -}}
{{- end -}}
{{- if $errors -}}
{{- fail (printf "invalid webhook values (%d):\n%s" (len $errors) (join "\n" $errors)) -}}
{{- end -}}
{{- if $w.enabled }}true{{ end -}}
{{- end }}

{{/*
The plural resource name of a lower-case kind not in files/kinds.yaml (a custom resource):
kube-rs's guess (kube-core discovery `to_plural`), which `informant rbac` uses too.
*/}}
{{- define "informant.plural" -}}
{{- $w := . -}}
{{- if or (eq $w "endpoints") (eq $w "endpointslices") -}}
{{- $w -}}
{{- else if eq $w "nodemetrics" -}}
nodes
{{- else if eq $w "podmetrics" -}}
pods
{{- else if or (hasSuffix "s" $w) (hasSuffix "x" $w) (hasSuffix "z" $w) (hasSuffix "ch" $w) (hasSuffix "sh" $w) -}}
{{- printf "%ses" $w -}}
{{- else if and (hasSuffix "y" $w) (gt (len $w) 1) (not (has (substr (sub (len $w) 2 | int) (sub (len $w) 1 | int) $w) (list "a" "e" "i" "o" "u"))) -}}
{{- printf "%sies" (trimSuffix "y" $w) -}}
{{- else -}}
{{- printf "%ss" $w -}}
{{- end -}}
{{- end -}}

{{/*
The RBAC rules the CacheConfig needs, as YAML {cluster: [rules], namespaces: {ns: [rules]}}.
The same derivation as `informant rbac` (src/config/rbac.rs, where each rule is explained); the
chart tests compare the two for several configs, so change both together.
*/}}
{{- define "informant.rbacRules" -}}
{{- $spec := .Values.cacheConfig.spec | default (dict) -}}
{{- $sharding := include "informant.sharding" . | fromYaml -}}
{{- $kinds := .Files.Get "files/kinds.yaml" | fromYaml -}}
{{- $releaseNs := .Release.Namespace -}}
{{- $configName := include "informant.fullname" . -}}
{{- /* The default scope: cluster-wide when defaultNamespaces is empty or has a "" key. */ -}}
{{- $defaultNs := list -}}
{{- $defaultAll := false -}}
{{- range $ns, $_ := ($spec.defaultNamespaces | default (dict)) -}}
{{- if eq $ns "" -}}
{{- $defaultAll = true -}}
{{- else -}}
{{- $defaultNs = append $defaultNs $ns -}}
{{- end -}}
{{- end -}}
{{- /* A namespaceSelector makes a scope cluster-wide: its namespaces are known only at run time. */ -}}
{{- $defaultCluster := or $defaultAll (empty $defaultNs) (not (empty $spec.namespaceSelector)) -}}
{{- $selectors := not (empty $spec.namespaceSelector) -}}
{{- $customKinds := false -}}
{{- range ($spec.byObject | default (list)) -}}
{{- if not (empty .namespaceSelector) -}}
{{- $selectors = true -}}
{{- end -}}
{{- if not (hasKey $kinds (printf "%s/%s" .apiVersion .kind)) -}}
{{- $customKinds = true -}}
{{- end -}}
{{- end -}}
{{- /* The kinds: byObject, then rbac.extraKinds (which inherit the default scope). */ -}}
{{- $entries := list -}}
{{- range ($spec.byObject | default (list)) -}}
{{- $entries = append $entries . -}}
{{- end -}}
{{- range ($.Values.rbac.extraKinds | default (list)) -}}
{{- $entries = append $entries (dict "apiVersion" .apiVersion "kind" .kind) -}}
{{- end -}}
{{- $clusterReads := dict -}}
{{- $nsReads := dict -}}
{{- $eventsCluster := $defaultCluster -}}
{{- $clusterKindCached := false -}}
{{- range $entries -}}
{{- $group := "" -}}
{{- if contains "/" .apiVersion -}}
{{- $group = first (splitList "/" .apiVersion) -}}
{{- end -}}
{{- $key := printf "%s/%s" .apiVersion .kind -}}
{{- $plural := "" -}}
{{- $namespaced := true -}}
{{- if hasKey $kinds $key -}}
{{- $known := get $kinds $key -}}
{{- $plural = $known.plural -}}
{{- $namespaced = $known.namespaced -}}
{{- else -}}
{{- $plural = include "informant.plural" (lower .kind) -}}
{{- end -}}
{{- $cluster := false -}}
{{- $names := list -}}
{{- if not $namespaced -}}
{{- $cluster = true -}}
{{- $clusterKindCached = true -}}
{{- else if not (empty .namespaceSelector) -}}
{{- $cluster = true -}}
{{- else if not (kindIs "map" .namespaces) -}}
{{- $cluster = $defaultCluster -}}
{{- $names = $defaultNs -}}
{{- else -}}
{{- $all := false -}}
{{- range $ns, $_ := .namespaces -}}
{{- if eq $ns "" -}}
{{- $all = true -}}
{{- else -}}
{{- $names = append $names $ns -}}
{{- end -}}
{{- end -}}
{{- $cluster = or $all (empty $names) -}}
{{- end -}}
{{- if $cluster -}}
{{- if $namespaced -}}
{{- $eventsCluster = true -}}
{{- end -}}
{{- if not (hasKey $clusterReads $group) -}}
{{- $_ := set $clusterReads $group (dict) -}}
{{- end -}}
{{- $_ := set (get $clusterReads $group) $plural true -}}
{{- else -}}
{{- range $ns := $names -}}
{{- if not (hasKey $nsReads $ns) -}}
{{- $_ := set $nsReads $ns (dict) -}}
{{- end -}}
{{- $groups := get $nsReads $ns -}}
{{- if not (hasKey $groups $group) -}}
{{- $_ := set $groups $group (dict) -}}
{{- end -}}
{{- $_ := set (get $groups $group) $plural true -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- /* The one Namespace informer of namespace selectors; the CRD watch of custom byObject kinds. */ -}}
{{- $notes := list -}}
{{- if $selectors -}}
{{- if not (hasKey $clusterReads "") -}}
{{- $_ := set $clusterReads "" (dict) -}}
{{- end -}}
{{- $_ := set (get $clusterReads "") "namespaces" true -}}
{{- $notes = append $notes "namespaceSelector: the namespaces are chosen by label while the manager runs, so the kinds it caches are read cluster-wide (a ClusterRole: no Role can be written for namespaces not known in advance), and namespaces are listed and watched to follow their labels" -}}
{{- end -}}
{{- /* Sharding: the member Leases (in the release's Role, below); by namespace, the namespaces followed. */ -}}
{{- if $sharding -}}
{{- if eq $sharding.key "namespace" -}}
{{- if not (hasKey $clusterReads "") -}}
{{- $_ := set $clusterReads "" (dict) -}}
{{- end -}}
{{- $_ := set (get $clusterReads "") "namespaces" true -}}
{{- $notes = append $notes "sharding by namespace: each replica caches the namespaces it owns, which change as replicas come and go, so namespaces are listed and watched" -}}
{{- end -}}
{{- $notes = append $notes "sharding: each replica creates, renews and at shutdown deletes a member Lease of its own in the manager's namespace, named after its identity at run time (so the rule names no Lease; it covers leader election's Lease too), and lists the ring's Leases to know the members" -}}
{{- end -}}
{{- if $customKinds -}}
{{- if not (hasKey $clusterReads "apiextensions.k8s.io") -}}
{{- $_ := set $clusterReads "apiextensions.k8s.io" (dict) -}}
{{- end -}}
{{- $_ := set (get $clusterReads "apiextensions.k8s.io") "customresourcedefinitions" true -}}
{{- $notes = append $notes "byObject lists custom kinds: customresourcedefinitions are listed and watched, so a kind's informers start when its CRD is established and stop when it is deleted (without this grant the manager asks discovery every 30 s instead)" -}}
{{- end -}}
{{- /* Events in the group of the recorder's API: core ("") or events.k8s.io. */ -}}
{{- $eventsGroup := "" -}}
{{- if eq (($spec.recorder | default (dict)).api | default "v1") "events.k8s.io/v1" -}}
{{- $eventsGroup = "events.k8s.io" -}}
{{- end -}}
{{- $events := dict "apiGroups" (list $eventsGroup) "resources" (list "events") "verbs" (list "create" "patch") -}}
{{- /* The ClusterRole: cluster-wide reads, events when cluster-wide, extra rules in a cluster-wide default scope. */ -}}
{{- $clusterRules := list -}}
{{- range $group := keys $clusterReads | sortAlpha -}}
{{- $clusterRules = append $clusterRules (dict "apiGroups" (list $group) "resources" (keys (get $clusterReads $group) | sortAlpha) "verbs" (list "list" "watch")) -}}
{{- end -}}
{{- if $eventsCluster -}}
{{- $clusterRules = append $clusterRules $events -}}
{{- end -}}
{{- if $defaultCluster -}}
{{- range ($.Values.rbac.extraRules | default (list)) -}}
{{- $clusterRules = append $clusterRules . -}}
{{- end -}}
{{- end -}}
{{- /* Secure metrics: each request to /metrics and /debug/* is reviewed (cluster-scoped reviews). */ -}}
{{- if .Values.metrics.secure -}}
{{- $clusterRules = append $clusterRules (dict "apiGroups" (list "authentication.k8s.io") "resources" (list "tokenreviews") "verbs" (list "create")) -}}
{{- $clusterRules = append $clusterRules (dict "apiGroups" (list "authorization.k8s.io") "resources" (list "subjectaccessreviews") "verbs" (list "create")) -}}
{{- $notes = append $notes "metrics.secure: each request to /metrics and /debug/* is authenticated with a TokenReview and authorized with a SubjectAccessReview (controller-runtime's WithAuthenticationAndAuthorization), so both reviews are created; bind Prometheus's account to the metrics-reader ClusterRole" -}}
{{- end -}}
{{- /* The webhook endpoint: the configurations the leader owns (by name but create) and, with managed certificates, the CRDs it injects. */ -}}
{{- $webhook := include "informant.webhook" . -}}
{{- $managedCerts := and $webhook (eq .Values.webhook.certificates "managed") -}}
{{- $webhookService := include "informant.webhookService" . -}}
{{- if $webhook -}}
{{- $configurations := list "validatingwebhookconfigurations" "mutatingwebhookconfigurations" -}}
{{- $clusterRules = append $clusterRules (dict "apiGroups" (list "admissionregistration.k8s.io") "resources" $configurations "verbs" (list "create")) -}}
{{- $clusterRules = append $clusterRules (dict "apiGroups" (list "admissionregistration.k8s.io") "resources" $configurations "resourceNames" (list $webhookService) "verbs" (list "get" "update" "delete")) -}}
{{- if and $managedCerts .Values.webhook.injectCRDs -}}
{{- $clusterRules = append $clusterRules (dict "apiGroups" (list "apiextensions.k8s.io") "resources" (list "customresourcedefinitions") "resourceNames" (.Values.webhook.injectCRDs | uniq | sortAlpha) "verbs" (list "get" "patch")) -}}
{{- end -}}
{{- $notes = append $notes "webhook: the leader creates the ValidatingWebhookConfiguration and MutatingWebhookConfiguration it owns (creation cannot be restricted by name, so create is granted on every name), keeps their webhooks and caBundle current, and deletes them when no admission hook is declared" -}}
{{- end -}}
{{- /* The Roles: cached namespaces, the default ones, the release's, and "default" for Events about cluster-scoped objects. */ -}}
{{- $roleNs := keys $nsReads -}}
{{- if not $defaultCluster -}}
{{- $roleNs = concat $roleNs $defaultNs -}}
{{- end -}}
{{- $roleNs = append $roleNs $releaseNs -}}
{{- if and $clusterKindCached (not $eventsCluster) -}}
{{- $roleNs = append $roleNs "default" -}}
{{- end -}}
{{- $roles := dict -}}
{{- range $ns := $roleNs | uniq | sortAlpha -}}
{{- $rules := list -}}
{{- if hasKey $nsReads $ns -}}
{{- $groups := get $nsReads $ns -}}
{{- range $group := keys $groups | sortAlpha -}}
{{- $rules = append $rules (dict "apiGroups" (list $group) "resources" (keys (get $groups $group) | sortAlpha) "verbs" (list "list" "watch")) -}}
{{- end -}}
{{- end -}}
{{- if not $eventsCluster -}}
{{- $rules = append $rules $events -}}
{{- end -}}
{{- if eq $ns $releaseNs -}}
{{- $rules = append $rules (dict "apiGroups" (list "informant.dev") "resources" (list "cacheconfigs") "resourceNames" (list $configName) "verbs" (list "get" "list" "watch")) -}}
{{- $rules = append $rules (dict "apiGroups" (list "informant.dev") "resources" (list "cacheconfigs/status") "resourceNames" (list $configName) "verbs" (list "patch")) -}}
{{- $rules = append $rules (dict "apiGroups" (list "informant.dev") "resources" (list "controllers") "verbs" (list "get" "list" "watch" "patch")) -}}
{{- $rules = append $rules (dict "apiGroups" (list "informant.dev") "resources" (list "controllers/status") "verbs" (list "patch")) -}}
{{- if and (include "informant.leaderElect" $) (not $sharding) -}}
{{- $rules = append $rules (dict "apiGroups" (list "coordination.k8s.io") "resources" (list "leases") "verbs" (list "create")) -}}
{{- $rules = append $rules (dict "apiGroups" (list "coordination.k8s.io") "resources" (list "leases") "resourceNames" (list $configName) "verbs" (list "get" "update")) -}}
{{- end -}}
{{- if $sharding -}}
{{- /* The member Leases: each replica's own, named after its identity at run time; leader election's Lease too. */ -}}
{{- $rules = append $rules (dict "apiGroups" (list "coordination.k8s.io") "resources" (list "leases") "verbs" (list "get" "list" "create" "update" "delete")) -}}
{{- end -}}
{{- end -}}
{{- if and (not $defaultCluster) (has $ns $defaultNs) -}}
{{- range ($.Values.rbac.extraRules | default (list)) -}}
{{- $rules = append $rules . -}}
{{- end -}}
{{- end -}}
{{- if and $managedCerts (eq $ns $releaseNs) -}}
{{- /* The managed certificates' Secret, in the Service's namespace: watched by name by every replica (unless a rule naming no object lists and watches Secrets there already), created and replaced by the leader. */ -}}
{{- $watched := false -}}
{{- range (concat $clusterRules $rules) -}}
{{- if and (empty .resourceNames) (has "" (.apiGroups | default (list))) (has "secrets" (.resources | default (list))) (has "list" (.verbs | default (list))) (has "watch" (.verbs | default (list))) -}}
{{- $watched = true -}}
{{- end -}}
{{- end -}}
{{- $verbs := list "get" "list" "watch" "update" -}}
{{- if $watched -}}
{{- $verbs = list "get" "update" -}}
{{- end -}}
{{- $rules = append $rules (dict "apiGroups" (list "") "resources" (list "secrets") "verbs" (list "create")) -}}
{{- $rules = append $rules (dict "apiGroups" (list "") "resources" (list "secrets") "resourceNames" (list (printf "%s-cert" $webhookService)) "verbs" $verbs) -}}
{{- end -}}
{{- if $rules -}}
{{- $_ := set $roles $ns $rules -}}
{{- end -}}
{{- end -}}
{{- toYaml (dict "cluster" $clusterRules "namespaces" $roles "notes" $notes) -}}
{{- end -}}
