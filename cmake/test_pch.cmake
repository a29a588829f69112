# Precompiled headers for the test executables (tests/CMakeLists.txt): GoogleTest/GoogleMock,
# the standard library and Abseil's status types are parsed once per build, not once per test
# source, and for the tests of the server (those that link pagedinfer_http or pagedinfer_server)
# also Boost.Beast/Asio and nlohmann::json. In a cold build these headers were most of each test
# object's compile time (a server test's object took 50-100 s of one core). Each executable
# reuses one of the two headers (REUSE_FROM), so its flags must match the owner's: the owners
# link what their users link for compile flags (pagedinfer_http's Boost defines included).
#
# GCC only: a GCC precompiled header whose flags do not match is skipped (the headers are parsed
# as usual), where clang stops with an error; the sanitizer build (clang, scripts/sanitize.sh)
# compiles without, and so does the aarch64 cross build (ten tests; not measured with it).
# PAGEDINFER_TEST_PCH=OFF turns it off.
#   pagedinfer_test_pch(target libs...)   after add_executable(target) with the libs it links
option(PAGEDINFER_TEST_PCH "Precompiled headers for the test executables (GCC)" ON)
set(pagedinfer_test_pch_on OFF)
if(PAGEDINFER_TEST_PCH AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND NOT CMAKE_CROSSCOMPILING
   AND NOT CMAKE_DISABLE_PRECOMPILE_HEADERS)
  set(pagedinfer_test_pch_on ON)
  set(pagedinfer_test_pch_headers <algorithm> <atomic> <cmath> <cstdint> <cstring> <filesystem>
    <fstream> <functional> <map> <memory> <mutex> <optional> <random> <regex> <set> <sstream>
    <string> <string_view> <thread> <utility> <vector> <gtest/gtest.h> <gmock/gmock.h>
    [["absl/status/status.h"]] [["absl/status/statusor.h"]] [["absl/strings/str_cat.h"]])
  # The owners compile one empty source each (CMake wants one); the headers are the work.
  set(pch_anchor ${CMAKE_CURRENT_BINARY_DIR}/test_pch_anchor.cc)
  file(CONFIGURE OUTPUT ${pch_anchor} CONTENT "// precompiled headers only (cmake/test_pch.cmake)\n")
  add_library(pagedinfer_test_pch OBJECT ${pch_anchor})
  target_link_libraries(pagedinfer_test_pch PRIVATE ${PAGEDINFER_ABSL} GTest::gtest GTest::gmock)
  target_include_directories(pagedinfer_test_pch PRIVATE ${CMAKE_SOURCE_DIR})
  target_precompile_headers(pagedinfer_test_pch PRIVATE ${pagedinfer_test_pch_headers})
  if(TARGET pagedinfer_http)
    add_library(pagedinfer_test_pch_server OBJECT ${pch_anchor})
    target_link_libraries(pagedinfer_test_pch_server PRIVATE pagedinfer_http ${PAGEDINFER_ABSL}
      nlohmann_json::nlohmann_json GTest::gtest GTest::gmock)
    target_include_directories(pagedinfer_test_pch_server PRIVATE ${CMAKE_SOURCE_DIR})
    target_precompile_headers(pagedinfer_test_pch_server PRIVATE ${pagedinfer_test_pch_headers}
      <boost/asio/connect.hpp> <boost/asio/io_context.hpp> <boost/asio/ip/tcp.hpp>
      <boost/asio/steady_timer.hpp> <boost/asio/strand.hpp> <boost/asio/thread_pool.hpp>
      <boost/beast/core.hpp> <boost/beast/http.hpp> [["nlohmann/json.hpp"]])
  endif()
endif()

# Compiled without: with the header, GCC 12 reports a false -Warray-bounds in
# jinja_unit_test.cc (std::string's inlined memcpy), which it does not without.
set(pagedinfer_test_pch_skip jinja_unit_test)

function(pagedinfer_test_pch target)
  if(NOT pagedinfer_test_pch_on OR target IN_LIST pagedinfer_test_pch_skip)
    return()
  endif()
  if(TARGET pagedinfer_test_pch_server AND "${ARGN}" MATCHES "pagedinfer_(http|server)")
    target_precompile_headers(${target} REUSE_FROM pagedinfer_test_pch_server)
  else()
    target_precompile_headers(${target} REUSE_FROM pagedinfer_test_pch)
  endif()
endfunction()
