#!/bin/sh
# The benchmark Controller's own hook (persistent): every reconcile answers that there is
# nothing to do, so the ConfigMaps the bench creates cost the manager one cheap call each, the
# same in every figure.
while IFS= read -r line; do
  id=${line#'{"id":'}
  printf '{"id":%s,"response":{}}\n' "${id%%,*}"
done
