# node-gyp build of the addon against an installed libwharf, found with pkg-config (set
# PKG_CONFIG_PATH for a prefix outside the default search path: <prefix>/lib/pkgconfig).
{
  "targets": [
    {
      "target_name": "wharf",
      "sources": [
        "src/addon.cc",
        "src/admin.cc",
        "src/engine.cc",
        "src/fact_copy.cc",
        "src/napi_util.cc",
        "src/runtime.cc"
      ],
      "include_dirs": [
        "<!@(pkg-config --cflags-only-I wharf | sed s/-I//g)"
      ],
      "libraries": [
        "<!@(pkg-config --libs wharf)"
      ],
      "cflags_cc!": ["-fno-exceptions", "-std=gnu++17"],
      "cflags_cc": ["-std=c++20", "-fexceptions"]
    }
  ]
}
