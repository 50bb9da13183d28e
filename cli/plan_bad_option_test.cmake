# ctest: bad input to `autopar plan` gives one line naming the option and exit status 2.
set(cases
  "--gpus;0|autopar plan: --gpus: invalid value '0'"
  "--gpus;many|autopar plan: --gpus: invalid value 'many'"
  "--gpu-type;v99|autopar plan: --gpu-type: unknown GPU type 'v99'"
  "--model;banana|autopar plan: --model: unknown model 'banana'"
  "--frobnicate;1|autopar plan: --frobnicate: unknown option"
  "--tp;3|autopar plan: --tp 3: tp=3 does not divide the attention heads (32)")
foreach(case IN LISTS cases)
  string(REPLACE "|" ";" parts "${case}")
  list(GET parts -1 expected)
  list(REMOVE_AT parts -1)
  # Defaults, with the case's option last (program_options keeps the last value of a repeat is
  # an error, so replace the default instead).
  set(args --model llama-2-7b --gpus 8 --gpu-type a100-80gb --global-batch 64)
  list(GET parts 0 opt)
  list(FIND args "${opt}" idx)
  if(idx GREATER -1)
    math(EXPR vidx "${idx} + 1")
    list(REMOVE_AT args ${vidx})
    list(REMOVE_AT args ${idx})
  endif()
  list(APPEND args ${parts})
  execute_process(COMMAND ${AUTOPAR} plan ${args}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 2)
    message(FATAL_ERROR "${args}: exit ${rc}, expected 2 (stderr: ${err})")
  endif()
  string(FIND "${err}" "${expected}" pos)
  if(NOT pos EQUAL 0)
    message(FATAL_ERROR "${args}: stderr '${err}' does not start with '${expected}'")
  endif()
  string(REGEX MATCHALL "\n" newlines "${err}")
  list(LENGTH newlines lines)
  if(NOT lines EQUAL 1)
    message(FATAL_ERROR "${args}: expected one line, got: ${err}")
  endif()
endforeach()
