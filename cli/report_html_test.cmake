# ctest: `autopar report --html FILE` fails with one line naming --html, and leaves FILE as it was
# (no half-written page, no FILE.tmp), when FILE cannot be written or autopard cannot be asked.
# No daemon needed: the socket does not exist.
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
set(no_daemon --socket "${WORK}/no-autopard.sock")

set(cli_command report 42 ${no_daemon})
include(${CMAKE_CURRENT_LIST_DIR}/expect_one_line.cmake)

expect_one_line(1 "autopar report: --html: cannot write '${WORK}/no/such/dir/r.html': No such file or directory"
  --html "${WORK}/no/such/dir/r.html")
expect_one_line(1 "autopar report: --html: cannot write '${WORK}': Is a directory" --html "${WORK}")
expect_one_line(2 "autopar report: --html: cannot be combined with --json" --html "${WORK}/r.html" --json)
expect_one_line(2 "autopar report: --html: needs a file name (or - for standard output)" --html=)
expect_one_line(2 "autopar report: --html: needs a value" --html)

# The page is written only once the report is complete: autopard unreachable leaves an earlier
# page untouched and no FILE.tmp behind.
file(WRITE "${WORK}/r.html" "the earlier page")
expect_one_line(1 "autopar report: autopard (${WORK}/no-autopard.sock)" --html "${WORK}/r.html")
file(READ "${WORK}/r.html" kept)
if(NOT kept STREQUAL "the earlier page" OR EXISTS "${WORK}/r.html.tmp")
  message(FATAL_ERROR "a failed report changed ${WORK}/r.html ('${kept}') or left r.html.tmp")
endif()
