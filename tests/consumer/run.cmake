# Installs the kembed build into a scratch prefix, then configures, builds and runs
# the consumer project against that install tree alone.
file(REMOVE_RECURSE "${WORK}")
function(step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  message(STATUS "${out}")
endfunction()
step(${CMAKE_COMMAND} --install "${KEMBED_BUILD}" --prefix "${WORK}/prefix")
step(${CMAKE_COMMAND} -S "${SOURCE}" -B "${WORK}/build" -DCMAKE_PREFIX_PATH=${WORK}/prefix -DCMAKE_BUILD_TYPE=Release)
step(${CMAKE_COMMAND} --build "${WORK}/build")
step("${WORK}/build/consumer")
