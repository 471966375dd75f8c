#!/usr/bin/env bash
# The fuzzing campaign (`make fuzz`): every libFuzzer target of fuzz/ runs for
# a set time under ASan + UBSan, on a working corpus that persists between
# runs. Unlike `make fuzz-smoke` (fixed seed and mutation count, for CI),
# each run explores new inputs.
#
#   scripts/fuzz.sh [BUILD_DIR]     default build/asan (make fuzz builds it)
#
# Environment:
#   FUZZ_SECONDS  time per target (default 60)
#   JOBS          targets run side by side (default 2)
#   FUZZ_TARGETS  the targets to run, e.g. "npy_fuzzer tar_fuzzer" (default all)
#   FUZZ_FLAGS    more libFuzzer flags, e.g. "-max_len=4096"
#   FUZZ_MERGE=1  afterwards, merge the inputs that add coverage into the
#                 checked-in corpus, fuzz/corpus/<format>/ (libFuzzer
#                 -merge=1: only inputs with new coverage are copied)
#
# Working corpora, logs and artifacts are in BUILD_DIR/fuzz-campaign/. A
# finding (crash, leak, timeout, out-of-memory) is copied into
# fuzz/corpus/<format>/ under libFuzzer's artifact name (crash-<sha1>, ...),
# so it becomes a seed that make fuzz-smoke and the hostile-input tests
# replay; fix it, then rename it regression-<what>. Exits with 1 if any
# target found something.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

build_dir="${1:-build/asan}"
seconds="${FUZZ_SECONDS:-60}"
jobs="${JOBS:-2}"
merge="${FUZZ_MERGE:-0}"
read -r -a extra_flags <<<"${FUZZ_FLAGS:-}"
out_dir="${build_dir}/fuzz-campaign"

fuzzers=()
for source in fuzz/*_fuzzer.cc; do
  name="$(basename "${source}" .cc)"
  if [[ -n "${FUZZ_TARGETS:-}" && " ${FUZZ_TARGETS} " != *" ${name} "* ]]; then
    continue
  fi
  if [[ ! -x "${build_dir}/fuzz/${name}" ]]; then
    echo "fuzz: ${build_dir}/fuzz/${name} is not built (make asan)" >&2
    exit 1
  fi
  if [[ ! -d "fuzz/corpus/${name%_fuzzer}" ]]; then
    echo "fuzz: ${name} has no seeds in fuzz/corpus/${name%_fuzzer}" >&2
    exit 1
  fi
  fuzzers+=("${name}")
done

mkdir -p "${out_dir}"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

# Runs fuzzer $1 for the set time; writes its exit status to <name>.status.
run_one() {
  local name="$1"
  local work="${out_dir}/${name}.corpus"
  local artifacts="${out_dir}/${name}.artifacts"
  local status=0
  mkdir -p "${work}" "${artifacts}"
  rm -f "${artifacts}"/*
  # The working corpus comes first: libFuzzer adds new inputs there only;
  # the seeds are read from fuzz/corpus.
  "${build_dir}/fuzz/${name}" "${work}" "fuzz/corpus/${name%_fuzzer}" \
    -max_total_time="${seconds}" -timeout=30 -rss_limit_mb=2560 \
    -print_final_stats=1 -artifact_prefix="${artifacts}/" \
    ${extra_flags[@]+"${extra_flags[@]}"} >"${out_dir}/${name}.log" 2>&1 || status=$?
  echo "${status}" >"${out_dir}/${name}.status"
}

for name in "${fuzzers[@]}"; do
  while (($(jobs -rp | wc -l) >= jobs)); do
    wait -n || true
  done
  run_one "${name}" &
done
wait

total=0
findings=0
for name in "${fuzzers[@]}"; do
  log="${out_dir}/${name}.log"
  runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "${log}" | tail -n 1)"
  rate="$(sed -n 's/^stat::average_exec_per_sec: *//p' "${log}" | tail -n 1)"
  cov="$( (grep -o 'cov: [0-9]*' "${log}" || true) | tail -n 1 | cut -d' ' -f2)"
  total=$((total + ${runs:-0}))
  found=("${out_dir}/${name}.artifacts"/*)
  if [[ -e "${found[0]}" ]]; then
    for f in "${found[@]}"; do
      cp "${f}" "fuzz/corpus/${name%_fuzzer}/"
      echo "fuzz: ${name}: FINDING kept as fuzz/corpus/${name%_fuzzer}/$(basename "${f}")"
    done
    findings=$((findings + ${#found[@]}))
    tail -n 40 "${log}"
  elif [[ "$(cat "${out_dir}/${name}.status")" != 0 ]]; then
    echo "fuzz: ${name}: FAILED without an artifact; last lines of ${log}:"
    tail -n 40 "${log}"
    findings=$((findings + 1))
  fi
  echo "fuzz: ${name}: ${runs:-?} executions (${rate:-?}/s), coverage ${cov:-?}"
  if [[ "${merge}" == 1 ]]; then
    before="$(find "fuzz/corpus/${name%_fuzzer}" -type f | wc -l)"
    "${build_dir}/fuzz/${name}" -merge=1 "fuzz/corpus/${name%_fuzzer}" \
      "${out_dir}/${name}.corpus" >"${out_dir}/${name}.merge.log" 2>&1
    after="$(find "fuzz/corpus/${name%_fuzzer}" -type f | wc -l)"
    echo "fuzz: ${name}: merged $((after - before)) new inputs into fuzz/corpus/${name%_fuzzer}"
  fi
done
echo "fuzz: ${#fuzzers[@]} targets, ${seconds} s each, ${total} executions, ${findings} findings"
((findings == 0))
