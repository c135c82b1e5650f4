#!/usr/bin/env bash
# jit_cache.sh: carry SGLang's just-in-time kernel caches from one GPU host to a fresh one.
#
# A first server start on a fresh host spends most of its 250-300 s compiling FlashInfer, tvm-ffi, Triton
# and torch-inductor kernels (docs/guide/gpu-hosts.md). Hosts that start bare every time (a nightly container,
# an offline host re-imaged between runs) pay it on every run. This packs the caches after a run and
# unpacks them before the next one. The caches are keyed by the compiler and the package tree: a host
# with another CXX or another sglang/flashinfer build recompiles anyway (no harm, just no gain).
#
#   bash scripts/jit_cache.sh save FILE.tar.xz      after a run, on the host that compiled
#   bash scripts/jit_cache.sh restore FILE.tar.xz   before the first server start on the fresh host
#   bash scripts/jit_cache.sh list                  what exists now, with sizes
set -euo pipefail

user=$(id -un)
# Paths relative to /, so a restore puts them back where the servers look. Which exist depends on the
# sglang version; missing ones are skipped.
CACHES=(
  "${HOME#/}/.cache/flashinfer"
  "${HOME#/}/.cache/tvm-ffi"
  "${HOME#/}/.triton"
  "tmp/torchinductor_$user"
)

present() {
  local p
  for p in "${CACHES[@]}"; do [ -e "/$p" ] && printf '%s\n' "$p"; done
  return 0
}

case "${1:-}" in
  save)
    out=${2:?usage: jit_cache.sh save FILE.tar.xz}
    mapfile -t have < <(present)
    if [ "${#have[@]}" -eq 0 ]; then echo "jit_cache: no JIT caches on this host (nothing started yet?)" >&2; exit 1; fi
    tar -cf - -C / "${have[@]}" | xz -T0 -3 > "$out.partial"
    mv "$out.partial" "$out"
    echo "jit_cache: saved ${have[*]} to $out ($(du -h "$out" | cut -f1))"
    ;;
  restore)
    in=${2:?usage: jit_cache.sh restore FILE.tar.xz}
    [ -f "$in" ] || { echo "jit_cache: $in does not exist" >&2; exit 1; }
    # Only the cache directories, never absolute or parent paths: a cache file cannot write elsewhere.
    # No `..` components and no links, which could lead a later member out of them.
    names=$(xz -dc "$in" | tar -tf -)
    bad=$(printf '%s\n' "$names" | grep -vE "^(${HOME#/}/\.cache/(flashinfer|tvm-ffi)|${HOME#/}/\.triton|tmp/torchinductor_[A-Za-z0-9_.-]+)(/|$)" || true)
    bad+=$(printf '%s\n' "$names" | grep -E '(^|/)\.\.(/|$)' || true)
    bad+=$(xz -dc "$in" | tar -tvf - | grep -E '^[lh]' || true)
    if [ -n "$bad" ]; then echo "jit_cache: $in holds paths outside the JIT caches:" >&2; echo "$bad" | head -5 >&2; exit 1; fi
    xz -dc "$in" | tar -xf - -C / --no-same-owner
    echo "jit_cache: restored from $in"
    ;;
  list)
    mapfile -t have < <(present)
    for p in "${have[@]}"; do du -sh "/$p"; done
    ;;
  *)
    sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
