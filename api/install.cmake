# Install rules of the libraries (included by api/CMakeLists.txt): libwharf.so (C ABI),
# libwharf++.so (C++ API), libwharf.a (both, static), the headers, relocatable pkg-config files
# (wharf.pc, wharf++.pc) and the CMake package (find_package(wharf CONFIG): wharf::wharf,
# wharf::wharf++). The CLI installs itself (tools/CMakeLists.txt), the Python module below.
# Libraries go to the multiarch directory where the system has one (Debian: lib/x86_64-linux-gnu,
# for every prefix: /usr's is where Debian packages put libraries, /usr/local's is on the dynamic
# linker's and pkg-config's default paths too), as the Debian packages (packaging/cpack.cmake) must;
# GNUInstallDirs alone chooses it for /usr only, at configure time, while the packages and
# `cmake --install --prefix` choose the prefix later. -DCMAKE_INSTALL_LIBDIR=lib overrides it.
if(NOT DEFINED CMAKE_INSTALL_LIBDIR AND CMAKE_LIBRARY_ARCHITECTURE AND EXISTS /etc/debian_version)
  set(CMAKE_INSTALL_LIBDIR "lib/${CMAKE_LIBRARY_ARCHITECTURE}" CACHE PATH
    "Object code libraries (lib/<multiarch> on Debian)")
endif()
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# Components are the Debian packages (packaging/cpack.cmake): libwharf0 (the shared libraries),
# libwharf-dev (headers, static archive, link names, pkg-config, CMake), wharf (the CLI),
# python3-wharf (the module).
install(TARGETS wharf wharfxx wharf_static
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT libwharf0 NAMELINK_COMPONENT libwharf-dev
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT libwharf-dev)
# The static archive holds the C ABI and the C++ API: -lwharf++ finds it too when linking statically.
install(CODE "file(CREATE_LINK libwharf.a
  \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/libwharf++.a\" SYMBOLIC)"
  COMPONENT libwharf-dev)
install(FILES include/wharf.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT libwharf-dev)
install(DIRECTORY include/wharf DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT libwharf-dev)

# What a static link needs besides the archive (Libs.private; libwharf-dev depends on their -dev
# packages): packaging/link_deps.cmake.
include(${CMAKE_SOURCE_DIR}/packaging/link_deps.cmake)
set(WHARF_PC_LIBS_PRIVATE "${WHARF_LINK_LIBS}")

file(RELATIVE_PATH WHARF_PC_PREFIX "${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig"
  "${CMAKE_INSTALL_PREFIX}")
string(REGEX REPLACE "/$" "" WHARF_PC_PREFIX "${WHARF_PC_PREFIX}")
# Each .pc comes in two variants; the install picks one by the prefix it installs to (known only
# then: `cmake --install --prefix P`, the packages' /usr). Outside /usr and /usr/local, whose
# libraries the dynamic linker finds (after ldconfig), Libs carries -Wl,-rpath,${libdir}, so a
# program linked through pkg-config runs without LD_LIBRARY_PATH. wharf++.pc sets no -std: the
# headers require C++20 (#error below it) and a C++23 program stays C++23.
set(WHARF_PC_DIR ${CMAKE_CURRENT_BINARY_DIR}/pkgconfig)
foreach(flavor IN ITEMS "" "++")
  if(flavor STREQUAL "")
    set(WHARF_PC_DESCRIPTION "Embedded transactional-outbox engine on RocksDB (C ABI: wharf.h)")
  else()
    set(WHARF_PC_DESCRIPTION
      "Embedded transactional-outbox engine on RocksDB (C++20 API: wharf/*.h; needs -std=c++20 or later)")
  endif()
  foreach(variant IN ITEMS system rpath)
    if(variant STREQUAL "rpath")
      set(WHARF_PC_RPATH " -Wl,-rpath,\${libdir}")
    else()
      set(WHARF_PC_RPATH "")
    endif()
    file(CONFIGURE OUTPUT ${WHARF_PC_DIR}/${variant}/wharf${flavor}.pc @ONLY CONTENT "\
prefix=\${pcfiledir}/@WHARF_PC_PREFIX@
exec_prefix=\${prefix}
libdir=\${prefix}/@CMAKE_INSTALL_LIBDIR@
includedir=\${prefix}/@CMAKE_INSTALL_INCLUDEDIR@
# Linking statically: \${archive} (the C ABI and the C++ API), then \${archive_libs}.
archive=\${libdir}/libwharf.a
archive_libs=@WHARF_PC_LIBS_PRIVATE@

Name: wharf@flavor@
Description: @WHARF_PC_DESCRIPTION@
URL: https://github.com/wharf/wharf
Version: @PROJECT_VERSION@
Libs: -L\${libdir}@WHARF_PC_RPATH@ -lwharf@flavor@
Libs.private: \${archive_libs}
Cflags: -I\${includedir}
")
  endforeach()
endforeach()
install(CODE "
  if(CMAKE_INSTALL_PREFIX MATCHES \"^/usr(/local)?/*$\")
    set(_wharf_pc_variant system)
  else()
    set(_wharf_pc_variant rpath)
  endif()
  file(INSTALL DESTINATION \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig\" TYPE FILE
    FILES \"${WHARF_PC_DIR}/\${_wharf_pc_variant}/wharf.pc\"
          \"${WHARF_PC_DIR}/\${_wharf_pc_variant}/wharf++.pc\")"
  COMPONENT libwharf-dev)

# The CMake package, relocatable like the pkg-config files: paths relative to its own directory.
set(WHARF_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/wharf)
file(RELATIVE_PATH WHARF_CMAKE_PREFIX "${CMAKE_INSTALL_PREFIX}/${WHARF_CMAKE_DIR}"
  "${CMAKE_INSTALL_PREFIX}")
configure_file(${CMAKE_CURRENT_SOURCE_DIR}/wharfConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/wharfConfig.cmake @ONLY)
# 0.x: a new minor version may change the API.
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/wharfConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/wharfConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/wharfConfigVersion.cmake DESTINATION ${WHARF_CMAKE_DIR}
  COMPONENT libwharf-dev)

# The Python package (ctypes over libwharf.so; no compiled extension, py.typed included), where
# Debian's python3 looks for packages under the prefix the install goes to (chosen then, like the
# .pc files): lib/python3/dist-packages for /usr, lib/python3.X/dist-packages (X: the system
# python3's minor version) for any other prefix, as for /usr/local, whose lib/python3/ it does not
# search. `pip install api/python` is the other way to get it (api/python/pyproject.toml).
set(WHARF_PYTHON_DIR "" CACHE STRING "Where `cmake --install` puts the Python package (relative \
to the prefix, or absolute); empty: where Debian's python3 looks under the prefix")
if(WHARF_PYTHON_DIR STREQUAL "lib/python3/dist-packages")  # the former default, cached: now ""
  set_property(CACHE WHARF_PYTHON_DIR PROPERTY VALUE "")
  set(WHARF_PYTHON_DIR "")
endif()
find_program(WHARF_SYSTEM_PYTHON3 python3 PATHS /usr/bin NO_DEFAULT_PATH)
find_program(WHARF_SYSTEM_PYTHON3 python3)
set(WHARF_PYTHON_VERSION 3)
if(WHARF_SYSTEM_PYTHON3)
  execute_process(COMMAND ${WHARF_SYSTEM_PYTHON3} -c
    "import sys; print('%d.%d' % sys.version_info[:2])"
    OUTPUT_VARIABLE WHARF_PYTHON_VERSION OUTPUT_STRIP_TRAILING_WHITESPACE)
endif()
# wharf/_installed.py tells the package where the library is, relative to the package directory
# (so the prefix stays relocatable: DESTDIR, cpack, --prefix): it loads that library first. Both
# default directories are at the same depth below the prefix, so one relative path serves both.
if(IS_ABSOLUTE "${WHARF_PYTHON_DIR}")
  set(WHARF_PYTHON_PACKAGE_DIR "${WHARF_PYTHON_DIR}/wharf")
elseif(WHARF_PYTHON_DIR)
  set(WHARF_PYTHON_PACKAGE_DIR "${CMAKE_INSTALL_PREFIX}/${WHARF_PYTHON_DIR}/wharf")
else()
  set(WHARF_PYTHON_PACKAGE_DIR "${CMAKE_INSTALL_PREFIX}/lib/python3/dist-packages/wharf")
endif()
file(RELATIVE_PATH WHARF_PYTHON_LIBRARY "${WHARF_PYTHON_PACKAGE_DIR}"
  "${CMAKE_INSTALL_FULL_LIBDIR}/libwharf.so.${PROJECT_VERSION_MAJOR}")
file(CONFIGURE OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/python/_installed.py @ONLY CONTENT "\
\"\"\"Written by `cmake --install` (api/install.cmake): where it installed libwharf.\"\"\"

# Relative to this package's directory.
LIBRARY = \"@WHARF_PYTHON_LIBRARY@\"
")
install(CODE "
  set(_wharf_python_dir \"${WHARF_PYTHON_DIR}\")
  if(NOT _wharf_python_dir AND CMAKE_INSTALL_PREFIX MATCHES \"^/usr/*$\")
    set(_wharf_python_dir lib/python3/dist-packages)
  elseif(NOT _wharf_python_dir)
    set(_wharf_python_dir lib/python${WHARF_PYTHON_VERSION}/dist-packages)
  endif()
  if(NOT IS_ABSOLUTE \"\${_wharf_python_dir}\")
    set(_wharf_python_dir \"\${CMAKE_INSTALL_PREFIX}/\${_wharf_python_dir}\")
  endif()
  file(INSTALL DESTINATION \"\${_wharf_python_dir}\" TYPE DIRECTORY
    FILES \"${CMAKE_CURRENT_SOURCE_DIR}/python/wharf\" PATTERN __pycache__ EXCLUDE)
  file(INSTALL DESTINATION \"\${_wharf_python_dir}/wharf\" TYPE FILE
    FILES \"${CMAKE_CURRENT_BINARY_DIR}/python/_installed.py\")"
  COMPONENT python3-wharf)
