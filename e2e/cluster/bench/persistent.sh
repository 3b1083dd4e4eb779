#!/bin/sh
# A persistent exec hook for the benchmark: one line in, one line out, allowing every call but
# one whose object is labelled deny: "yes" (the bench's probe that this hook is in the path).
while IFS= read -r line; do
  id=${line#'{"id":'}
  id=${id%%,*}
  case "$line" in
    *'"deny":"yes"'*) printf '{"id":%s,"response":{"allowed":false,"message":"denied by the bench persistent hook"}}\n' "$id" ;;
    *) printf '{"id":%s,"response":{"allowed":true}}\n' "$id" ;;
  esac
done
