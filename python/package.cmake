# The Python package's part of the build (pyproject.toml drives it through
# scikit-build-core): the shared libraries python/tessera loads, installed
# into the wheel's tessera/ folder beside the Python sources
# (wheel.packages). libtessera.so.0 is the C API the bindings call;
# libtessera_rt (and libtessera_dnnl when it is built) are what models
# compiled from Python link against: under their link name and their
# soname, since a wheel holds no symbolic links. `pip install .` builds the
# target tessera_python; with TS_PYTHON_PREBUILT=DIR (the tests) the
# libraries of that build tree are packaged as they are.
if(TS_PYTHON_PREBUILT)
  add_custom_target(tessera_python)
  if(NOT EXISTS ${TS_PYTHON_PREBUILT}/libtessera.so.0)
    message(FATAL_ERROR "TS_PYTHON_PREBUILT: ${TS_PYTHON_PREBUILT} holds no "
                        "libtessera.so.0 (build the tessera_lib target there)")
  endif()
  foreach(lib tessera tessera_rt tessera_dnnl)
    set(so ${TS_PYTHON_PREBUILT}/lib${lib}.so.0)
    if(NOT EXISTS ${so})
      continue()
    endif()
    file(REAL_PATH ${so} real)
    install(FILES ${real} DESTINATION tessera RENAME lib${lib}.so.0
            COMPONENT python)
    if(NOT lib STREQUAL "tessera")
      install(FILES ${real} DESTINATION tessera RENAME lib${lib}.so
              COMPONENT python)
    endif()
  endforeach()
elseif(SKBUILD)
  add_custom_target(tessera_python)
  add_dependencies(tessera_python tessera_lib tessera_rt)
  install(FILES $<TARGET_FILE:tessera_lib> DESTINATION tessera
          RENAME libtessera.so.0 COMPONENT python)
  foreach(lib tessera_rt tessera_dnnl)
    if(TARGET ${lib})
      add_dependencies(tessera_python ${lib})
      install(FILES $<TARGET_FILE:${lib}> DESTINATION tessera
              RENAME lib${lib}.so.0 COMPONENT python)
      install(FILES $<TARGET_FILE:${lib}> DESTINATION tessera
              RENAME lib${lib}.so COMPONENT python)
    endif()
  endforeach()
endif()
