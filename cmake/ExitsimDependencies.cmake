# Every dependency comes from a Debian 12 package; scripts/install-deps installs the missing ones.
function(exitsim_require_package name debian_package)
  find_package(${name} ${ARGN} QUIET)
  if(NOT ${name}_FOUND)
    message(FATAL_ERROR "exitsim: dependency ${name} not found; install the Debian package "
                        "'${debian_package}' (run scripts/install-deps as root)")
  endif()
endfunction()

exitsim_require_package(Eigen3 libeigen3-dev 3.3 NO_MODULE)
exitsim_require_package(Boost libboost-graph-dev 1.74 CONFIG COMPONENTS graph)
exitsim_require_package(yaml-cpp libyaml-cpp-dev)
exitsim_require_package(nlohmann_json nlohmann-json3-dev 3.10)
exitsim_require_package(CLI11 libcli11-dev CONFIG)
exitsim_require_package(fmt libfmt-dev)
# The BPE tokenizer's pre-tokenizer patterns use Unicode classes (\p{L}, \p{N}): ICU's regex.
exitsim_require_package(ICU libicu-dev 70 COMPONENTS uc i18n)
# Sweep results: one row per run, written atomically, so interrupted sweeps resume.
exitsim_require_package(SQLite3 libsqlite3-dev)
# The CPU engine spreads rows over the cores; GCC's libgomp comes with the compiler.
exitsim_require_package(OpenMP libgomp1)
# Sweeps run points on worker threads.
find_package(Threads REQUIRED)
if(EXITSIM_BUILD_TESTS)
  exitsim_require_package(GTest libgtest-dev)
endif()
if(EXITSIM_BUILD_BENCH)
  exitsim_require_package(benchmark libbenchmark-dev)
endif()

# yaml-cpp 0.7 on Debian exports the plain target name only.
if(TARGET yaml-cpp AND NOT TARGET yaml-cpp::yaml-cpp)
  add_library(yaml-cpp::yaml-cpp ALIAS yaml-cpp)
endif()
