# One place for compile flags shared by every exitsim target.
add_library(exitsim_build_flags INTERFACE)
target_compile_options(exitsim_build_flags INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wsign-conversion
    -Wnon-virtual-dtor -Wold-style-cast -Woverloaded-virtual>)
# GCC 12 at -O2 reports these inside libstdc++'s own std::string and std::vector code on correct
# programs (GCC bugs 105329, 105651, 108088); they are false positives there, not in our code.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_GREATER_EQUAL 12
   AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  target_compile_options(exitsim_build_flags INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-Wno-restrict -Wno-free-nonheap-object>)
endif()
if(EXITSIM_WERROR)
  target_compile_options(exitsim_build_flags INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Werror>)
endif()
if(EXITSIM_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "EXITSIM_FUZZ needs clang (libFuzzer): use the fuzz preset")
  endif()
  # Coverage for libFuzzer in every exitsim library; the harnesses link its driver.
  target_compile_options(exitsim_build_flags INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=fuzzer-no-link>)
  set(EXITSIM_SANITIZE ON)
endif()
if(EXITSIM_SANITIZE)
  target_compile_options(exitsim_build_flags INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all>)
  target_link_options(exitsim_build_flags INTERFACE -fsanitize=address,undefined)
endif()

# exitsim_add_library(name SOURCES ...) : a part of exitsim with public headers under include/.
function(exitsim_add_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;PUBLIC_DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include
                                     PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src)
  target_link_libraries(${name} PUBLIC ${ARG_PUBLIC_DEPS} PRIVATE exitsim_build_flags ${ARG_PRIVATE_DEPS})
endfunction()
