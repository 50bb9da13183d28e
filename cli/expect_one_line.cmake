# Included by the cli/*_test.cmake scripts whose cases are refusals of one line:
# expect_one_line(EXPECTED_RC EXPECTED ARGS...) runs `${AUTOPAR} ${cli_command} ARGS...`, which
# must exit EXPECTED_RC with nothing on stdout and exactly one line on stderr that starts with
# EXPECTED. cli_command: what every case's command line starts with (the subcommand, and what
# every case passes), set by the script.
function(expect_one_line expected_rc expected)
  execute_process(COMMAND ${AUTOPAR} ${cli_command} ${ARGN}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL expected_rc)
    message(FATAL_ERROR "${ARGN}: exit ${rc}, expected ${expected_rc} (stderr: ${err})")
  endif()
  string(FIND "${err}" "${expected}" pos)
  if(NOT pos EQUAL 0)
    message(FATAL_ERROR "${ARGN}: stderr '${err}' does not start with '${expected}'")
  endif()
  string(REGEX MATCHALL "\n" newlines "${err}")
  list(LENGTH newlines lines)
  if(NOT lines EQUAL 1 OR NOT out STREQUAL "")
    message(FATAL_ERROR "${ARGN}: expected one line on stderr and nothing on stdout, got '${err}' '${out}'")
  endif()
endfunction()
