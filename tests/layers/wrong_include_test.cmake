# Shows that cmake/check_layers.cmake fails the build on a wrong include: copies the library
# folders, checks the copy passes, then adds one upward include per case and expects the
# checker to fail naming it. Run by CTest (layers_check_test).
set(cases
  "engine/scheduler.cc|engine/eval/perplexity.h"
  "kvcache/kv_cache.cc|engine/model/model.h"
  "loaders/gguf_reader.cc|kvcache/kv_dtype.h"
  "engine/cpu/ops.cc|engine/engine.h"
  "server/metrics.cc|engine/cpu/cpu_backend.h")
file(REMOVE_RECURSE "${WORK}")
foreach(dir loaders kvcache engine cuda server)
  file(COPY "${ROOT}/${dir}" DESTINATION "${WORK}/tree")
endforeach()
execute_process(COMMAND ${CMAKE_COMMAND} -DROOT=${WORK}/tree -P ${CHECKER}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the unchanged tree fails the layering check:\n${err}")
endif()
foreach(case ${cases})
  string(REPLACE "|" ";" parts "${case}")
  list(GET parts 0 file)
  list(GET parts 1 inc)
  file(READ "${WORK}/tree/${file}" original)
  file(WRITE "${WORK}/tree/${file}" "#include \"${inc}\"\n${original}")
  execute_process(COMMAND ${CMAKE_COMMAND} -DROOT=${WORK}/tree -P ${CHECKER}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  file(WRITE "${WORK}/tree/${file}" "${original}")
  if(rc EQUAL 0)
    message(FATAL_ERROR "the checker passed ${file} including ${inc}")
  endif()
  string(FIND "${err}" "${file}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "the checker failed without naming ${file}:\n${err}")
  endif()
  message(STATUS "refused as it should be: ${file} including ${inc}")
endforeach()
