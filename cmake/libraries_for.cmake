# pagedinfer_libraries_for(src out): the libraries a test or example program needs, one per
# part of the tree its source includes, so that each links only what it uses.
function(pagedinfer_libraries_for src out)
  set(map
    "loaders/" pagedinfer_loaders "kvcache/" pagedinfer_kvcache
    "engine/model/" pagedinfer_model "engine/memory/" pagedinfer_memory
    "engine/backend.h" pagedinfer_backend "engine/cpu/" pagedinfer_cpu
    "engine/grammar/" pagedinfer_grammar
    "engine/synth/" pagedinfer_synth "engine/convert/" pagedinfer_convert
    "engine/eval/" pagedinfer_eval "server/jinja/" pagedinfer_jinja "server/http/" pagedinfer_http "server/" pagedinfer_server "bench/" pagedinfer_bench
    "tests/testing/test_models.h" pagedinfer_testing_paths
    "tests/testing/engine_helpers.h" pagedinfer_testing_engine
    "tests/testing/hf_folders.h" pagedinfer_testing_hf
    "tests/testing/reference_forward.h" pagedinfer_testing_reference
    "tests/testing/synth_models.h" pagedinfer_testing_synth
    "tests/testing/cli_process.h" pagedinfer_testing_cli
    "tests/testing/memory_limits.h" pagedinfer_testing_limits
    "tests/testing/serve_process.h" pagedinfer_testing_serve
    "tests/testing/json_schema_check.h" pagedinfer_testing_json
    "tests/testing/grammar_testing.h" pagedinfer_testing_grammar
    "tests/testing/test_tokenizers.h" pagedinfer_testing_tokenizers
    "tests/testing/prometheus_text.h" pagedinfer_testing_prometheus)
  file(STRINGS ${src} incs REGEX "^#include \"")
  set(libs)
  foreach(line ${incs})
    string(REGEX REPLACE "^#include \"([^\"]+)\".*" "\\1" inc "${line}")
    if(inc MATCHES "^engine/[a-z_]+\\.h$" AND NOT inc STREQUAL "engine/backend.h")
      list(APPEND libs pagedinfer_engine)  # the serving core at engine/'s root
      continue()
    endif()
    if(inc MATCHES "^bench/serve/")
      list(APPEND libs pagedinfer_bench_serve)  # bench-serve's client, without the engine
      continue()
    endif()
    set(i 0)
    list(LENGTH map n)
    while(i LESS n)
      list(GET map ${i} prefix)
      math(EXPR j "${i} + 1")
      list(GET map ${j} lib)
      string(FIND "${inc}" "${prefix}" at)
      if(at EQUAL 0)
        list(APPEND libs ${lib})
        break()  # the first (most specific) prefix: server/http/ or server/jinja/ before server/
      endif()
      math(EXPR i "${i} + 2")
    endwhile()
  endforeach()
  list(REMOVE_DUPLICATES libs)
  set(${out} ${libs} PARENT_SCOPE)
endfunction()

