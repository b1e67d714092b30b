# EXITSIM_CUDA=AUTO builds the CUDA targets whenever nvcc is found, even on a machine without a GPU,
# so that CI catches CUDA compile errors; ON makes a missing toolkit an error; OFF skips them.
set(EXITSIM_HAVE_CUDA OFF)
if(NOT EXITSIM_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    # Set before enable_language(CUDA), which otherwise fills in nvcc's own default (sm_75 on
    # CUDA 13) and leaves Hopper to slow JIT compilation. Ampere (A100) and Hopper (H100/H200)
    # are the accelerators exitsim profiles.
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 80 90)
    endif()
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(EXITSIM_HAVE_CUDA ON)
    # CMake 3.25 knows no C++20 flag for nvcc; nvcc 12+ accepts -std=c++20.
    if(CMAKE_CUDA_COMPILER_ID STREQUAL "NVIDIA" AND CMAKE_CUDA_COMPILER_VERSION VERSION_GREATER_EQUAL 12.0)
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    endif()
    set(CMAKE_CUDA_STANDARD 20)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  elseif(EXITSIM_CUDA STREQUAL "ON")
    message(FATAL_ERROR "exitsim: EXITSIM_CUDA=ON but no CUDA compiler (nvcc) was found; "
                        "install the CUDA toolkit or configure with -DEXITSIM_CUDA=AUTO")
  endif()
endif()
message(STATUS "exitsim: CUDA targets ${EXITSIM_HAVE_CUDA} (EXITSIM_CUDA=${EXITSIM_CUDA})")
