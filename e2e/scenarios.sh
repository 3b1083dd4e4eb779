# shellcheck shell=bash
# The e2e scenarios, written once and run against whatever cluster a harness gives them
# (e2e/run.sh embedded: the embedded API server and local manager processes; e2e/kind.sh: a kind
# cluster and the Helm chart). They use kubectl, curl, the local `informant` binary (validate,
# simulate) and python3 (JSON plumbing and times), plus this harness interface:
#
#   variables
#     E2E_NS                namespace of the CacheConfig and of the leader election Lease
#     E2E_CC                name of the CacheConfig the manager runs from (set by harness_install)
#     E2E_LEASE             name of the Lease
#     E2E_WAIT              seconds a condition may take (sync, reload, status write)
#     E2E_TAKEOVER_TIMEOUT  seconds a standby may take to lead once the leader is stopped
#     E2E_SPEC              the initial CacheConfig spec, as JSON (e2e/testdata/spec.json)
#     INFORMANT             the informant binary (simulate)
#   functions
#     harness_install        install CRDs and one manager replica running from the CacheConfig
#                            E2E_NS/E2E_CC whose spec is E2E_SPEC; set E2E_CC
#     harness_metrics        print the replica's /metrics
#     harness_health PATH    print "CODE BODY" of GET PATH on the replica's health probe port
#     harness_list_count RES print how many LIST requests the API server served for resource RES,
#                            or nothing when the cluster cannot say (the check is then skipped)
#     harness_scale_out      run a second replica; both campaign for the Lease
#     harness_stop_leader ID stop the replica whose Lease identity is ID
#     harness_hook_start SCRIPT
#                            serve the exec hook `python3 SCRIPT` (a path in the repository) as a
#                            webhook the manager can reach; set E2E_HOOK to the Controller's
#                            spec.hook, as JSON
#     harness_hook_stop      stop what harness_hook_start started
#     harness_uninstall      remove what harness_install installed (the CRDs stay, as Helm does)
#     harness_leftovers      print what is left of the installation, one line each (nothing = clean)
#     harness_logs           print the manager's (and server's) logs, for failure reports
#     harness_shard_install SPEC
#                            install a manager whose CacheConfig E2E_NS/E2E_SHARD_CC has the spec
#                            SPEC (JSON) sharded by ring SHARD_RING and key SHARD_KEY, one replica,
#                            every replica a member of the ring (its Lease in E2E_NS); set
#                            E2E_SHARD_CC
#     harness_shard_scale N  run N replicas of it (start or stop some; a stopped one ends as a
#                            pod does, SIGTERM); return once N run
#     harness_member_metrics print the /metrics of every running replica of it, each after a line
#                            "# member NAME"
#     harness_shard_uninstall
#                            remove what harness_shard_install installed
#
# Every wait polls a condition with a deadline (kubectl wait, or wait_until); nothing sleeps a
# fixed time to synchronise.

E2E_LIB=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib

# kubectl in the CacheConfig's namespace.
kn() { k -n "$E2E_NS" "$@"; }
cc_path() { kn get cc "$E2E_CC" -o "jsonpath=$1"; }
generation() { cc_path '{.metadata.generation}'; }
lease_holder() { kn get lease "$E2E_LEASE" -o 'jsonpath={.spec.holderIdentity}' 2>/dev/null; }

# The informers in status, one "apiVersion kind namespace labelSelector" per line, sorted.
informers() {
  cc_path '{range .status.informers[*]}{.apiVersion} {.kind} {.namespace} {.labelSelector}{"\n"}{end}' |
    sed 's/ *$//' | sort | paste -sd';' -
}

# Waits until the manager has acted on the CacheConfig's current generation.
wait_observed() { # wait_observed GENERATION
  kn wait --for="jsonpath={.status.observedGeneration}=$1" "cc/$E2E_CC" --timeout="${E2E_WAIT}s" >/dev/null ||
    fail "status.observedGeneration never reached $1"
}

wait_condition() { # wait_condition TYPE STATUS
  kn wait --for="condition=$1=$2" "cc/$E2E_CC" --timeout="${E2E_WAIT}s" >/dev/null ||
    fail "condition $1 never became $2: $(cc_path '{.status.conditions}')"
}

# JSON-patches the spec and waits for the manager to observe the new generation.
# edit JSON-PATCH [FILE]: JSON-patches the spec, keeps the edited object as YAML in FILE (when
# given), and waits for the manager to observe the new generation.
edit() {
  local edited generation
  edited=$(kn patch cc "$E2E_CC" --type json -p "$1" -o yaml)
  if [ -n "${2:-}" ]; then printf '%s\n' "$edited" >"$2"; fi
  generation=$(printf '%s\n' "$edited" | sed -n 's/^  generation: //p')
  [ -n "$generation" ] || fail "the patched object has no metadata.generation"
  note "generation $generation"
  wait_observed "$generation"
}

# The Events about the CacheConfig, as JSON.
cc_events() {
  kn get events --field-selector "involvedObject.kind=CacheConfig,involvedObject.name=$E2E_CC" -o json
}

# event_says TYPE REASON TEXT: an Event about the CacheConfig has that type, reason and TEXT in
# its message.
event_says() {
  cc_events | python3 "$E2E_LIB/events.py" actual "*" "$1" "$2" | grep -qF "$3"
}

# lease_moved_from ID: the Lease has a holder, and it is not ID.
lease_moved_from() {
  local holder
  holder=$(lease_holder)
  [ -n "$holder" ] && [ "$holder" != "$1" ]
}

# Events the manager recorded: one per applied reload (ConfigReloaded), one per rejected one
# (InvalidConfig), and those the scenarios made a hook report (E2E_HOOK_EVENTS).
events_recorded() { # events_recorded METRICS-TEXT
  echo $(($(metric "$1" informant_config_reloads_total 'result="applied"') + $(metric "$1" informant_config_reloads_total 'result="rejected"') + E2E_HOOK_EVENTS))
}

# The conservation law: once nothing is in flight, the fates add up to the events recorded.
events_settled() {
  local text
  text=$(harness_metrics) || return 1
  [ "$(events_recorded "$text")" = "$(metric_sum "$text" informant_events_total)" ]
}
wait_events_settled() { wait_until "$E2E_WAIT" "every recorded event has a fate on /metrics" events_settled; }

scenario_install() {
  step "1. install: Ready=True, the expected informers in status, kubectl get cc columns"
  k create namespace e2e-a >/dev/null
  k create namespace e2e-b >/dev/null
  k -n e2e-a create secret generic web --from-literal=k=v >/dev/null
  k -n e2e-a label secret web app=web >/dev/null
  k -n e2e-a create secret generic db --from-literal=k=v >/dev/null
  k -n e2e-a label secret db app=db >/dev/null
  harness_install
  wait_condition Valid True
  wait_condition Ready True
  expect_eq "status.informers" \
    "batch/v1 Job e2e-a;v1 ConfigMap e2e-a;v1 Secret e2e-a app=web" "$(informers)"
  expect_eq "status.informers counts the one Secret labelled app=web" "1" \
    "$(cc_path '{.status.informers[?(@.kind=="Secret")].objects}')"
  expect_eq "status.observedGeneration" "$(generation)" "$(cc_path '{.status.observedGeneration}')"
  expect_contains "status.lastReloadTime is set" "T" "$(cc_path '{.status.lastReloadTime}')"
  local table
  table=$(kn get cc "$E2E_CC")
  echo "$table"
  expect_eq "kubectl get cc: printer columns" "NAME VALID READY INFORMERS MEMORY AGE" \
    "$(echo "$table" | head -n1 | tr -s ' ')"
  expect_eq "kubectl get cc: Valid Ready Informers" "True True 3" \
    "$(echo "$table" | tail -n1 | awk '{print $2, $3, $4}')"
  if ! echo "$table" | tail -n1 | awk '{print $5}' | grep -Eq '^[0-9.]+(B|KiB|MiB|GiB)$'; then
    fail "kubectl get cc: Memory is not a size: $table"
  fi
  echo "ok: kubectl get cc: Memory"
  if ! echo "$table" | tail -n1 | awk '{print $6}' | grep -Eq '^[0-9]+[smhd]'; then
    fail "kubectl get cc: Age is not a duration: $table"
  fi
  echo "ok: kubectl get cc: Age"
  expect_eq "/readyz" "200 ok" "$(harness_health /readyz)"
}

scenario_reload() {
  step "2. edit (add a namespace, change a selector): status follows, untouched informers not relisted"
  local text restarts cm secrets jobs
  text=$(harness_metrics)
  restarts=$(metric "$text" informant_informer_restarts_total)
  cm=$(harness_list_count configmaps)
  secrets=$(harness_list_count secrets)
  jobs=$(harness_list_count jobs)
  edit '[{"op":"add","path":"/spec/byObject/0/namespaces/e2e-b","value":{}},
         {"op":"replace","path":"/spec/byObject/1/labelSelector","value":"app=db"}]'
  wait_condition Ready True
  expect_eq "status.informers after the edit" \
    "batch/v1 Job e2e-a;v1 ConfigMap e2e-a;v1 ConfigMap e2e-b;v1 Secret e2e-a app=db" "$(informers)"
  expect_eq "the Secret informer now counts the app=db Secret" "1" \
    "$(cc_path '{.status.informers[?(@.kind=="Secret")].objects}')"
  text=$(harness_metrics)
  expect_eq "informant_informer_restarts_total: exactly the two changed informers started" \
    "$((restarts + 2))" "$(metric "$text" informant_informer_restarts_total)"
  if [ -n "$cm" ]; then
    expect_eq "LIST configmaps: one, for the new namespace" "$((cm + 1))" "$(harness_list_count configmaps)"
    expect_eq "LIST secrets: one, for the new selector" "$((secrets + 1))" "$(harness_list_count secrets)"
    expect_eq "LIST jobs: none, the Job informer was kept" "$jobs" "$(harness_list_count jobs)"
  else
    note "this cluster does not count LIST requests per resource; the restarts metric stands for it"
  fi
  wait_until "$E2E_WAIT" "a ConfigReloaded Event" event_says Normal ConfigReloaded "started 2 informers, stopped 1, kept 2"
  echo "ok: Normal ConfigReloaded Event says what changed"
}

scenario_invalid() {
  step "3. invalid edit: Valid=False with the error, a Warning Event, the old tree still serving"
  local before table health
  before=$(informers)
  edit '[{"op":"replace","path":"/spec/byObject/1/labelSelector","value":"app in ("}]'
  wait_condition Valid False
  expect_contains "the Valid condition names the field and the error" \
    'spec.byObject[1].labelSelector: unexpected end of input' \
    "$(cc_path '{.status.conditions[?(@.type=="Valid")].message}')"
  expect_eq "Ready stays True: the last good tree serves" "True" \
    "$(cc_path '{.status.conditions[?(@.type=="Ready")].status}')"
  expect_eq "status.informers unchanged" "$before" "$(informers)"
  table=$(kn get cc "$E2E_CC" --no-headers | awk '{print $2, $3, $4}')
  expect_eq "kubectl get cc: Valid False, Ready True, 4 informers" "False True 4" "$table"
  wait_until "$E2E_WAIT" "a Warning InvalidConfig Event" \
    event_says Warning InvalidConfig "spec.byObject[1].labelSelector: unexpected end of input"
  echo "ok: Warning InvalidConfig Event with the error"
  health=$(harness_health /readyz)
  expect_eq "/readyz stays ready: the last good config serves" "200 ok" "$health"
  expect_eq "informant_config_last_reload_successful says the edit failed" "0" \
    "$(metric "$(harness_metrics)" informant_config_last_reload_successful)"
  edit '[{"op":"replace","path":"/spec/byObject/1/labelSelector","value":"app=db"}]'
  wait_condition Valid True
  expect_eq "/readyz after the fix" "200 ok" "$(harness_health /readyz)"
  expect_eq "informant_config_last_reload_successful after the fix" "1" \
    "$(metric "$(harness_metrics)" informant_config_last_reload_successful)"
}

# Events the scenarios caused a hook Controller to record (scenario 4: one SawCompletedJob per
# completed Job); part of what the manager recorded, for the conservation law.
E2E_HOOK_EVENTS=0
CRON_NS=e2e-a
CRON=e2e-cron
CRON_JOBS=8

cron_events() {
  k -n "$CRON_NS" get events --field-selector "involvedObject.kind=CronJob,involvedObject.name=$CRON" -o json
}

# The CronJob, suspended. On kind the built-in CronJob controller is off (kind.sh), so the hook is
# the only CronJob watcher; the Jobs carry spec.managedBy, so no Job controller runs them: the
# scenario completes them itself, one at a time, through the status subresource.
create_cronjob() {
  k -n "$CRON_NS" create -f - >/dev/null <<EOF
apiVersion: batch/v1
kind: CronJob
metadata: {name: $CRON}
spec:
  schedule: "@hourly"
  suspend: true
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: Never
          containers: [{name: main, image: busybox, command: ["true"]}]
EOF
}

create_job() { # create_job NAME CRONJOB-UID: a Job whose controller is the CronJob
  k -n "$CRON_NS" create -f - >/dev/null <<EOF
apiVersion: batch/v1
kind: Job
metadata:
  name: $1
  ownerReferences:
  - {apiVersion: batch/v1, kind: CronJob, name: $CRON, uid: $2, controller: true, blockOwnerDeletion: true}
spec:
  managedBy: informant.dev/e2e
  template:
    spec:
      restartPolicy: Never
      containers: [{name: main, image: busybox, command: ["true"]}]
EOF
}

# controller_reconciled NAME: the Controller's status counts at least one reconcile.
controller_reconciled() {
  local n
  n=$(kn get controllers.informant.dev "$1" -o 'jsonpath={.status.reconciles}')
  [ "${n:-0}" -ge 1 ]
}

scenario_cronjob() {
  step "4. the CronJob watcher as a hook Controller: its Events are what informant simulate predicts"
  # The CronJob watcher's story: one SawCompletedJob Event per completed Job, recorded on the
  # CronJob by examples/hooks/cronjob.py through the manager's recorder. A small correlator
  # (maxEvents 3, burst 5) makes 8 Jobs show aggregation, the aggregate deduplicated (patched)
  # and the spam filter.
  local work=$1 uid text start t i job completed patch
  edit '[{"op":"add","path":"/spec/byObject/-","value":{"apiVersion":"batch/v1","kind":"CronJob","namespaces":{"e2e-a":{}}}},
         {"op":"add","path":"/spec/recorder","value":{"correlator":{"burst":5,"maxEvents":3}}}]'
  wait_condition Valid True
  wait_condition Ready True
  kn get cc "$E2E_CC" -o yaml >"$work/stream-config.yaml"
  create_cronjob
  uid=$(k -n "$CRON_NS" get cronjob "$CRON" -o 'jsonpath={.metadata.uid}')
  for i in $(seq "$CRON_JOBS"); do create_job "$CRON-$i" "$uid"; done
  harness_hook_start examples/hooks/cronjob.py
  note "hook: $E2E_HOOK"
  kn apply -f - >/dev/null <<EOF
apiVersion: informant.dev/v1alpha1
kind: Controller
metadata: {name: cronjob-watch}
spec:
  for: {apiVersion: batch/v1, kind: CronJob}
  owns: [{apiVersion: batch/v1, kind: Job}]
  hook: $E2E_HOOK
EOF
  kn wait --for=condition=Ready controllers.informant.dev/cronjob-watch --timeout="${E2E_WAIT}s" >/dev/null ||
    fail "the Controller never became Ready: $(kn get controllers.informant.dev cronjob-watch -o 'jsonpath={.status}')"
  # The hook has seen the CronJob and its running Jobs, and reported nothing.
  wait_until "$E2E_WAIT" "a first hook call" controller_reconciled cronjob-watch
  wait_events_settled
  text=$(harness_metrics)
  local created patched filtered
  created=$(metric "$text" informant_events_total 'fate="created"')
  patched=$(metric "$text" informant_events_total 'fate="patched"')
  filtered=$(metric "$text" informant_events_total 'fate="spam_filtered"')
  : >"$work/stream.jsonl"
  start=$(python3 "$E2E_LIB/events.py" now)
  # Each Job completes (as the Job controller would write it) one second after the previous,
  # and the hook's memory, the CronJob's status.lastSuccessfulTime, must reach it before the next.
  for i in $(seq "$CRON_JOBS"); do
    job=$CRON-$i
    completed=$(python3 "$E2E_LIB/events.py" time "$start" "$i")
    patch=$(python3 "$E2E_LIB/events.py" job-complete "$start" "$completed")
    k -n "$CRON_NS" patch job "$job" --subresource=status --type=merge -p "$patch" >/dev/null
    k -n "$CRON_NS" wait --for="jsonpath={.status.lastSuccessfulTime}=$completed" "cronjob/$CRON" --timeout="${E2E_WAIT}s" >/dev/null ||
      fail "the hook never saw $job complete: $(k -n "$CRON_NS" get cronjob "$CRON" -o 'jsonpath={.status}')"
    t=$(python3 "$E2E_LIB/events.py" since "$start")
    python3 "$E2E_LIB/events.py" line "$t" informant batch/v1 CronJob "$CRON_NS" "$CRON" "$uid" \
      Normal SawCompletedJob "Saw completed job: $job, status: Complete" >>"$work/stream.jsonl"
  done
  E2E_HOOK_EVENTS=$CRON_JOBS
  wait_events_settled
  "$INFORMANT" simulate --events "$work/stream.jsonl" --config "$work/stream-config.yaml" >"$work/simulate.jsonl" ||
    fail "informant simulate failed"
  local predicted expected actual fates
  predicted=$(python3 "$E2E_LIB/events.py" predicted <"$work/simulate.jsonl")
  expected=$(printf '%s\n' "$predicted" | grep -v '^fates ')
  fates=$(printf '%s\n' "$predicted" | grep '^fates ')
  echo "simulate predicts: $fates"
  printf '%s\n' "$expected" | sed 's/^/    /'
  expect_contains "the stream aggregates" "(combined from similar events)" "$expected"
  expect_not_contains "the aggregate is deduplicated (patched)" "patched=0" "$fates"
  expect_not_contains "the stream is spam filtered" "skipped=0" "$fates"
  actual=$(cron_events | python3 "$E2E_LIB/events.py" actual "*" Normal SawCompletedJob)
  expect_eq "the Events about the CronJob in the API server (count|message) are simulate's" "$expected" "$actual"
  text=$(harness_metrics)
  local got
  got="created=$(($(metric "$text" informant_events_total 'fate="created"') - created))"
  got="$got patched=$(($(metric "$text" informant_events_total 'fate="patched"') - patched))"
  got="$got skipped=$(($(metric "$text" informant_events_total 'fate="spam_filtered"') - filtered))"
  expect_eq "informant_events_total over the stream (created, patched, spam_filtered) is simulate's" \
    "${fates#fates }" "$got"
  local calls
  calls=$(metric "$text" informant_hook_calls_total "controller=\"$E2E_NS/cronjob-watch\",failure=\"none\"")
  if [ "$calls" -lt "$CRON_JOBS" ]; then fail "informant_hook_calls_total: $calls successful calls for $CRON_JOBS Jobs"; fi
  echo "ok: informant_hook_calls_total: $calls successful calls"
  expect_eq "no hook call failed" "0" \
    "$(printf '%s\n' "$text" | awk '/^informant_hook_calls_total[{]/ && !/failure="none"/ { s += $2 } END { print s + 0 }')"
}

scenario_fates() {
  step "5. informant_events_total adds up to the events recorded"
  wait_events_settled
  local text fate count
  text=$(harness_metrics)
  printf '%s\n' "$text" | grep '^informant_events_total' | sed 's/^/    /'
  expect_eq "sum over fates = ConfigReloaded + InvalidConfig + the hook's SawCompletedJob recorded" \
    "$(events_recorded "$text")" "$(metric_sum "$text" informant_events_total)"
  for fate in dropped_incoming_full dropped_watcher_full dropped_shutdown rejected failed invalid; do
    expect_eq "no event ended $fate" "0" "$(metric "$text" informant_events_total "fate=\"$fate\"")"
  done
  count='import json, sys; print(len(json.load(sys.stdin)["items"]))'
  expect_eq "fate created = the Events about the CacheConfig and the CronJob in the API server" \
    "$(metric "$text" informant_events_total 'fate="created"')" \
    "$(($(cc_events | python3 -c "$count") + $(cron_events | python3 -c "$count")))"
}

scenario_leader() {
  step "6. two replicas: stop the leader, the standby takes over and status keeps updating"
  harness_scale_out
  wait_until "$E2E_WAIT" "a Lease holder" lease_moved_from ""
  local holder
  holder=$(lease_holder)
  note "leader: $holder"
  harness_stop_leader "$holder"
  wait_until "$E2E_TAKEOVER_TIMEOUT" "another replica holds the Lease" lease_moved_from "$holder"
  note "new leader: $(lease_holder)"
  echo "ok: the standby took the Lease over"
  local reloaded
  reloaded=$(cc_path '{.status.lastReloadTime}')
  edit '[{"op":"add","path":"/spec/byObject/2/namespaces/e2e-b","value":{}}]'
  wait_condition Valid True
  wait_condition Ready True
  expect_contains "the new leader wrote status.informers" "batch/v1 Job e2e-b" "$(informers)"
  expect_contains "status.lastReloadTime is set" "T" "$(cc_path '{.status.lastReloadTime}')"
  note "lastReloadTime: $reloaded -> $(cc_path '{.status.lastReloadTime}')"
}

# selected NAMESPACE: the CacheConfig's status lists NAMESPACE under its namespace selector.
selected() {
  cc_path '{.status.namespaceSelectors[0].namespaces}' | grep -q "\"$1\""
}
not_selected() { ! selected "$1"; }

# informs_about NAMESPACE: status.informers has an informer of NAMESPACE.
informs_about() { [[ "$(informers)" == *" $1"* ]]; }
informs_not_about() { ! informs_about "$1"; }

# cached_configmaps NAMESPACE: the ConfigMaps of NAMESPACE as `informant cache` reads them
# through the running CacheConfig (its own tree, resolving the selector against the cluster).
cached_configmaps() {
  "$INFORMANT" cache list --config "$work/selector-config.yaml" --api-version v1 --kind ConfigMap \
    -n "$1" -o name
}

# listed_configmaps NAMESPACE: the ConfigMaps of NAMESPACE as the API server lists them, in
# `informant cache list -o name`'s form.
listed_configmaps() {
  k -n "$1" get configmaps -o jsonpath='{range .items[*]}{.metadata.namespace}/{.metadata.name}{"\n"}{end}'
}

scenario_namespaces() {
  step "7. namespaces by label: kubectl label namespace brings a namespace and its objects in"
  local work=$1 label=e2e.informant.dev/cached
  k create namespace e2e-sel >/dev/null
  k -n e2e-sel create configmap picked --from-literal=k=v >/dev/null
  edit "[{\"op\":\"add\",\"path\":\"/spec/byObject/0/namespaceSelector\",\"value\":\"$label=yes\"}]"
  wait_condition Valid True
  wait_condition Ready True
  expect_eq "status.namespaceSelectors: the selector, nothing matching yet" "$label=yes 0" \
    "$(cc_path '{.status.namespaceSelectors[0].selector} {.status.namespaceSelectors[0].count}')"
  k label namespace e2e-sel "$label=yes" >/dev/null
  wait_until "$E2E_WAIT" "e2e-sel in status.namespaceSelectors" selected e2e-sel
  local status
  status=$(kn get cc "$E2E_CC" -o yaml)
  printf '%s\n' "$status" | sed -n '/^  namespaceSelectors:/,/^  [a-zA-Z]/p' | sed 's/^/    /'
  expect_contains "kubectl get cc -o yaml: the labelled namespace under the selector" "- e2e-sel" "$status"
  wait_until "$E2E_WAIT" "the ConfigMap informer of e2e-sel in status.informers" informs_about e2e-sel
  printf '%s\n' "$status" >"$work/selector-config.yaml"
  # What the API server holds there: "picked", and on a real cluster kube-root-ca.crt too (the
  # controller manager's root CA publisher puts it in every namespace).
  expect_contains "the API server holds the ConfigMap" "e2e-sel/picked" "$(listed_configmaps e2e-sel)"
  expect_eq "informant cache reads the labelled namespace's ConfigMaps (as the API server lists them)" \
    "$(listed_configmaps e2e-sel)" "$(cached_configmaps e2e-sel)"
  wait_until "$E2E_WAIT" "a ScopeChanged Event" event_says Normal ScopeChanged "namespaces entered: e2e-sel"
  echo "ok: Normal ScopeChanged Event says which namespace entered"
  k label namespace e2e-sel "$label-" >/dev/null
  wait_until "$E2E_WAIT" "e2e-sel gone from status.namespaceSelectors" not_selected e2e-sel
  local out code
  out=$("$INFORMANT" cache get picked --config "$work/selector-config.yaml" --api-version v1 --kind ConfigMap -n e2e-sel 2>&1) && code=0 || code=$?
  expect_eq "informant cache: e2e-sel is an unknown namespace once unlabelled (exit 5)" "5" "$code"
  expect_contains "the error names the selector" "does not match the namespaceSelector \"$label=yes\"" "$out"
  wait_until "$E2E_WAIT" "e2e-sel's informer gone from status.informers" informs_not_about e2e-sel
  echo "ok: status.informers: e2e-sel's informer stopped"
}

scenario_uninstall() {
  step "8. uninstall leaves nothing behind but the CRDs"
  # The Controller of scenario 4 is the user's, like any other object the chart did not install:
  # it goes first, then its hook server.
  kn delete controllers.informant.dev cronjob-watch --wait=true >/dev/null
  harness_hook_stop
  harness_uninstall
  # Deletion is asynchronous on a cluster (the garbage collector removes ReplicaSets and Pods).
  if ! poll_until "$E2E_WAIT" nothing_left; then
    fail "left of the installation after ${E2E_WAIT}s: $(harness_leftovers | paste -sd' ' -)"
  fi
  echo "ok: nothing is left of the installation"
  expect_eq "no CacheConfig anywhere" "" "$(k get cc -A -o name)"
  expect_eq "the CRD stays (Helm never deletes crds/)" "customresourcedefinition.apiextensions.k8s.io/cacheconfigs.informant.dev" \
    "$(k get crd cacheconfigs.informant.dev -o name)"
}

nothing_left() { [ -z "$(harness_leftovers)" ]; }

# Scenario 9's ring and objects: ConfigMaps in namespaces e2e-shard-0 ... , labelled for the
# sharded CacheConfig, which shards them by uid.
SHARD_RING=e2e
# shellcheck disable=SC2034 # read by the harnesses (harness_shard_install)
SHARD_KEY=uid
SHARD_NAMESPACES=10
SHARD_PER_NAMESPACE=30
SHARD_LABEL=e2e.informant.dev/sharded

# The spec of the sharded CacheConfig, but its sharding (the harness adds it: the chart sets it
# from its sharding values).
shard_spec() {
  printf '{"byObject": [{"apiVersion": "v1", "kind": "ConfigMap", "labelSelector": "%s=yes"}]}' "$SHARD_LABEL"
}

create_shard_objects() {
  local n i
  for n in $(seq 0 $((SHARD_NAMESPACES - 1))); do
    printf 'apiVersion: v1\nkind: Namespace\nmetadata: {name: e2e-shard-%s}\n---\n' "$n"
    for i in $(seq 0 $((SHARD_PER_NAMESPACE - 1))); do
      printf 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm-%s, namespace: e2e-shard-%s, labels: {%s: "yes"}}\ndata: {k: v}\n---\n' \
        "$i" "$n" "$SHARD_LABEL"
    done
  done | k create -f - >/dev/null
}

# shard_settled N: exactly N members, whose claims are disjoint and cover the hash space (claims
# seen to intersect, at any poll, go to $work/shard-overlaps).
shard_settled() {
  k -n "$E2E_NS" get leases -l "informant.dev/ring=$SHARD_RING" -o json >"$work/shard-leases.json"
  python3 "$E2E_LIB/shard.py" check "$1" "$work/shard-overlaps" <"$work/shard-leases.json" >"$work/shard-settled"
}

# shard_owned: every object hashes into the claims of exactly one member, and each member caches
# exactly the objects it owns.
shard_owned() {
  k -n "$E2E_NS" get leases -l "informant.dev/ring=$SHARD_RING" -o json >"$work/shard-leases.json"
  k get configmaps -A -l "$SHARD_LABEL=yes" -o json >"$work/shard-objects.json"
  harness_member_metrics >"$work/shard-metrics.txt"
  python3 "$E2E_LIB/shard.py" owners "$work/shard-leases.json" "$work/shard-objects.json" \
    "$work/shard-metrics.txt" >"$work/shard-owned"
}

scenario_shard() {
  step "9. sharding: scale 1 -> 3 -> 1 replicas, every object owned by exactly one member"
  local work=$1 n
  : >"$work/shard-overlaps"
  create_shard_objects
  harness_shard_install "$(shard_spec)"
  for n in 1 3 1; do
    harness_shard_scale "$n"
    wait_until "$E2E_WAIT" "$n member(s) whose claims are disjoint and cover the hash space" shard_settled "$n"
    # What the poll that passed saw: a second look may catch a part between two owners, which
    # the ring allows for a moment (never two owners at once: shard-overlaps says that).
    note "$(cat "$work/shard-settled")"
    wait_until "$E2E_WAIT" "every object owned and cached by exactly one of $n member(s)" shard_owned
    echo "ok: $n replica(s): $(cat "$work/shard-owned")"
  done
  expect_eq "no two members ever claimed one part of the hash space at once" "" "$(cat "$work/shard-overlaps")"
  expect_eq "every object counted once" "$((SHARD_NAMESPACES * SHARD_PER_NAMESPACE)) objects" \
    "$(cut -d, -f1 "$work/shard-owned")"
  harness_shard_uninstall
  for n in $(seq 0 $((SHARD_NAMESPACES - 1))); do k delete namespace "e2e-shard-$n" --wait=false >/dev/null; done
}

# run_scenarios WORKDIR: every scenario, in order (each builds on the state the previous left).
run_scenarios() {
  local work=$1
  scenario_install
  scenario_reload
  scenario_invalid
  scenario_cronjob "$work"
  scenario_fates
  scenario_leader
  scenario_namespaces "$work"
  scenario_uninstall
  scenario_shard "$work"
}
