# Install rules of the libraries (included by api/CMakeLists.txt): libwharf.so (C ABI),
# libwharf++.so (C++ API), libwharf.a (both, static), the headers, relocatable pkg-config files
# (wharf.pc, wharf++.pc) and the CMake package (find_package(wharf CONFIG): wharf::wharf,
# wharf::wharf++). The CLI installs itself (tools/CMakeLists.txt), the Python module below.
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

# What a static link needs besides the archive: the libraries the engine uses, with what Debian's
# static librocksdb.a needs (its CMake package lists them; its rocksdb.pc does not).
set(WHARF_PC_LIBS_PRIVATE "-lrocksdb -lgflags -lsnappy -lz -lbz2 -llz4 -lzstd -luring -lxxhash \
-lfyaml -lsimdjson -lcpp-httplib -lhiredis -lnats -lstdc++ -lpthread -lm")

file(RELATIVE_PATH WHARF_PC_PREFIX "${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig"
  "${CMAKE_INSTALL_PREFIX}")
string(REGEX REPLACE "/$" "" WHARF_PC_PREFIX "${WHARF_PC_PREFIX}")
foreach(flavor IN ITEMS "" "++")
  if(flavor STREQUAL "")
    set(WHARF_PC_DESCRIPTION "Embedded transactional-outbox engine on RocksDB (C ABI: wharf.h)")
    set(WHARF_PC_CFLAGS "-I\${includedir}")
  else()
    set(WHARF_PC_DESCRIPTION "Embedded transactional-outbox engine on RocksDB (C++20 API: wharf/*.h)")
    set(WHARF_PC_CFLAGS "-I\${includedir} -std=c++20")
  endif()
  file(CONFIGURE OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/wharf${flavor}.pc @ONLY CONTENT "\
prefix=\${pcfiledir}/@WHARF_PC_PREFIX@
exec_prefix=\${prefix}
libdir=\${prefix}/@CMAKE_INSTALL_LIBDIR@
includedir=\${prefix}/@CMAKE_INSTALL_INCLUDEDIR@

Name: wharf@flavor@
Description: @WHARF_PC_DESCRIPTION@
URL: https://github.com/wharf/wharf
Version: @PROJECT_VERSION@
Libs: -L\${libdir} -lwharf@flavor@
Libs.private: @WHARF_PC_LIBS_PRIVATE@
Cflags: @WHARF_PC_CFLAGS@
")
  install(FILES ${CMAKE_CURRENT_BINARY_DIR}/wharf${flavor}.pc
    DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT libwharf-dev)
endforeach()

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
# Debian's python3 looks for packages under the prefix (/usr/lib/python3/dist-packages for /usr).
# `pip install api/python` is the other way to get it (api/python/pyproject.toml).
set(WHARF_PYTHON_DIR lib/python3/dist-packages CACHE STRING
  "Where `cmake --install` puts the Python package (relative to the prefix)")
install(DIRECTORY python/wharf DESTINATION ${WHARF_PYTHON_DIR} COMPONENT python3-wharf
  PATTERN __pycache__ EXCLUDE)
# wharf/_installed.py tells the package where the library is, relative to the package directory
# (so the prefix stays relocatable: DESTDIR, cpack, --prefix): it loads that library first.
if(IS_ABSOLUTE "${WHARF_PYTHON_DIR}")
  set(WHARF_PYTHON_PACKAGE_DIR "${WHARF_PYTHON_DIR}/wharf")
else()
  set(WHARF_PYTHON_PACKAGE_DIR "${CMAKE_INSTALL_PREFIX}/${WHARF_PYTHON_DIR}/wharf")
endif()
file(RELATIVE_PATH WHARF_PYTHON_LIBRARY "${WHARF_PYTHON_PACKAGE_DIR}"
  "${CMAKE_INSTALL_FULL_LIBDIR}/libwharf.so.${PROJECT_VERSION_MAJOR}")
file(CONFIGURE OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/python/_installed.py @ONLY CONTENT "\
\"\"\"Written by `cmake --install` (api/install.cmake): where it installed libwharf.\"\"\"

# Relative to this package's directory.
LIBRARY = \"@WHARF_PYTHON_LIBRARY@\"
")
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/python/_installed.py
  DESTINATION ${WHARF_PYTHON_DIR}/wharf COMPONENT python3-wharf)
