#!/bin/sh
# An informant exec hook on a schedule (scheduleMode: batch): each tick, one call with every
# ConfigMap in `objects`; answers one Normal event `Census` (recorded on the Controller: a
# batch answer carries events only, and one without `regarding` is about the Controller). The
# hook is also called for each ConfigMap that changes (a request with `object`): it answers
# nothing to those.
exec jq -c 'if has("objects") then {events: [{type: "Normal", reason: "Census",
  message: "\(.objects | length) ConfigMaps at \(.scheduledTime)"}]} else {} end'
