"""Finding and loading libwharf (the C library this package binds with ctypes).

Tried in this order; the first that loads wins:

1. WHARF_LIBRARY, a path to libwharf.so: when set, only it (a wrong path is an error, not a
   reason to load some other copy);
2. where `cmake --install` put the library, relative to where it put this package (the module
   `wharf._installed`, written at install time; absent in a source tree or a pip install);
3. next to this package (a copy vendored into the package directory);
4. the library directories of the prefix Python runs in (sys.prefix: a virtual environment or
   /usr/local into which the library was installed too);
5. in a source checkout (api/python/wharf), the newest build/*/libwharf.so of the checkout;
6. ctypes.util.find_library("wharf"), then the SONAME libwharf.so.0 on the dynamic linker's
   path (LD_LIBRARY_PATH, the ld.so cache: where the libwharf0 Debian package puts it).

None loads: ImportError listing each candidate and why it failed, and how to fix it.
"""

import ctypes
import ctypes.util
import glob
import importlib
import os
import sys
import sysconfig
from typing import Callable, List, Mapping, Optional, Tuple

SONAME = "libwharf.so.0"  # the C ABI's major version 0 (api/c/wharf.map)

HOW_TO_FIX = ("set WHARF_LIBRARY to the path of libwharf.so.0, or install the library: the "
              "libwharf0 Debian package, or `cmake --install` of a Wharf build into a prefix on "
              "the dynamic linker's path")


def _installed_library(package_dir: str) -> Optional[str]:
    """The library `cmake --install` installed with this package, if it did."""
    try:
        installed = importlib.import_module("._installed", __package__)
    except ImportError:
        return None
    relative = getattr(installed, "LIBRARY", None)
    if not isinstance(relative, str):
        return None
    return os.path.normpath(os.path.join(package_dir, relative))


def _prefix_libraries(prefix: str) -> List[str]:
    multiarch = sysconfig.get_config_var("MULTIARCH")
    libdirs = ["lib", "lib64"] + ([os.path.join("lib", multiarch)] if multiarch else [])
    return [os.path.join(prefix, libdir, SONAME) for libdir in libdirs]


def _source_tree_builds(package_dir: str) -> List[str]:
    """build/*/libwharf.so of the checkout, newest first, when this package is api/python/wharf
    of a source checkout (a developer running the tests from source)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(package_dir)))
    source = os.path.join(root, "api", "python", "wharf")
    if not (os.path.isfile(os.path.join(root, "api", "include", "wharf.h")) and
            os.path.isdir(source) and os.path.samefile(package_dir, source)):
        return []
    found = glob.glob(os.path.join(root, "build", "*", "libwharf.so"))
    found.sort(key=os.path.getmtime, reverse=True)
    return found


def candidates(environ: Mapping[str, str], package_dir: str, prefix: str,
               find_library: Callable[[str], Optional[str]],
               installed: Optional[str]) -> List[str]:
    """The paths (or, last, the bare SONAME) to try, in order. `installed` is where `cmake
    --install` put the library (None: it did not install this package). Paths of steps 2-5 are
    listed only when the file exists."""
    env = environ.get("WHARF_LIBRARY")
    if env:
        return [env]
    paths: List[str] = [] if installed is None else [installed]
    paths += [os.path.join(package_dir, name) for name in (SONAME, "libwharf.so")]
    paths += _prefix_libraries(prefix)
    found = [path for path in paths if os.path.isfile(path)]
    found += _source_tree_builds(package_dir)
    system = find_library("wharf")
    if system:
        found.append(system)
    found.append(SONAME)
    unique: List[str] = []
    for path in found:
        if path not in unique:
            unique.append(path)
    return unique


def load(environ: Optional[Mapping[str, str]] = None, package_dir: Optional[str] = None,
         prefix: Optional[str] = None,
         find_library: Optional[Callable[[str], Optional[str]]] = None) -> Tuple[ctypes.CDLL, str]:
    """The loaded library and the path (or name) it was loaded from; ImportError naming every
    candidate and why it did not load if none does. The arguments (tests) default to this
    process's environment, this package's directory, sys.prefix and ctypes.util.find_library."""
    environ = os.environ if environ is None else environ
    package_dir = package_dir or os.path.dirname(os.path.abspath(__file__))
    tried = candidates(environ, package_dir, sys.prefix if prefix is None else prefix,
                       find_library or ctypes.util.find_library, _installed_library(package_dir))
    errors = []
    for path in tried:
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            errors.append(str(e) if path in str(e) else f"{path}: {e}")
    if environ.get("WHARF_LIBRARY"):
        raise ImportError(f"wharf: cannot load libwharf from WHARF_LIBRARY: {errors[0]}; point "
                          "WHARF_LIBRARY at libwharf.so.0 (or unset it to search the install "
                          "prefix and the system library path)")
    raise ImportError(f"wharf: cannot load libwharf; tried {'; '.join(errors)}; to fix it, "
                      f"{HOW_TO_FIX}")
