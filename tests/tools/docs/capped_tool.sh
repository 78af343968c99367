#!/bin/bash
# capped_tool.sh REAL_PROGRAM [ARGS...]: what the docs test puts at build/tools/NAME, so that a
# command of the docs runs as written but briefly. brigade-train is run with at most
# BRIGADE_DOCS_TEST_STEPS steps (default 2: --steps lowered to it, or added) and, unless the
# command names --data, on BRIGADE_DOCS_TEST_SAMPLES synthetic samples (default 512) instead
# of Fashion-MNIST, whose 10,000-image evaluation would cost seconds per command. Every other
# flag is passed through untouched; --help, and every other program, run exactly as written.
set -euo pipefail
program=$1
shift
if [[ $(basename "$program") != brigade-train ]]; then exec "$program" "$@"; fi

steps_cap=${BRIGADE_DOCS_TEST_STEPS:-2}
samples=${BRIGADE_DOCS_TEST_SAMPLES:-512}
capped() {  # a --steps value, lowered to the cap (0 means no limit)
  if [[ $1 =~ ^[0-9]+$ ]] && (( $1 != 0 && $1 < steps_cap )); then echo "$1"; else echo "$steps_cap"; fi
}
args=()
have_steps=false
have_data=false
while (( $# > 0 )); do
  case $1 in
    -h|--help) exec "$program" "$@" ;;
    --steps) have_steps=true; args+=(--steps "$(capped "${2:-}")"); shift $(( $# > 1 ? 2 : 1 )); continue ;;
    --steps=*) have_steps=true; args+=("--steps=$(capped "${1#--steps=}")") ;;
    --data|--data=*) have_data=true; args+=("$1") ;;
    *) args+=("$1") ;;
  esac
  shift
done
if ! $have_steps; then args+=(--steps "$steps_cap"); fi
if ! $have_data; then args+=(--data synthetic --synthetic-count "$samples"); fi
exec "$program" "${args[@]}"
