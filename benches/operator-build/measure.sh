#!/usr/bin/env bash
# The cold debug build of one operator on plain kube-rs and on informant (`default-features =
# false, features = ["cli"]`), one after the other, each from an empty target directory
# (target/operator-build/<name>), with the versions of informant's Cargo.lock: prints seconds,
# the target directory's size and the binary's. docs/manager.md has the figures.
#
#   bash benches/operator-build/measure.sh [--offline]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
for op in kube-rs informant; do
  target=$root/target/operator-build/$op
  rm -rf "$target"
  cp "$root/Cargo.lock" "$here/$op/Cargo.lock"
  start=$(date +%s%N)
  (cd "$here/$op" && CARGO_TARGET_DIR=$target cargo build --quiet "$@")
  end=$(date +%s%N)
  rm -f "$here/$op/Cargo.lock"
  echo "$op: $(((end - start) / 1000000)) ms, target $(du -sm "$target" | cut -f1) MB," \
    "binary $(du -m "$target/debug/op-$op" | cut -f1) MB"
done
