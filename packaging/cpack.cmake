# Debian packages (`cpack -G DEB` in a build directory; `tools/setup.sh package` builds, installs
# and checks them):
#   libwharf0      libwharf.so.0 and libwharf++.so.0
#   libwharf-dev   headers, libwharf.a, the link names, pkg-config files, the CMake package
#   wharf          the CLI
#   python3-wharf  the Python package wharf (ctypes over libwharf.so.0, py.typed)
# Runtime dependencies are computed by dpkg-shlibdeps from the binaries, so they name exactly the
# Debian library packages (librocksdb7.8, liburing2, ...) the build linked. libwharf-dev also
# depends on the -dev packages of what its Libs.private names (a static link needs them).
# The libraries go to /usr/lib/<multiarch> (CMAKE_INSTALL_LIBDIR, api/install.cmake: a build
# directory configured with another libdir is reconfigured by packaging/deb_test.sh).
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME wharf)
set(CPACK_PACKAGE_VENDOR "Wharf")
set(CPACK_PACKAGE_CONTACT "Wharf maintainers <wharf@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Embedded transactional-outbox engine on RocksDB")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL libwharf0 libwharf-dev wharf python3-wharf)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_LIBWHARF0_PACKAGE_NAME libwharf0)
set(CPACK_DEBIAN_LIBWHARF-DEV_PACKAGE_NAME libwharf-dev)
set(CPACK_DEBIAN_LIBWHARF-DEV_PACKAGE_SECTION libdevel)
# libwharf-dev: what its Libs.private names, for a static link (packaging/link_deps.cmake).
include(${CMAKE_CURRENT_LIST_DIR}/link_deps.cmake)
list(JOIN WHARF_LINK_DEV_PACKAGES ", " WHARF_LINK_DEV_DEPENDS)
set(CPACK_DEBIAN_LIBWHARF-DEV_PACKAGE_DEPENDS
  "libwharf0 (= ${PROJECT_VERSION}), ${WHARF_LINK_DEV_DEPENDS}")
set(CPACK_DEBIAN_WHARF_PACKAGE_NAME wharf)
set(CPACK_DEBIAN_WHARF_PACKAGE_SECTION database)
set(CPACK_DEBIAN_PYTHON3-WHARF_PACKAGE_NAME python3-wharf)
set(CPACK_DEBIAN_PYTHON3-WHARF_PACKAGE_SECTION python)
set(CPACK_DEBIAN_PYTHON3-WHARF_PACKAGE_ARCHITECTURE all)
set(CPACK_DEBIAN_PYTHON3-WHARF_PACKAGE_DEPENDS "python3, libwharf0 (= ${PROJECT_VERSION})")
set(CPACK_COMPONENT_LIBWHARF0_DESCRIPTION
  "Wharf's shared libraries: the C ABI (libwharf.so.0) and the C++20 API (libwharf++.so.0)")
set(CPACK_COMPONENT_LIBWHARF-DEV_DESCRIPTION
  "Wharf's headers, static library, pkg-config files and CMake package")
set(CPACK_COMPONENT_WHARF_DESCRIPTION "The wharf command-line tool: inspect and operate a database")
set(CPACK_COMPONENT_PYTHON3-WHARF_DESCRIPTION "Python binding of Wharf: the wharf package (ctypes, standard library only, typed)")
include(CPack)
