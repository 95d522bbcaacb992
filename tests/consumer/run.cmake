# Installs the kembed build into a scratch prefix, then configures, builds and runs
# the consumer project against that install tree alone.
file(REMOVE_RECURSE "${WORK}")
function(step)
  file(MAKE_DIRECTORY "${WORK}")
  execute_process(COMMAND ${ARGN} WORKING_DIRECTORY "${WORK}" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  message(STATUS "${out}")
endfunction()
step(${CMAKE_COMMAND} --install "${KEMBED_BUILD}" --prefix "${WORK}/prefix")
# The consumer compiles as kembed was (a sanitizer build's libraries need its runtime).
step(${CMAKE_COMMAND} -S "${SOURCE}" -B "${WORK}/build" -DCMAKE_PREFIX_PATH=${WORK}/prefix -DCMAKE_BUILD_TYPE=Release
     "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}" "-DCMAKE_EXE_LINKER_FLAGS=${LINKER_FLAGS}")
step(${CMAKE_COMMAND} --build "${WORK}/build")
step("${WORK}/build/consumer")
