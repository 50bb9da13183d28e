# NCCL and the CUDA runtime for the NCCL parts (libautopar's communicator, autopar-nccl-check and
# the GPU test): a CUDA toolkit's (CUDAToolkit, /usr/local/cuda) or the NVIDIA wheels in the
# Python environment (scripts/install-deps.sh: PyPI's torch brings nvidia-nccl-cu13 and the CUDA
# runtime, headers included). Sets AUTOPAR_HAVE_NCCL and NCCL_LIBRARY, and defines autopar::nccl
# and autopar::cudart (imported, with their headers). libautopar takes only the headers and loads
# NCCL when first asked for a communicator (launcher/nccl/nccl_library.h); the two GPU programs
# link both, with a run path to them when they come from the wheels (outside the loader's search).
set(AUTOPAR_HAVE_NCCL OFF)
if(AUTOPAR_WITH_CUDA)
  find_package(CUDAToolkit QUIET)
  file(GLOB _autopar_wheels LIST_DIRECTORIES true "${AUTOPAR_VENV}/lib/python3*/site-packages/nvidia/*")
  set(_inc_hints ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include)
  set(_lib_hints ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64)
  foreach(_wheel IN LISTS _autopar_wheels)
    list(APPEND _inc_hints "${_wheel}/include")
    list(APPEND _lib_hints "${_wheel}/lib")
  endforeach()
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${_inc_hints})
  find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS ${_lib_hints})
  find_path(CUDART_INCLUDE_DIR cuda_runtime.h HINTS ${_inc_hints})
  find_library(CUDART_LIBRARY NAMES cudart libcudart.so.13 libcudart.so.12 HINTS ${_lib_hints})
  if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY AND CUDART_INCLUDE_DIR AND CUDART_LIBRARY)
    set(AUTOPAR_HAVE_NCCL ON)
    add_library(autopar::cudart SHARED IMPORTED)
    set_target_properties(autopar::cudart PROPERTIES IMPORTED_LOCATION "${CUDART_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${CUDART_INCLUDE_DIR}")
    add_library(autopar::nccl SHARED IMPORTED)
    set_target_properties(autopar::nccl PROPERTIES IMPORTED_LOCATION "${NCCL_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}" INTERFACE_LINK_LIBRARIES autopar::cudart)
    # A program linking them: the directories to find them in at run time where the loader would
    # not (the wheels), installed too.
    set(AUTOPAR_NCCL_RPATH "")
    foreach(_lib IN ITEMS "${NCCL_LIBRARY}" "${CUDART_LIBRARY}")
      get_filename_component(_dir "${_lib}" DIRECTORY)
      if(NOT _dir MATCHES "^/usr/(lib|local/cuda)")
        list(APPEND AUTOPAR_NCCL_RPATH "${_dir}")
      endif()
    endforeach()
    message(STATUS "autopar: NCCL found: ${NCCL_LIBRARY} (CUDA runtime ${CUDART_LIBRARY})")
  else()
    message(STATUS "autopar: CUDA/NCCL not found; NCCL parts are not built")
  endif()
endif()
