# ctest: `autopar check-plugstack` on a good file (with an include), on a typo'd one, on a --line
# and without an autopar.so line: one line per problem and exit 1, else an OK line and exit 0.
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}/plugstack.conf.d")
file(WRITE "${WORK}/good.conf" "optional other.so\ninclude plugstack.conf.d/*.conf\n")
file(WRITE "${WORK}/plugstack.conf.d/autopar.conf"
     "# the site's line\nrequired ${PLUGIN} max_requeue=3 socket=/run/autopard/%n.sock\n")
file(WRITE "${WORK}/typo.conf" "required ${PLUGIN} max_requeu=3 ckpt_upload_schemes=ftp\n")
file(WRITE "${WORK}/none.conf" "optional other.so\n")

function(check expected_rc expected_out expected_err)
  execute_process(COMMAND ${AUTOPAR} check-plugstack ${ARGN}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL expected_rc OR NOT out STREQUAL expected_out OR NOT err STREQUAL expected_err)
    message(FATAL_ERROR "check-plugstack ${ARGN}: exit ${rc} (want ${expected_rc})\n"
                        "stdout '${out}' (want '${expected_out}')\nstderr '${err}' (want '${expected_err}')")
  endif()
endfunction()

check(0 "${WORK}/plugstack.conf.d/autopar.conf:2: autopar.so: OK (required, 2 arguments)\n" ""
      "${WORK}/good.conf")
check(1 "" "${WORK}/typo.conf:1: plugstack.conf: max_requeu: unknown argument (did you mean max_requeue?)\n${WORK}/typo.conf:1: plugstack.conf: ckpt_upload_schemes: unknown scheme 'ftp' (s3, file)\n"
      "${WORK}/typo.conf")
check(1 "" "autopar check-plugstack: ${WORK}/none.conf: no autopar.so line\n" "${WORK}/none.conf")
check(1 "" "autopar check-plugstack: ${WORK}/missing.conf: cannot be read\n" "${WORK}/missing.conf")
check(0 "--line:1: autopar.so: OK (optional, 0 arguments)\n" "" --line "optional ${PLUGIN}")
check(1 "" "--line:1: /nonexistent/autopar.so: cannot be read (required: every step on a node without it fails)\n"
      --line "required /nonexistent/autopar.so")
check(1 "" "autopar check-plugstack: --line:1: 'requird': expected required, optional or include\n"
      --line "requird ${PLUGIN}")
