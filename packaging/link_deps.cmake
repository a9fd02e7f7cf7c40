# What a static link of libwharf.a needs besides the archive, each library with the Debian package
# that provides its link name: the libraries the engine uses, and what Debian's static librocksdb.a
# needs (its CMake package lists them; its rocksdb.pc does not). One list for both users: the .pc
# files' Libs.private (api/install.cmake) and libwharf-dev's Depends (packaging/cpack.cmake);
# packaging/deb_test.sh checks that each -l resolves to a file of a package libwharf-dev depends on.
set(WHARF_LINK_DEPS
  rocksdb=librocksdb-dev gflags=libgflags-dev snappy=libsnappy-dev z=zlib1g-dev bz2=libbz2-dev
  lz4=liblz4-dev zstd=libzstd-dev uring=liburing-dev xxhash=libxxhash-dev fyaml=libfyaml-dev
  simdjson=libsimdjson-dev cpp-httplib=libcpp-httplib-dev hiredis=libhiredis-dev nats=libnats-dev
  "stdc++=libstdc++-12-dev | libstdc++-dev" pthread=libc6-dev m=libc6-dev)
set(WHARF_LINK_LIBS "")
set(WHARF_LINK_DEV_PACKAGES "")
foreach(dep IN LISTS WHARF_LINK_DEPS)
  string(REGEX MATCH "^([^=]+)=(.+)$" _ "${dep}")
  string(APPEND WHARF_LINK_LIBS " -l${CMAKE_MATCH_1}")
  if(NOT "${CMAKE_MATCH_2}" IN_LIST WHARF_LINK_DEV_PACKAGES)
    list(APPEND WHARF_LINK_DEV_PACKAGES "${CMAKE_MATCH_2}")
  endif()
endforeach()
string(STRIP "${WHARF_LINK_LIBS}" WHARF_LINK_LIBS)
