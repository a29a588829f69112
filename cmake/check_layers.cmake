# Checks that every #include "folder/..." in the library folders points down the layers of
# ../shared/DESIGN.md. Run as `cmake -DROOT=<source tree> -P check_layers.cmake`; fails (and
# so fails the build) naming each file, line and include that breaks a rule.
#
# A file's part is its folder (engine/model, kvcache, ...), except engine/backend.{h,cc}: the
# backend interface, a part of its own below the CPU backend and the serving core. A part
# may include itself and the parts listed for it, nothing else of this tree; includes of
# other libraries (absl/, nlohmann/, <...>) are not checked.
cmake_minimum_required(VERSION 3.24)
if(NOT ROOT)
  message(FATAL_ERROR "check_layers.cmake: pass -DROOT=<source tree>")
endif()

set(low loaders kvcache)
set(allowed_loaders "")
set(allowed_kvcache loaders)
set(allowed_engine/model ${low})
set(allowed_engine/memory engine/model ${low})
set(allowed_engine/backend ${low})
set(allowed_engine/cpu engine/backend engine/memory engine/model ${low})
set(allowed_engine/grammar "")
set(allowed_engine engine/backend engine/cpu engine/memory engine/model engine/grammar ${low})
set(allowed_engine/synth engine/model ${low})
set(allowed_engine/convert engine/cpu engine/model ${low})
set(allowed_engine/eval engine/convert engine/cpu engine/backend engine/model ${low})
set(allowed_cuda engine engine/backend engine/cpu engine/memory engine/model ${low})
set(allowed_server/jinja "")
set(allowed_server/http "")
set(allowed_server server/http engine engine/backend engine/memory engine/model engine/grammar
  server/jinja ${low})
set(parts loaders kvcache engine/model engine/memory engine/backend engine/cpu engine/grammar engine
  engine/synth engine/convert engine/eval cuda server/http server server/jinja)
# Top-level folders whose includes are checked when they appear in an include path.
set(tree_roots loaders kvcache engine cuda server bench examples tests)

function(part_of path out)
  if(path MATCHES "^engine/backend\\.(h|cc)$")
    set(${out} engine/backend PARENT_SCOPE)
  else()
    get_filename_component(dir "${path}" DIRECTORY)
    set(${out} "${dir}" PARENT_SCOPE)
  endif()
endfunction()

set(errors 0)
foreach(part ${parts})
  if(part STREQUAL "engine/backend")
    continue()
  endif()
  file(GLOB files RELATIVE "${ROOT}" "${ROOT}/${part}/*.h" "${ROOT}/${part}/*.cc"
    "${ROOT}/${part}/*.cu" "${ROOT}/${part}/*.cuh")
  foreach(f ${files})
    part_of("${f}" from)
    file(STRINGS "${ROOT}/${f}" lines REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
    foreach(line ${lines})
      string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\".*" "\\1" inc "${line}")
      string(REGEX MATCH "^[^/]+" root "${inc}")
      if(NOT root IN_LIST tree_roots OR NOT inc MATCHES "/")
        continue()
      endif()
      part_of("${inc}" to)
      if(to STREQUAL from OR to IN_LIST allowed_${from})
        continue()
      endif()
      message(SEND_ERROR "layering: ${f} (${from}) includes \"${inc}\" (${to}); "
        "${from} may include only: ${from} ${allowed_${from}}. Move the code to the lower "
        "part, or pass what it needs in through an interface (see cmake/check_layers.cmake).")
      math(EXPR errors "${errors} + 1")
    endforeach()
  endforeach()
endforeach()
if(errors GREATER 0)
  message(FATAL_ERROR "layering: ${errors} include(s) break the layers")
endif()
