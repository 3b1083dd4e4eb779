# shellcheck shell=bash
# The e2e scenarios, written once and run against whatever cluster a harness gives them
# (e2e/run.sh embedded: the embedded API server and local manager processes; e2e/kind.sh: a kind
# cluster and the Helm chart). They use kubectl, curl, the local `informant` binary (validate,
# simulate) and python3 (JSON plumbing only), plus this harness interface:
#
#   variables
#     E2E_NS                namespace of the CacheConfig and of the leader election Lease
#     E2E_CC                name of the CacheConfig the manager runs from (set by harness_install)
#     E2E_LEASE             name of the Lease
#     E2E_WAIT              seconds a condition may take (sync, reload, status write)
#     E2E_TAKEOVER_TIMEOUT  seconds a standby may take to lead once the leader is stopped
#     E2E_SPEC              the initial CacheConfig spec, as JSON (e2e/testdata/spec.json)
#     INFORMANT             the informant binary (validate, simulate)
#   functions
#     harness_install        install CRDs and one manager replica running from the CacheConfig
#                            E2E_NS/E2E_CC whose spec is E2E_SPEC; set E2E_CC
#     harness_metrics        print the replica's /metrics
#     harness_health PATH    print "CODE BODY" of GET PATH on the replica's health probe port
#     harness_list_count RES print how many LIST requests the API server served for resource RES,
#                            or nothing when the cluster cannot say (the check is then skipped)
#     harness_scale_out      run a second replica; both campaign for the Lease
#     harness_stop_leader ID stop the replica whose Lease identity is ID
#     harness_uninstall      remove what harness_install installed (the CRDs stay, as Helm does)
#     harness_leftovers      print what is left of the installation, one line each (nothing = clean)
#     harness_logs           print the manager's (and server's) logs, for failure reports
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

# Events the manager recorded = one per applied reload (ConfigReloaded) + one per rejected one
# (InvalidConfig); the conservation law says their fates add up to it once nothing is in flight.
events_settled() {
  local text recorded fates
  text=$(harness_metrics) || return 1
  recorded=$(($(metric "$text" informant_config_reloads_total 'result="applied"') + $(metric "$text" informant_config_reloads_total 'result="rejected"')))
  fates=$(metric_sum "$text" informant_events_total)
  [ "$recorded" = "$fates" ]
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
  expect_eq "kubectl get cc: printer columns" "NAME VALID READY INFORMERS AGE" \
    "$(echo "$table" | head -n1 | tr -s ' ')"
  expect_eq "kubectl get cc: Valid Ready Informers" "True True 3" \
    "$(echo "$table" | tail -n1 | awk '{print $2, $3, $4}')"
  if ! echo "$table" | tail -n1 | awk '{print $5}' | grep -Eq '^[0-9]+[smhd]'; then
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
  expect_contains "/readyz fails on the config check" "500 [-]config failed" "$health"
  expect_contains "/readyz: informers still ok" "[+]informers ok" "$health"
  expect_contains "/readyz/config gives the error" "spec.byObject[1].labelSelector" "$(harness_health /readyz/config)"
  edit '[{"op":"replace","path":"/spec/byObject/1/labelSelector","value":"app=db"}]'
  wait_condition Valid True
  expect_eq "/readyz after the fix" "200 ok" "$(harness_health /readyz)"
}

scenario_stream() {
  step "4. an event stream through the manager's recorder: the Events informant simulate predicts"
  # The stream: Warning InvalidConfig events the manager records on its CacheConfig, one per
  # invalid edit, under a recorder of their own (component e2e-stream: fresh correlator keys)
  # whose aggregation (maxEvents 3) and spam filter (burst 4) both come into play.
  local work=$1 uid text start t selector i message errors
  edit '[{"op":"add","path":"/spec/recorder","value":{"component":"e2e-stream","correlator":{"burst":4,"maxEvents":3}}}]'
  wait_condition Valid True
  kn get cc "$E2E_CC" -o yaml >"$work/stream-config.yaml"
  uid=$(cc_path '{.metadata.uid}')
  wait_events_settled
  text=$(harness_metrics)
  local created patched filtered
  created=$(metric "$text" informant_events_total 'fate="created"')
  patched=$(metric "$text" informant_events_total 'fate="patched"')
  filtered=$(metric "$text" informant_events_total 'fate="spam_filtered"')
  : >"$work/stream.jsonl"
  start=$(date +%s.%N)
  i=0
  # The same error twice (the second edit changes a valid field too), then four other errors.
  for selector in 'app in (' 'app in (' 'app in ((' '=web' 'a b' '!'; do
    i=$((i + 1))
    local patch="[{\"op\":\"replace\",\"path\":\"/spec/byObject/1/labelSelector\",\"value\":\"$selector\"},
                  {\"op\":\"add\",\"path\":\"/spec/syncPeriod\",\"value\":\"${i}h\"}]"
    edit "$patch" "$work/invalid.yaml"
    t=$(awk -v now="$(date +%s.%N)" -v start="$start" 'BEGIN { printf "%.3f", now - start }')
    # The message the manager records: the errors as `informant validate` prints them.
    errors=$({ "$INFORMANT" validate --config "$work/invalid.yaml" 2>&1 || true; } | sed -n 's/^  //p')
    [ -n "$errors" ] || fail "informant validate found no error in edit $i ($selector)"
    local count
    count=$(printf '%s\n' "$errors" | wc -l | tr -d ' ')
    if [ "$count" = 1 ]; then
      message="invalid cacheconfig, keeping the last good one (1 error): $errors"
    else
      message="invalid cacheconfig, keeping the last good one ($count errors): $(printf '%s\n' "$errors" | paste -sd';' - | sed 's/;/; /g')"
    fi
    python3 "$E2E_LIB/events.py" line "$t" e2e-stream "$E2E_NS" "$E2E_CC" "$uid" Warning InvalidConfig "$message" >>"$work/stream.jsonl"
  done
  wait_events_settled
  "$INFORMANT" simulate --events "$work/stream.jsonl" --config "$work/stream-config.yaml" >"$work/simulate.jsonl" ||
    fail "informant simulate failed"
  local predicted expected actual fates
  predicted=$(python3 "$E2E_LIB/events.py" predicted <"$work/simulate.jsonl")
  expected=$(printf '%s\n' "$predicted" | grep -v '^fates ')
  fates=$(printf '%s\n' "$predicted" | grep '^fates ')
  echo "simulate predicts: $fates"
  printf '%s\n' "$expected" | sed 's/^/    /'
  expect_contains "the stream deduplicates (an Event with count 2)" "2|invalid cacheconfig" "$expected"
  expect_contains "the stream aggregates" "(combined from similar events)" "$expected"
  expect_not_contains "the stream is spam filtered" "skipped=0" "$fates"
  actual=$(cc_events | python3 "$E2E_LIB/events.py" actual e2e-stream Warning InvalidConfig)
  expect_eq "the Events in the API server (count|message) are simulate's" "$expected" "$actual"
  text=$(harness_metrics)
  local got
  got="created=$(($(metric "$text" informant_events_total 'fate="created"') - created))"
  got="$got patched=$(($(metric "$text" informant_events_total 'fate="patched"') - patched))"
  got="$got skipped=$(($(metric "$text" informant_events_total 'fate="spam_filtered"') - filtered))"
  expect_eq "informant_events_total over the stream (created, patched, spam_filtered) is simulate's" \
    "${fates#fates }" "$got"
  edit '[{"op":"replace","path":"/spec/byObject/1/labelSelector","value":"app=db"}]'
  wait_condition Valid True
}

scenario_fates() {
  step "5. informant_events_total adds up to the events recorded"
  wait_events_settled
  local text recorded fate
  text=$(harness_metrics)
  recorded=$(($(metric "$text" informant_config_reloads_total 'result="applied"') + $(metric "$text" informant_config_reloads_total 'result="rejected"')))
  printf '%s\n' "$text" | grep '^informant_events_total' | sed 's/^/    /'
  expect_eq "sum over fates = ConfigReloaded + InvalidConfig recorded" "$recorded" "$(metric_sum "$text" informant_events_total)"
  for fate in dropped_incoming_full dropped_watcher_full dropped_shutdown rejected failed invalid; do
    expect_eq "no event ended $fate" "0" "$(metric "$text" informant_events_total "fate=\"$fate\"")"
  done
  expect_eq "fate created = the Events about the CacheConfig in the API server" \
    "$(metric "$text" informant_events_total 'fate="created"')" \
    "$(cc_events | python3 -c 'import json, sys; print(len(json.load(sys.stdin)["items"]))')"
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

scenario_uninstall() {
  step "7. uninstall leaves nothing behind but the CRDs"
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

# run_scenarios WORKDIR: every scenario, in order (each builds on the state the previous left).
run_scenarios() {
  local work=$1
  scenario_install
  scenario_reload
  scenario_invalid
  scenario_stream "$work"
  scenario_fates
  scenario_leader
  scenario_uninstall
}
