"""Tests of the Python package itself (not the engine): its version against the project's and the
library's, its type hints, py.typed, and how it finds libwharf. Run by ctest from the source tree
(python_binding) and from a virtual environment the package was pip-installed into
(python_venv_install, with WHARF_EXPECT_INSTALLED=1)."""

import importlib.metadata
import inspect
import os
import re
import subprocess
import sys
import tempfile
import textwrap
import typing
import unittest

import wharf
from wharf import _library

HERE = os.path.dirname(os.path.abspath(__file__))
INSTALLED = os.environ.get("WHARF_EXPECT_INSTALLED") == "1"


class TestVersion(unittest.TestCase):
    def expected(self) -> str:
        expected = os.environ.get("WHARF_EXPECTED_VERSION")
        if not expected:
            self.skipTest("WHARF_EXPECTED_VERSION (the project's version) is not set")
        return expected

    def test_version_is_the_librarys_and_the_projects(self) -> None:
        self.assertEqual(wharf.__version__, wharf.version())
        self.assertEqual(wharf.__version__, self.expected())

    def test_pyproject_version_is_the_projects(self) -> None:
        pyproject = os.path.join(HERE, "pyproject.toml")
        if not os.path.exists(pyproject):
            self.skipTest("not run from the source tree")
        with open(pyproject, encoding="utf-8") as file:
            text = file.read()
        project = text[text.index("[project]"):]
        match = re.search(r'^version = "([^"]+)"$', project, re.MULTILINE)
        self.assertIsNotNone(match, "no version in pyproject.toml's [project]")
        assert match is not None
        self.assertEqual(match.group(1), self.expected())

    def test_installed_distribution(self) -> None:
        try:
            installed = importlib.metadata.version("wharf")
        except importlib.metadata.PackageNotFoundError:
            if INSTALLED:
                self.fail("the wharf distribution is not installed")
            self.skipTest("not installed (source tree)")
        self.assertEqual(installed, wharf.__version__)
        if INSTALLED:  # imported from the installation, not from a source tree
            package = os.path.realpath(os.path.dirname(wharf.__file__))
            self.assertTrue(package.startswith(os.path.realpath(sys.prefix) + os.sep),
                            f"{package} is not under {sys.prefix}")


class TestTyping(unittest.TestCase):
    def test_py_typed(self) -> None:
        self.assertTrue(os.path.isfile(os.path.join(os.path.dirname(wharf.__file__),
                                                    "py.typed")))

    def public_callables(self) -> typing.List[typing.Tuple[str, typing.Callable[..., object]]]:
        found: typing.List[typing.Tuple[str, typing.Callable[..., object]]] = []
        for name in wharf.__all__:
            value = getattr(wharf, name)
            if inspect.isfunction(value):
                found.append((name, value))
            elif inspect.isclass(value):
                for attr, member in vars(value).items():
                    if isinstance(member, property) and member.fget is not None:
                        member = member.fget
                    elif isinstance(member, (staticmethod, classmethod)):
                        member = member.__func__
                    if not inspect.isfunction(member) or not member.__module__.startswith("wharf"):
                        continue
                    if attr.startswith("_") and attr not in ("__init__", "__enter__",
                                                             "__exit__"):
                        continue
                    found.append((f"{name}.{attr}", member))
        return found

    def test_every_public_callable_is_fully_annotated(self) -> None:
        callables = self.public_callables()
        self.assertGreater(len(callables), 60)  # the classes' methods were found
        missing = []
        for qualname, function in callables:
            # Also resolves every forward reference; the aliases of wharf._types name classes of
            # the package's other modules, all of which the package's namespace holds.
            module = vars(sys.modules[function.__module__])
            hints = typing.get_type_hints(function, globalns={**module, **vars(wharf)})
            for parameter in inspect.signature(function).parameters.values():
                if parameter.name not in ("self", "cls") and parameter.name not in hints:
                    missing.append(f"{qualname}({parameter.name})")
            if "return" not in hints:
                missing.append(f"{qualname} -> ?")
        self.assertEqual(missing, [])


class TestFindingTheLibrary(unittest.TestCase):
    def setUp(self) -> None:
        scratch = tempfile.TemporaryDirectory(prefix="wharf-py-find-")
        self.addCleanup(scratch.cleanup)
        self.dir = scratch.name

    def touch(self, *parts: str) -> str:
        path = os.path.join(self.dir, *parts)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        open(path, "wb").close()
        return path

    def test_wharf_library_is_the_only_candidate_when_set(self) -> None:
        self.touch("package", "libwharf.so.0")
        found = _library.candidates({"WHARF_LIBRARY": "/x/libwharf.so"},
                                    os.path.join(self.dir, "package"), self.dir,
                                    lambda name: "/usr/lib/libwharf.so.0", None)
        self.assertEqual(found, ["/x/libwharf.so"])

    def test_order_installed_package_prefix_system_soname(self) -> None:
        installed = self.touch("usr", "lib", "x86_64-linux-gnu", "libwharf.so.0")
        vendored = self.touch("package", "libwharf.so.0")
        in_prefix = self.touch("venv", "lib", "libwharf.so.0")
        found = _library.candidates({}, os.path.join(self.dir, "package"),
                                    os.path.join(self.dir, "venv"),
                                    lambda name: "/usr/lib/libwharf.so.0", installed)
        self.assertEqual(found, [installed, vendored, in_prefix, "/usr/lib/libwharf.so.0",
                                 "libwharf.so.0"])

    def test_absent_files_are_not_candidates(self) -> None:
        found = _library.candidates({}, os.path.join(self.dir, "package"), self.dir,
                                    lambda name: None, os.path.join(self.dir, "gone.so.0"))
        self.assertEqual(found, ["libwharf.so.0"])

    # In a fresh process: this one has libwharf loaded, so dlopen of its SONAME would succeed.
    PROBE = textwrap.dedent("""
        import ctypes, importlib.util, sys
        spec = importlib.util.spec_from_file_location("probe._library", sys.argv[1])
        library = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(library)
        try:
            ctypes.CDLL(library.SONAME)
            print("SONAME loads")
            sys.exit(0)
        except OSError:
            pass
        try:
            library.load({}, sys.argv[2], sys.argv[2], lambda name: None)
            print("loaded")
        except ImportError as e:
            print(e)
        """)

    def test_nothing_loads_names_what_was_tried_and_the_fix(self) -> None:
        result = subprocess.run([sys.executable, "-c", self.PROBE, _library.__file__, self.dir],
                                cwd=self.dir, capture_output=True, text=True, timeout=60)
        self.assertEqual(result.returncode, 0, result.stderr)
        if result.stdout == "SONAME loads\n":
            self.skipTest(f"{_library.SONAME} is on the dynamic linker's path here")
        for part in ("cannot load libwharf; tried libwharf.so.0", "WHARF_LIBRARY", "libwharf0",
                     "cmake --install"):
            self.assertIn(part, result.stdout)

    def test_a_wrong_wharf_library_fails_the_import(self) -> None:
        missing = os.path.join(self.dir, "no", "libwharf.so")
        package_parent = os.path.dirname(os.path.dirname(os.path.abspath(wharf.__file__)))
        env = dict(os.environ, WHARF_LIBRARY=missing, PYTHONPATH=package_parent)
        result = subprocess.run([sys.executable, "-c", "import wharf"], env=env, cwd=self.dir,
                                capture_output=True, text=True, timeout=60)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn(f"ImportError: wharf: cannot load libwharf from WHARF_LIBRARY: {missing}",
                      result.stderr)

    def test_the_loaded_library_is_reported(self) -> None:
        if os.environ.get("WHARF_LIBRARY"):
            self.assertEqual(wharf.library_path, os.environ["WHARF_LIBRARY"])
        self.assertTrue(os.path.exists(wharf.library_path) or "/" not in wharf.library_path)


if __name__ == "__main__":
    unittest.main()
