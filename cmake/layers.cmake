# The layering check: runs on every build (target pagedinfer_layers, part of ALL), and a test
# shows it fails on a tree with a deliberately wrong include.
add_custom_target(pagedinfer_layers ALL
  COMMAND ${CMAKE_COMMAND} -DROOT=${CMAKE_SOURCE_DIR} -P ${CMAKE_SOURCE_DIR}/cmake/check_layers.cmake
  COMMENT "Checking the include layers (cmake/check_layers.cmake)" VERBATIM)
