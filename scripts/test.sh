#!/usr/bin/env bash
# Runs autopar's whole test suite on this machine (root, Debian 12): installs the dependencies,
# builds, starts three local 4-node Slurm clusters (tests/cluster/) with the fresh plugin, runs every
# unit and integration test through ctest, then the sanitizer stages (ASan+UBSan, fuzzing, TSan).
# Extra arguments go to the main build's ctest (e.g. -L integration).
set -euo pipefail
# shellcheck source=cluster-env.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/cluster-env.sh"
cd "$AUTOPAR_REPO"

# Each stage's end, in seconds since the start, for the tail of CI's log.
stage() { echo "test.sh: $1 at ${SECONDS}s"; }
bash scripts/install-deps.sh
stage "dependencies installed"
# The main build: the product and every test but the GoogleTest unit tests, which the sanitizer
# build below builds and runs (the same tests, once, under ASan + UBSan; a developer's
# scripts/build.sh puts them in the main build too).
bash scripts/build.sh -DAUTOPAR_UNIT_TESTS=OFF
stage "built"

# Two sanitizer builds, compiled in the background at the lowest CPU priority while ctest runs the
# suite below (the integration tests mostly wait for Slurm and their programs' sleeps; they get
# the CPU first), then their tests run at normal priority once the suite has passed:
# - clang with AddressSanitizer + UndefinedBehaviorSanitizer and libFuzzer's coverage
#   (-DAUTOPAR_FUZZ=ON), configured as the main build otherwise (NCCL's parts included): the
#   unit tests, run only here, then every fuzz target for a few seconds on its seed corpus
#   (scripts/fuzz.sh; longer runs: bench/RESULTS.md);
# - clang with ThreadSanitizer (-DAUTOPAR_TSAN=ON, -O1, line tables only: the reports keep their
#   file:line and the build a quarter of its CPU time): autopard's tests, among them
#   DaemonLoadTest (8 threads of requests on one daemon while it serves, uploads and ticks), the
#   failure handler's and the protocol's (heartbeat sender); any report fails them.
#   tests/tsan.supp: the suppressions, each with its reason.
san=$AUTOPAR_BUILD_DIR-san
tsan=$AUTOPAR_BUILD_DIR-tsan
sanitizer_log=$AUTOPAR_BUILD_DIR-sanitizers.log
(
  renice -n 19 -p "$BASHPID" >/dev/null
  CC=clang CXX=clang++ cmake -S . -B "$san" -DCMAKE_BUILD_TYPE=Debug -DAUTOPAR_FUZZ=ON \
    -DAUTOPAR_BUILD_BENCH=OFF -DAUTOPAR_UNIT_TESTS=ON >/dev/null
  cmake --build "$san" -j"$(nproc)" --target autopar_unit_tests autopar_fuzz_targets
  CC=clang CXX=clang++ cmake -S . -B "$tsan" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-gline-tables-only -O1" \
    -DAUTOPAR_TSAN=ON -DAUTOPAR_BUILD_BENCH=OFF -DAUTOPAR_WITH_CUDA=OFF >/dev/null
  cmake --build "$tsan" -j"$(nproc)" --target autopard_test failure_handler_test proto_test
) >"$sanitizer_log" 2>&1 &
sanitizer_builds=$!

# The services the tests use: three local Slurm clusters (ctest runs an integration test on each
# at once: tests/CMakeLists.txt; the tests mostly wait, for Slurm, their programs' steps and the
# timeouts they provoke, so a third one beside the two keeps the CPUs busy) and an S3 server on
# loopback. Each cluster has its own directory, ports and job ids (c1 from 1, c2 from 500000, c3
# from 700000), so nothing of them ever meets.
s3_state=$AUTOPAR_CLUSTER_DIR-s3
# with_cluster N COMMAND...: COMMAND with cluster N's variables (1: the default's, as exported).
with_cluster() {
  local n=$1
  shift
  if ((n == 1)); then
    "$@"
    return
  fi
  local dir=$AUTOPAR_CLUSTER_DIR-$n
  env AUTOPAR_CLUSTER_DIR="$dir" AUTOPAR_CLUSTER_PORT_BASE=$((18817 - 1000 * n)) \
    AUTOPAR_CLUSTER_FIRST_JOB_ID=$((300000 + 200000 * (n - 1))) \
    AUTOPAR_PLUGSTACK_ARGS="${AUTOPAR_PLUGSTACK_ARGS//"$AUTOPAR_CLUSTER_DIR"/"$dir"}" "$@"
}
clusters=(1 2 3)
stop_services() {
  kill "$sanitizer_builds" 2>/dev/null || true
  for n in "${clusters[@]}"; do with_cluster "$n" bash tests/cluster/stop.sh || true; done
  bash tests/s3/stop-s3rver.sh "$s3_state" --purge || true
}
trap stop_services EXIT
bash tests/s3/stop-s3rver.sh "$s3_state" --purge >/dev/null 2>&1 || true
s3_env=$(bash tests/s3/start-s3rver.sh "$s3_state")
set -a  # export what start-s3rver.sh prints (AUTOPAR_S3_ENDPOINT, ...) to the tests
eval "$s3_env"
set +a
# Fresh clusters: a run that was killed leaves its clusters' Slurm and autopard state behind, and
# a controller that recovers it fails its jobs' nodes ("missing from batch node"), with whatever
# this run has started there.
for n in "${clusters[@]}"; do with_cluster "$n" bash tests/cluster/stop.sh --clean; done
# Fresh clusters number their jobs from the same ids again: what earlier runs' jobs left under
# their job ids in the machine's shared places (the Python stack dumps' directories, each its
# job's owner's: autopar.stacks refuses another user's) must not meet this run's jobs.
rm -rf /tmp/autopar-stacks
for n in "${clusters[@]}"; do with_cluster "$n" bash tests/cluster/start.sh; done
# shellcheck source=/dev/null
source "$AUTOPAR_CLUSTER_DIR/env.sh"

# The last 40 lines of each failed test's output again after ctest's summary: CI shows a run's
# tail, and with three tests at once a failure's output lies hundreds of lines above it.
failed_tails() {
  awk '/^[0-9]+\/[0-9]+ Test: / { name = $3; n = 0; inside = 0; next }
       /^Output:$/ { inside = 1; next }
       /^<end of output>$/ { inside = 0; next }
       inside { line[n++ % 40] = $0 }
       /^Test Failed\.$/ { printf "---- %s: its last lines\n", name
                           for (i = (n > 40 ? n - 40 : 0); i < n; i++) print line[i % 40] }' \
    "$AUTOPAR_BUILD_DIR/Testing/Temporary/LastTest.log"
}
stage "clusters started"
if ! ctest --test-dir "$AUTOPAR_BUILD_DIR" --output-on-failure -j3 \
  --resource-spec-file "$AUTOPAR_REPO/tests/cluster/clusters.json" "$@"; then
  failed_tails
  exit 8
fi
stage "suite passed"

if ! wait "$sanitizer_builds"; then
  tail -n 60 "$sanitizer_log"
  echo "test.sh: the sanitizer builds failed (whole log: $sanitizer_log)" >&2
  exit 1
fi
stage "sanitizer builds done"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  ctest --test-dir "$san" -L unit -LE program --output-on-failure -j2
AUTOPAR_FUZZ_BUILD=$san bash scripts/fuzz.sh 5
stage "sanitizer tests and fuzzing done"
# proto_test: no thread-leak reports (not races: a process's heartbeat sender is never joined, by
# design, core/proto/heartbeat_sender.h), and not the test whose forked child of a threaded
# process starts a thread (TSan does not support that: "starting new threads after
# multi-threaded fork is not supported").
tsan_options="halt_on_error=1 second_deadlock_stack=1 suppressions=$AUTOPAR_REPO/tests/tsan.supp"
TSAN_OPTIONS=$tsan_options "$tsan/service/autopard/autopard_test" --gtest_brief=1
TSAN_OPTIONS=$tsan_options "$tsan/service/failure/failure_handler_test" --gtest_brief=1
TSAN_OPTIONS="$tsan_options report_thread_leaks=0" "$tsan/core/proto/proto_test" --gtest_brief=1 \
  --gtest_filter=-CkptCApiHeartbeatTest.AForkedChildSendsWithAThreadOfItsOwn
stage "thread sanitizer done"
