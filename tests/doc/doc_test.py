#!/usr/bin/env python3
"""The doc test: every example in README.md and in the public headers is compiled and run.

What it takes (tests/doc/README.md has the conventions with examples):
  README.md           fenced blocks of ```c, ```cpp, ```python, ```go, ```js and ```sh, and the `wharf ...`
                      commands quoted inline (README.md, docs/troubleshooting.md, docs/cli.md's
                      single commands)
  api/include/wharf/  the example at the top of each header: from a `//   #include` line to the
                      next `//   }` line, a complete function returning wharf::Status
  api/include/wharf.h the statements of its top comment indented seven spaces after `**`

C and C++ blocks are compiled against the build tree's libwharf / libwharf++ and headers (through a
pkg-config file written here), Python blocks run against its libwharf, Go blocks build with the
repository's api/go and run, JavaScript blocks run as ES modules under node with the repository's
api/node (its `'wharf'` import) and the build tree's addon, `wharf` commands run the build tree's CLI on a scratch database that
the README's C++ example filled. Paths in examples under /var/lib, /tmp and /mnt are moved into a
scratch directory. An HTML comment just above a README block changes what happens to it:
  <!-- doc-test: skip REASON -->           not run (apt installs, the whole build, ...)
  <!-- doc-test: compile-only REASON -->   built, not run (needs a broker, ...)
  <!-- doc-test: prelude NAME -->          tests/doc/preludes/NAME.<ext> declares what the snippet
                                           assumes (its part before a `--- main ---` line at file
                                           scope, the rest at the start of main; for a
                                           JavaScript block, the part before `--- end ---` goes
                                           before it and the rest after it, in the module)
A C/C++ block without `int main` is a snippet: its #include lines and its `static` functions (from
`static` at the start of a line to the next `}` at the start of a line) go at file scope, the rest
into main(). A Go block without `package` is the body of main() in a package importing log and
wharf. A Python block with top-level `await` runs on a new event loop. Exit status: 0 when every example passed, 1 otherwise (each failure printed).

Usage: doc_test.py --source DIR --build DIR --work DIR --cc CC --cxx CXX [--go GO] [--cli PATH]
                   [--node NODE --node-addon PATH]
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import time

SCRATCH_PATH = re.compile(r"""(["'`])/(var/lib|tmp|mnt)/""")
DIRECTIVE = re.compile(r"^<!--\s*doc-test:\s*(skip|compile-only|prelude)\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^```(\w*)\s*$")
LANGUAGES = {"c", "cpp", "python", "go", "js", "sh"}
# Header examples that need a broker: compiled, not run.
HEADER_COMPILE_ONLY = {
    "relay.h": "needs a Redis server (the relay tests run against one)",
    "replication.h": "needs a NATS JetStream cluster (the replication tests run against one)",
}
# Header examples run against a database an engine of the test program holds (an admin socket).
HEADER_HELD = {"admin_client.h"}
# Inline `wharf ...` commands: placeholders and what stands for them on the scratch database.
PLACEHOLDERS = {"PATH": "{db}", "CONSUMER": "push", "OLD": "push", "NEW": "push-copy",
                "FACT_ID": "1", "S": "5"}
# Inline commands that cannot run here, by their first words.
CLI_SKIP = {
    "top": "a live view that runs until interrupted",
    "standby": "follows a NATS stream until stopped",
    "migrate": "runs in the application that registers the migrations",
    "restore": "needs a backup or a NATS stream",
    "bench": "the benchmark workloads (minutes)",
}
# Inline commands quoted to show an error on purpose.
CLI_SKIP_SPANS = {"wharf tail --tpye X": "a mistyped option, quoted for its error message"}
CLI_BARE = {"stat", "tail", "cursor list", "dead list", "lease list", "version", "verify"}


# Runs example.py; a block with top-level `await` / `async with` (as in the asyncio REPL) runs as
# a coroutine on a new event loop.
PYTHON_RUNNER = """
import ast, asyncio, inspect
source = open("example.py", encoding="utf-8").read()
code = compile(source, "example.py", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
scope = {"__name__": "__main__"}
if code.co_flags & inspect.CO_COROUTINE:
    asyncio.run(eval(code, scope))
else:
    exec(code, scope)
"""


class Example:
    def __init__(self, where, language, code, directive=None, argument=""):
        self.where = where          # file:line
        self.language = language
        self.code = code
        self.directive = directive  # None, "skip", "compile-only", "prelude"
        self.argument = argument


def readme_examples(path, display):
    examples = []
    lines = open(path, encoding="utf-8").read().split("\n")
    index = 0
    previous = ""
    while index < len(lines):
        fence = FENCE.match(lines[index])
        if not fence:
            if lines[index].strip():
                previous = lines[index]
            index += 1
            continue
        language = fence.group(1)
        start = index + 1
        index = start
        while index < len(lines) and not lines[index].startswith("```"):
            index += 1
        code = "\n".join(lines[start:index]) + "\n"
        index += 1
        directive = DIRECTIVE.match(previous)
        previous = ""
        if language in LANGUAGES:
            examples.append(Example(f"{display}:{start}", language, code,
                                    directive.group(1) if directive else None,
                                    directive.group(2) if directive else ""))
    return examples


def header_examples(include_dir):
    examples = []
    folder = os.path.join(include_dir, "wharf")
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".h"):
            continue
        lines = open(os.path.join(folder, name), encoding="utf-8").read().split("\n")
        top = []
        for line in lines:  # the top-of-file comment
            if not line.startswith("//"):
                break
            top.append(line)
        index = 0
        while index < len(top):
            if not top[index].startswith("//   #include"):
                index += 1
                continue
            start = index
            while index < len(top) and top[index] != "//   }":
                index += 1
            snippet = [line[5:] if line.startswith("//   ") else "" for line in top[start:index + 1]]
            examples.append(Example(f"api/include/wharf/{name}:{start + 1}", "header",
                                    "\n".join(snippet) + "\n"))
            index += 1
    return examples


def c_header_examples(include_dir):
    """wharf.h's top comment: statements indented seven spaces after `**` (the run-time version
    check), run as the body of a C99 main() with <assert.h> and <wharf.h>."""
    text = open(os.path.join(include_dir, "wharf.h"), encoding="utf-8").read()
    top = text[:text.index("*/")].split("\n")
    examples = []
    for number, line in enumerate(top, start=1):
        if re.match(r"^\*\* {7}\S.*;$", line):
            examples.append(Example(f"api/include/wharf.h:{number}", "c",
                                    "#include <assert.h>\n#include <wharf.h>\n" + line[9:] + "\n"))
    return examples


def inline_commands(path, display):
    """`wharf ...` code spans (a span may wrap over lines) that name options or placeholders."""
    text = re.sub(r"\n\s*", " ", open(path, encoding="utf-8").read())
    text = re.sub(r"```.*?```", "", text)  # fenced blocks are examples of their own
    commands = []
    for span in re.findall(r"`(wharf [^`]+)`", text):
        if "|" in span or "[" in span or "..." in span:
            continue  # a synopsis, not a command
        words = span.split()[1:]
        bare = " ".join(w for w in words if not w.startswith("-"))
        if not any(w.startswith("-") or w in PLACEHOLDERS for w in words) and bare not in CLI_BARE:
            continue  # a command's name in prose (`wharf backup`), not an invocation
        if span not in [c.code for c in commands]:
            commands.append(Example(display, "wharf", span))
    return commands


def wrap_c(code, prelude, language):
    """A snippet as a program: includes and static functions at file scope, the rest in main."""
    if re.search(r"^int main\s*\(", code, re.M):
        return code
    head, body, lines = [], [], code.split("\n")
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.startswith("#include"):
            head.append(line)
        elif line.startswith("static ") and "(" in line:
            while index < len(lines) and lines[index] != "}":
                head.append(lines[index])
                index += 1
            head.append("}")
        else:
            body.append("  " + line if line else "")
        index += 1
    file_scope, main_start = prelude
    signature = "int main(void)" if language == "c" else "int main()"
    return ("\n".join(head) + "\n" + file_scope + "\n" + signature + " {\n" + main_start + "\n" +
            "\n".join(body) + "\n  return 0;\n}\n")


HARNESS_INCLUDES = """
// --- the doc test's harness (tests/doc/doc_test.py) ---
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "wharf/engine.h"
#include "wharf/runtime.h"
"""


def wrap_header(example, index):
    """A header's example function and run_<index>(scratch), which calls it with what its
    parameters name (an open engine, a runtime on it, a database path, scratch paths)."""
    code = example.code
    match = re.search(r"wharf::Status\s+(\w+)\s*\(([^)]*)\)\s*\{", code)
    if not match:
        raise ValueError("no `wharf::Status Name(...) {` function in the example")
    name = match.group(1)
    params = [p.strip().split()[-1].lstrip("&*") for p in match.group(2).split(",") if p.strip()]
    held = os.path.basename(example.where.split(":")[0]) in HEADER_HELD
    args = []
    for param in params:
        if param == "engine":
            args.append("*engine")
        elif param == "runtime":
            args.append("runtime")
        elif param == "db_path":
            args.append("db_path")
        else:
            args.append(f'scratch + "/{param}"')
    uses_engine = "engine" in params or "runtime" in params or held
    runner = f"""
static int run_{index}(const std::string& scratch) {{  // {example.where}
  const std::string db_path = scratch + "/db";
  std::unique_ptr<wharf::Engine> engine;  // makes the database db_path names
  wharf::Status s = wharf::Engine::Open(db_path, {{}}, &engine);
  if (!s.ok()) {{
    std::fprintf(stderr, "harness: %s\\n", s.ToString().c_str());
    return 1;
  }}
  {"" if uses_engine else "engine.reset();  // the example opens it itself"}
  {"wharf::Runtime runtime(engine.get(), {});" if "runtime" in params else ""}
  s = {name}({", ".join(args)});
  if (!s.ok()) {{
    std::fprintf(stderr, "{example.where}: {name}: %s\\n", s.ToString().c_str());
    return 1;
  }}
  return 0;
}}
"""
    return code, runner


def header_program(examples):
    """One program of several header examples (one compile): `program SCRATCH INDEX` runs one."""
    codes, runners, cases = [], [], []
    for index, example in enumerate(examples):
        code, runner = wrap_header(example, index)
        codes.append(code)
        runners.append(runner)
        cases.append(f"  if (which == {index}) return run_{index}(argv[1]);")
    return ("\n".join(codes) + HARNESS_INCLUDES + "".join(runners) +
            "\nint main(int argc, char** argv) {\n  if (argc != 3) return 2;\n"
            "  const int which = std::atoi(argv[2]);\n" + "\n".join(cases) +
            "\n  return 2;\n}\n")


def wrap_go(code, prelude, module):
    if re.search(r"^package ", code, re.M):
        return code
    file_scope, main_start = prelude
    body = "\n".join("\t" + line if line else "" for line in code.split("\n"))
    return (f"package main\n\nimport (\n\t\"log\"\n\n\twharf \"{module}\"\n)\n\n"
            f"var _ = log.Fatal\nvar _ = wharf.Open\n\n{file_scope}\n"
            f"func main() {{\n{main_start}\n{body}\n}}\n")


class Runner:
    def __init__(self, options):
        self.options = options
        self.failures = []
        self.counts = {"passed": 0, "compiled only": 0, "skipped": 0}
        self.work = os.path.abspath(options.work)
        shutil.rmtree(os.path.join(self.work, "run"), ignore_errors=True)
        os.makedirs(os.path.join(self.work, "run"))
        self.pkgconfig = os.path.join(self.work, "pkgconfig")
        os.makedirs(self.pkgconfig, exist_ok=True)
        include = os.path.join(options.source, "api", "include")
        for flavor in ("", "++"):  # the build tree as an installed prefix would look
            with open(os.path.join(self.pkgconfig, f"wharf{flavor}.pc"), "w") as pc:
                pc.write(f"libdir={options.build}\nincludedir={include}\n\nName: wharf{flavor}\n"
                         f"Description: the build tree (doc test)\nVersion: 0\n"
                         f"Libs: -L${{libdir}} -Wl,-rpath,${{libdir}} -lwharf{flavor}\n"
                         f"Cflags: -I${{includedir}}\n")
        self.env = dict(os.environ, PKG_CONFIG_PATH=self.pkgconfig)
        self.cpp_db = None  # the database the README's C++ example filled (the CLI runs on it)

    def move_paths(self, code, scratch):
        """Paths under /var/lib, /tmp and /mnt into `scratch`, their parent directories made."""
        code = SCRATCH_PATH.sub(lambda m: m.group(1) + scratch + "/" + m.group(2) + "/", code)
        for path in re.findall(re.escape(scratch) + r"""/(?:var/lib|tmp|mnt)/[^"'`\s]*""", code):
            os.makedirs(os.path.dirname(path), exist_ok=True)
        return code

    def scratch(self, example):
        tag = re.sub(r"[^A-Za-z0-9]+", "-", example.where + "-" + example.language).strip("-")
        path = os.path.join(self.work, "run", tag)
        os.makedirs(path, exist_ok=True)
        return path

    def run(self, where, command, cwd, env=None, timeout=120):
        started = time.monotonic()
        try:
            result = subprocess.run(command, cwd=cwd, env=env or self.env, capture_output=True,
                                    text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            self.failures.append(f"{where}: timed out after {timeout} s: {' '.join(command)}")
            return None
        if result.returncode != 0:
            self.failures.append(f"{where}: `{' '.join(command)}` exited {result.returncode}\n"
                                 f"{result.stdout[-2000:]}{result.stderr[-3000:]}")
            return None
        if self.options.verbose:
            print(f"  {where}: {' '.join(command)[:100]} ({time.monotonic() - started:.1f} s)")
        return result

    def prelude(self, example, extension):
        if example.directive != "prelude":
            return ("", "")
        path = os.path.join(self.options.source, "tests", "doc", "preludes",
                            f"{example.argument}.{extension}")
        text = open(path, encoding="utf-8").read()
        file_scope, _, main_start = text.partition("--- main ---\n")
        # The marker line's comment opener stays on the file-scope side: drop it.
        file_scope = re.sub(r"\n[^\n]*$", "\n", file_scope)
        return (file_scope, main_start)

    def pkg(self, module):
        return subprocess.run(["pkg-config", "--cflags", "--libs", module], env=self.env,
                              capture_output=True, text=True, check=True).stdout.split()

    def native(self, example):
        scratch = self.scratch(example)
        code = self.move_paths(example.code, scratch)
        if example.language == "cpp":
            source = wrap_c(code, self.prelude(example, "cc"), "cpp")
            compiler, flags = self.options.cxx, ["-std=c++20"] + self.pkg("wharf++")
        else:
            source = wrap_c(code, self.prelude(example, "c"), "c")
            compiler, flags = self.options.cc, ["-std=c99"] + self.pkg("wharf")
        extension = "c" if example.language == "c" else "cc"
        with open(os.path.join(scratch, f"example.{extension}"), "w") as out:
            out.write(source)
        command = [compiler, "-Wall", "-Wextra", "-Wno-unused-parameter", "-Werror",
                   f"example.{extension}", "-o", "example"] + flags
        if self.run(example.where, command, scratch) is None:
            return
        if example.directive == "compile-only":
            self.counts["compiled only"] += 1
            return
        if self.run(example.where, ["./example", scratch], scratch) is not None:
            self.counts["passed"] += 1
            if example.language == "cpp" and self.cpp_db is None:
                for root, dirs, files in os.walk(scratch):
                    if "CURRENT" in files:
                        self.cpp_db = root
                        break

    def headers(self, examples):
        """The header examples, compiled as one program (one compile instead of one each); when
        that fails, each alone, so that the failure names its example."""
        scratch = os.path.join(self.work, "run", "headers")
        os.makedirs(scratch, exist_ok=True)
        command = [self.options.cxx, "-std=c++20", "-Wall", "-Wextra", "-Wno-unused-parameter",
                   "-Werror", "headers.cc", "-o", "headers"] + self.pkg("wharf++")
        batches = [examples]
        with open(os.path.join(scratch, "headers.cc"), "w") as out:
            out.write(header_program(examples))
        if subprocess.run(command, cwd=scratch, env=self.env, capture_output=True).returncode:
            batches = [[example] for example in examples]
        for batch in batches:
            with open(os.path.join(scratch, "headers.cc"), "w") as out:
                out.write(header_program(batch))
            if len(batch) == 1 and self.run(batch[0].where, command, scratch) is None:
                continue
            for index, example in enumerate(batch):
                if os.path.basename(example.where.split(":")[0]) in HEADER_COMPILE_ONLY:
                    self.counts["compiled only"] += 1
                    continue
                directory = self.scratch(example)
                if self.run(example.where, ["./headers", directory, str(index)], scratch):
                    self.counts["passed"] += 1

    def python(self, example):
        scratch = self.scratch(example)
        code = self.move_paths(example.code, scratch)
        with open(os.path.join(scratch, "example.py"), "w") as out:
            out.write(code)
        env = dict(self.env, WHARF_LIBRARY=os.path.join(self.options.build, "libwharf.so"),
                   PYTHONPATH=os.path.join(self.options.source, "api", "python"),
                   PYTHONDONTWRITEBYTECODE="1")
        if self.run(example.where, [sys.executable, "-c", PYTHON_RUNNER], scratch, env) is not None:
            self.counts["passed"] += 1

    def go(self, example):
        if not self.options.go:
            self.counts["skipped"] += 1
            print(f"doc-test: {example.where}: go not found, the Go example is not built")
            return
        scratch = self.scratch(example)
        package = os.path.join(self.options.source, "api", "go")
        module = re.search(r"^module\s+(\S+)", open(os.path.join(package, "go.mod")).read(),
                           re.M).group(1)
        code = self.move_paths(example.code, scratch)
        with open(os.path.join(scratch, "main.go"), "w") as out:
            out.write(wrap_go(code, self.prelude(example, "go"), module))
        with open(os.path.join(scratch, "go.mod"), "w") as out:
            out.write(f"module doctest\n\ngo 1.19\n\nrequire {module} v0.0.0\n\n"
                      f"replace {module} => {package}\n")
        cache = os.path.join(self.options.build, "doc-test-go")  # kept between runs
        env = dict(self.env, GOCACHE=os.path.join(cache, "cache"),
                   GOPATH=os.path.join(cache, "path"), GOFLAGS="-mod=mod", GOPROXY="off",
                   GOTOOLCHAIN="local", GOTELEMETRY="off")
        if self.run(example.where, [self.options.go, "build", "-o", "example", "."], scratch,
                    env, timeout=600) is None:
            return
        if example.directive == "compile-only":
            self.counts["compiled only"] += 1
        elif self.run(example.where, ["./example"], scratch, env) is not None:
            self.counts["passed"] += 1

    def js(self, example):
        if not (self.options.node and self.options.node_addon):
            self.counts["skipped"] += 1
            print(f"doc-test: {example.where}: node or its addon not built, the example is not run")
            return
        scratch = self.scratch(example)
        package = os.path.join(self.options.source, "api", "node", "index.mjs")
        code = self.move_paths(example.code, scratch)
        code = re.sub(r"""from\s+(['"])wharf\1""", f"from '{package}'", code)
        before, after = "", ""
        if example.directive == "prelude":
            path = os.path.join(self.options.source, "tests", "doc", "preludes",
                                f"{example.argument}.mjs")
            before, _, after = open(path, encoding="utf-8").read().partition("// --- end ---\n")
        with open(os.path.join(scratch, "example.mjs"), "w") as out:
            out.write(before + code + after)
        env = dict(self.env, WHARF_NODE_ADDON=self.options.node_addon)
        if self.run(example.where, [self.options.node, "example.mjs"], scratch, env) is not None:
            self.counts["passed"] += 1

    def shell(self, example):
        for line in example.code.split("\n"):
            line = line.split("#")[0].strip()
            if not line:
                continue
            if not line.startswith("wharf "):
                self.failures.append(f"{example.where}: `{line}` is not a `wharf` command: mark "
                                     "the block <!-- doc-test: skip REASON --> or change it")
                return
            self.cli(Example(example.where, "wharf", line))

    def cli(self, example):
        words = example.code.split()[1:]
        skip = CLI_SKIP.get(words[0]) if words else None
        skip = CLI_SKIP_SPANS.get(example.code, skip)
        if skip:
            self.counts["skipped"] += 1
            print(f"doc-test: {example.where}: `{example.code}` skipped: {skip}")
            return
        if self.cpp_db is None:
            self.failures.append(f"{example.where}: `{example.code}`: no database to run it on "
                                 "(the README's C++ example did not run)")
            return
        # Each command runs on its own copy, so that one that changes the database (recover,
        # cursor copy) leaves the next one what the example wrote.
        scratch = self.scratch(Example(example.where + "-" + " ".join(words), "wharf", ""))
        db = os.path.join(scratch, "db")
        shutil.rmtree(db, ignore_errors=True)
        shutil.copytree(self.cpp_db, db)
        argv = [self.options.cli] + [PLACEHOLDERS.get(w, w).replace("{db}", db) for w in words]
        env = dict(self.env, WHARF_DB=db)
        if self.run(f"{example.where}: `{example.code}`", argv, scratch, env) is not None:
            self.counts["passed"] += 1

    def example(self, example):
        if example.directive == "skip":
            self.counts["skipped"] += 1
            print(f"doc-test: {example.where} ({example.language}) skipped: {example.argument}")
            return
        handler = {"c": self.native, "cpp": self.native,
                   "python": self.python, "go": self.go, "js": self.js, "sh": self.shell,
                   "wharf": self.cli}
        handler[example.language](example)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for name in ("source", "build", "work", "cc", "cxx"):
        parser.add_argument("--" + name, required=True)
    parser.add_argument("--go", default="")
    parser.add_argument("--cli", default="")
    parser.add_argument("--node", default="")
    parser.add_argument("--node-addon", default="")
    parser.add_argument("--readme", default="README.md", help="relative to --source")
    parser.add_argument("--verbose", action="store_true")
    options = parser.parse_args()
    options.source = os.path.abspath(options.source)
    options.build = os.path.abspath(options.build)
    started = time.monotonic()
    source = options.source
    examples = readme_examples(os.path.join(source, options.readme), options.readme)
    examples += header_examples(os.path.join(source, "api", "include"))
    examples += c_header_examples(os.path.join(source, "api", "include"))
    commands = []
    if options.cli:
        for doc in (options.readme, "docs/troubleshooting.md", "docs/cli.md"):
            commands += inline_commands(os.path.join(source, doc), doc)
    # The C++ blocks first: the README's first one fills the database the commands run on.
    order = {"cpp": 0, "header": 1, "c": 2, "python": 3, "go": 4, "js": 5, "sh": 6}
    examples.sort(key=lambda e: order[e.language])
    runner = Runner(options)
    runner.headers([e for e in examples if e.language == "header"])
    for example in examples + commands:
        if example.language != "header":
            runner.example(example)
    for failure in runner.failures:
        print(f"doc-test: FAIL {failure}\n")
    counts = ", ".join(f"{count} {what}" for what, count in runner.counts.items())
    print(f"doc-test: {len(examples)} examples and {len(commands)} commands: {counts}, "
          f"{len(runner.failures)} failed ({time.monotonic() - started:.1f} s)")
    return 1 if runner.failures else 0


if __name__ == "__main__":
    sys.exit(main())
