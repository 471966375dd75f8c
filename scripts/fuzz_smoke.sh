#!/usr/bin/env bash
# Smoke run of every libFuzzer target, as CI runs it (`make fuzz-smoke`): each
# fuzzer of fuzz/ runs its seeds (fuzz/corpus/<format>/) and then a fixed
# number of mutations of them (about 10 s each on a 2-core machine), under
# ASan + UBSan. A crash, sanitizer report, leak,
# slow input or out-of-memory fails the run, and that fuzzer's log is shown.
#
#   scripts/fuzz_smoke.sh [BUILD_DIR]     default build/asan (make asan builds it)
#
# Environment: FUZZ_SCALE (multiplies every fuzzer's number of runs, default
# 1), FUZZ_SECONDS (a cap on each fuzzer's time, default 120), JOBS (fuzzers
# run side by side, default 2).
#
# The mutation seed (-seed=1) and the number of runs are fixed, and the
# fuzzers run with address-space randomisation off (setarch -R, where the
# kernel allows it): libFuzzer's comparison traces hold addresses, so with
# ASLR two runs of the same build mutate differently from the first
# minutes. That makes most runs repeat, not all: targets whose code paths
# depend on threads or clocks (image, stats) still vary a little from run
# to run, so a finding on one machine may not appear on another. Every
# finding's input is written to BUILD_DIR/fuzz-smoke/ and printed as
# base64; keep it in fuzz/corpus/<format>/ as a regression-* seed once
# fixed. The time cap is the only part that depends on the machine's
# speed. New inputs go to a scratch directory, never into fuzz/corpus; logs
# and crash inputs are kept in BUILD_DIR/fuzz-smoke/.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

build_dir="${1:-build/asan}"
seconds="${FUZZ_SECONDS:-120}"
scale="${FUZZ_SCALE:-1}"
# Mutations per fuzzer: about 10 s under ASan + UBSan on a 2-core VM.
declare -A runs_of=(
  [audio_fuzzer]=2500 [image_fuzzer]=30000 [npy_fuzzer]=400000
  [tar_fuzzer]=300000 [video_fuzzer]=1500 [wav_fuzzer]=300000
  [zip_fuzzer]=300000 [stats_fuzzer]=300000 [proc_fuzzer]=800000
  [packets_fuzzer]=100000
)
jobs="${JOBS:-2}"
out_dir="${build_dir}/fuzz-smoke"

# Every fuzz/<format>_fuzzer.cc must have been built: a fuzzer that is not
# built is not smoke-tested.
fuzzers=()
for source in fuzz/*_fuzzer.cc; do
  name="$(basename "${source}" .cc)"
  if [[ ! -x "${build_dir}/fuzz/${name}" ]]; then
    echo "fuzz_smoke: ${build_dir}/fuzz/${name} is not built (make asan)" >&2
    exit 1
  fi
  if [[ ! -d "fuzz/corpus/${name%_fuzzer}" ]]; then
    echo "fuzz_smoke: ${name} has no seeds in fuzz/corpus/${name%_fuzzer}" >&2
    exit 1
  fi
  if [[ -z "${runs_of[${name}]:-}" ]]; then
    echo "fuzz_smoke: ${name} has no number of runs in ${BASH_SOURCE[0]}" >&2
    exit 1
  fi
  fuzzers+=("${name}")
done

no_aslr=""
if setarch "$(uname -m)" -R true >/dev/null 2>&1; then
  no_aslr="setarch $(uname -m) -R"
fi

rm -rf "${out_dir}"
mkdir -p "${out_dir}"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

# Runs fuzzer $1 and writes its exit status to <name>.status.
run_one() {
  local name="$1"
  local scratch="${out_dir}/${name}.corpus"
  local status=0
  mkdir -p "${scratch}"
  # The scratch directory comes first: libFuzzer writes new inputs there only.
  ${no_aslr} "${build_dir}/fuzz/${name}" "${scratch}" "fuzz/corpus/${name%_fuzzer}" \
    -seed=1 -runs=$((runs_of[${name}] * scale)) \
    -max_total_time="${seconds}" -timeout=30 -rss_limit_mb=2560 \
    -print_final_stats=1 -artifact_prefix="${out_dir}/${name}-" \
    >"${out_dir}/${name}.log" 2>&1 || status=$?
  echo "${status}" >"${out_dir}/${name}.status"
}

for name in "${fuzzers[@]}"; do
  while (($(jobs -rp | wc -l) >= jobs)); do
    wait -n || true
  done
  run_one "${name}" &
done
wait

failed=0
for name in "${fuzzers[@]}"; do
  if [[ "$(cat "${out_dir}/${name}.status")" == 0 ]]; then
    runs="$(sed -n 's/^stat::number_of_executed_units: *//p' \
      "${out_dir}/${name}.log")"
    echo "fuzz_smoke: ${name}: ok, ${runs:-?} inputs"
  else
    echo "fuzz_smoke: ${name}: FAILED; last lines of ${out_dir}/${name}.log:"
    tail -n 40 "${out_dir}/${name}.log"
    failed=1
  fi
done
exit "${failed}"
