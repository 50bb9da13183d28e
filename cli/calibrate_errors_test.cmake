# ctest: `autopar calibrate` refuses with one line and leaves the calibration file as it was (no
# FILE.tmp either): bad usage, a malformed or unwritable file, autopard unreachable. No daemon
# needed: the socket does not exist. (The refusals that need a job's timeline: calibration_test.cpp
# and tests/integration/test_calibration.py.)
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
set(no_daemon --socket "${WORK}/no-autopard.sock")

set(cli_command calibrate)
include(${CMAKE_CURRENT_LIST_DIR}/expect_one_line.cmake)

set(cal "${WORK}/calibration.json")
expect_one_line(2 "autopar calibrate: --file: required" 42 ${no_daemon})
expect_one_line(2 "autopar calibrate: --file: needs a value" 42 --file)
expect_one_line(2 "autopar calibrate: --gpu-type: unknown GPU type 'v99'" 42 --file "${cal}" --gpu-type v99)
expect_one_line(2 "autopar calibrate: --speed: unknown option" 42 --file "${cal}" --speed 2)
expect_one_line(2 "autopar calibrate: unexpected argument '43'" 42 43 --file "${cal}")
expect_one_line(1 "autopar calibrate: --file: cannot write '${WORK}/no/such/dir/c.json': No such file or directory"
  42 ${no_daemon} --file "${WORK}/no/such/dir/c.json")
if(EXISTS "${cal}")
  message(FATAL_ERROR "a refused calibrate created ${cal}")
endif()

# A malformed file is refused before autopard is asked, and kept as it was.
set(bad "{\"gpus\": {\"a100-80gb\": {\"factor\": 2.5, \"job\": \"7\"}}}")
file(WRITE "${cal}" "${bad}")
expect_one_line(1 "autopar calibrate: --file: ${cal}: 'gpus.a100-80gb.factor': must be a number in (0, 2], got 2.5"
  42 ${no_daemon} --file "${cal}")
file(WRITE "${cal}" "{\"gpus\": {\"z100\": {\"factor\": 0.5, \"job\": \"7\"}}}")
expect_one_line(1 "autopar calibrate: --file: ${cal}: 'gpus.z100': unknown GPU type 'z100'"
  42 ${no_daemon} --file "${cal}")

# autopard unreachable: the file and its other GPU types untouched, no FILE.tmp behind.
set(good "{\"gpus\": {\"h100-80gb\": {\"factor\": 0.8, \"job\": \"7\"}}}")
file(WRITE "${cal}" "${good}")
expect_one_line(1 "autopar calibrate: autopard (${WORK}/no-autopard.sock)" 42 ${no_daemon} --file "${cal}")
file(READ "${cal}" kept)
if(NOT kept STREQUAL good OR EXISTS "${cal}.tmp")
  message(FATAL_ERROR "a failed calibrate changed ${cal} ('${kept}') or left calibration.json.tmp")
endif()
