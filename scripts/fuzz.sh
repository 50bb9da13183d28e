#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, -DAUTOPAR_FUZZ=ON with clang) in their own build directory
# and runs each for SECONDS (default 10) on its seed corpus (fuzz/corpus/<target>/); fails on the
# first crash, leak, sanitizer report or timeout. New inputs go to a scratch directory, never into
# the repository's corpus; a crash's input is left in $AUTOPAR_FUZZ_ARTIFACTS (default
# <build>/artifacts).
#   scripts/fuzz.sh [SECONDS]     AUTOPAR_FUZZ_BUILD=dir (default build-fuzz beside the checkout)
#                                 AUTOPAR_FUZZ_TARGETS="hostlist_fuzz s3_xml_fuzz" (default: all)
#                                 AUTOPAR_FUZZ_JOBS=N build parallelism (default 1)
#                                 AUTOPAR_FUZZ_PARALLEL=N targets run at once (default: the CPUs)
set -euo pipefail

seconds="${1:-10}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${AUTOPAR_FUZZ_BUILD:-${root}/build-fuzz}"
artifacts="${AUTOPAR_FUZZ_ARTIFACTS:-${build}/artifacts}"
jobs="${AUTOPAR_FUZZ_JOBS:-1}"

for tool in clang clang++; do
  command -v "${tool}" >/dev/null || { echo "fuzz.sh: ${tool} not found (apt-get install clang)" >&2; exit 1; }
done

# A build directory configured already keeps its settings (scripts/test.sh's sanitizer build has
# the unit tests in it too).
if ! grep -q '^AUTOPAR_FUZZ:BOOL=ON$' "${build}/CMakeCache.txt" 2>/dev/null; then
  CC=clang CXX=clang++ cmake -S "${root}" -B "${build}" -DAUTOPAR_FUZZ=ON -DAUTOPAR_BUILD_TESTS=OFF \
    -DAUTOPAR_BUILD_BENCH=OFF -DAUTOPAR_WITH_CUDA=OFF >/dev/null
fi
cmake --build "${build}" -j "${jobs}" --target autopar_fuzz_targets

if [[ -n "${AUTOPAR_FUZZ_TARGETS:-}" ]]; then
  read -r -a targets <<<"${AUTOPAR_FUZZ_TARGETS}"
else
  targets=()
  for dir in "${root}"/fuzz/corpus/*/; do targets+=("$(basename "${dir}")"); done
fi

scratch="$(mktemp -d)"
trap 'rm -rf "${scratch}"' EXIT
mkdir -p "${artifacts}"
# One target per CPU at a time (each libFuzzer run is one process); the results in order.
run_target() {
  local target=$1
  local rc=0
  mkdir -p "${scratch}/${target}"
  "${build}/fuzz/${target}" "${scratch}/${target}" "${root}/fuzz/corpus/${target}" \
    -max_total_time="${seconds}" -rss_limit_mb=2048 -timeout=10 -max_len=65536 \
    -artifact_prefix="${artifacts}/${target}-" -print_final_stats=1 >"${scratch}/${target}.log" 2>&1 || rc=$?
  echo "${rc}" >"${scratch}/${target}.rc"
}
parallel="${AUTOPAR_FUZZ_PARALLEL:-$(nproc)}"
for target in "${targets[@]}"; do
  while (($(jobs -rp | wc -l) >= parallel)); do wait -n || true; done
  run_target "${target}" &
done
wait
failed=0
for target in "${targets[@]}"; do
  log="${scratch}/${target}.log"
  if [[ $(cat "${scratch}/${target}.rc") == 0 ]]; then
    runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "${log}")"
    echo "fuzz.sh: ${target}: ok, ${runs:-?} executions in ${seconds} s"
  else
    echo "fuzz.sh: ${target}: FAILED (input under ${artifacts}/${target}-*)" >&2
    tail -n 40 "${log}" >&2
    failed=1
  fi
done
exit "${failed}"
