# cmake -DSED=sed -DIN=x.cu -DOUT=x.cc -P rewrite_launches.cmake: a kernel source with its
# launches rewritten for the host emulator (launch.sed), line numbers kept.
execute_process(COMMAND ${SED} -E -f ${CMAKE_CURRENT_LIST_DIR}/launch.sed ${IN}
                OUTPUT_VARIABLE text RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "rewriting the launches of ${IN} failed (${rc})")
endif()
string(REGEX REPLACE "\n[ \t]*//[^\n]*" "" code "${text}")  # comments may say <<<
if(code MATCHES "<<<")
  message(FATAL_ERROR "${IN}: a kernel launch the emulator cannot rewrite; keep "
                      "`kernel<<<...>>>(` on one line")
endif()
file(WRITE ${OUT} "#line 1 \"${IN}\"\n${text}")
