# ctest: bad input to `autopar plan` gives one line naming the option and exit status 2.
set(base --model llama-2-7b --gpus 8 --gpu-type a100-80gb --global-batch 64)

function(expect_usage_error expected)
  # ARGN: the options that replace (or add to) the base command line.
  set(args ${base})
  set(extra ${ARGN})
  list(GET extra 0 opt)
  list(FIND args "${opt}" idx)
  if(idx GREATER -1)
    math(EXPR vidx "${idx} + 1")
    list(REMOVE_AT args ${vidx} ${idx})
  endif()
  list(APPEND args ${extra})
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
endfunction()

expect_usage_error("autopar plan: --gpus: invalid value '0'" --gpus 0)
expect_usage_error("autopar plan: --gpus: invalid value 'many'" --gpus many)
expect_usage_error("autopar plan: --global-batch: invalid value '-4'" --global-batch -4)
expect_usage_error("autopar plan: --gpu-type: unknown GPU type 'v99'" --gpu-type v99)
expect_usage_error("autopar plan: --model: unknown model 'banana'" --model banana)
expect_usage_error("autopar plan: --frobnicate: unknown option" --frobnicate 1)
expect_usage_error("autopar plan: --tp 3: tp=3 does not divide the attention heads (32)" --tp 3)
expect_usage_error("autopar plan: --net-gbps: invalid value 'fast'" --net-gbps fast)
expect_usage_error("autopar plan: --headroom: invalid value '1.5'" --headroom 1.5)
expect_usage_error(
  "autopar plan: --headroom: invalid value '0.6' (expected a fraction of the GPU's memory in [0, 0.5])"
  --headroom 0.6)

# A missing required option.
execute_process(COMMAND ${AUTOPAR} plan --model llama-2-7b --gpu-type a100-80gb --global-batch 64
  RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 2 OR NOT err STREQUAL "autopar plan: --gpus: required\n")
  message(FATAL_ERROR "missing --gpus: exit ${rc}, stderr '${err}'")
endif()

# A malformed model file: one line naming the file, where and what is wrong.
set(bad_model "${CMAKE_CURRENT_BINARY_DIR}/autopar_plan_bad_model.json")
file(WRITE "${bad_model}" "{\"layers\": 2, \"hidden\": 64, \"heads\": 4 \"vocab\": 10}")
expect_usage_error(
  "autopar plan: --model: model file ${bad_model}: line 1, column 40: Missing ',' or '}'"
  --model "${bad_model}")
file(REMOVE "${bad_model}")
expect_usage_error("autopar plan: --tp-comm-overlap: invalid value 'maybe' (on, off)"
  --tp-comm-overlap maybe)
expect_usage_error("autopar plan: --grad-sharding: invalid value 'maybe' (on, off)"
  --grad-sharding maybe)
# ZeRO-2 pinned where it cannot be planned: the pin and why.
expect_usage_error(
  "autopar plan: --pp 2 --grad-sharding on: ZeRO-2 is planned without pipeline parallelism (pp=2; DeepSpeed's pipeline engine refuses ZeRO stage 2)"
  --pp 2 --grad-sharding on)
