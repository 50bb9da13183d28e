# ctest: a model that fits no layout is refused with one line that says how much memory per GPU
# the smallest layout needs and what would make it fit; exit status 1.
execute_process(
  COMMAND ${AUTOPAR} plan --model llama-3-405b --gpus 8 --gpu-type a100-80gb --global-batch 64
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 1)
  message(FATAL_ERROR "exit ${rc}, expected 1 (stderr: ${err})")
endif()
if(NOT err MATCHES "^autopar plan: llama-3-405b \\(405\\.[0-9]B parameters\\) does not fit on 8 x a100-80gb: the smallest layout \\(.*\\) needs [0-9.]+ GiB per GPU, 73\\.6 GiB usable; it plans with [0-9]+ GPUs \\([0-9]+ nodes of 8\\)")
  message(FATAL_ERROR "unexpected message: ${err}")
endif()
