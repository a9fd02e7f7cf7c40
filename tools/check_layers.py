#!/usr/bin/env python3
"""Fails (and names each line) when a source of the library includes a header of a higher layer.

The library's folders are layers (docs/architecture.md, "Map of the code"): a folder may include
its own headers, the public headers (wharf/*.h) and the headers of folders below it, never one
above it or beside it. Usage: check_layers.py SOURCE_ROOT
"""
import pathlib
import re
import sys

# Bottom up. Folders on one line are beside each other: neither may include the other.
LAYERS = [
    ["api/include"],  # the public headers: the types every layer speaks
    # The wire-format library (JSON writer, field tables): public headers only, so that the CLI
    # may include it too (tools/check_cli_includes.sh).
    ["engine/wire"],
    ["engine/base"],
    ["io/sync"],
    ["io/wal"],
    ["io"],  # the database directory and RocksDB's info log
    ["io/fault"],  # fault injection: tests only, not in the shipped library
    ["engine/store"],
    ["engine/commit"],
    ["engine/core"],
    ["engine/retention", "engine/backup"],
    ["engine/replicate"],
    ["engine/relay"],
    ["engine/runtime", "engine/admin", "engine/metrics"],
    ["engine/declarative"],
    ["engine/open"],
    ["api/cc", "api/c"],
]
RANK = {folder: rank for rank, folders in enumerate(LAYERS) for folder in folders}
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')


def folder_of(path: str) -> str:
    """The layer folder of a repository path (engine/x/..., io/x/..., io/file, api/x/...)."""
    if path.startswith("wharf/") or path == "wharf.h":
        return "api/include"
    parts = path.split("/")
    if parts[0] == "engine" and len(parts) > 2:
        return "engine/" + parts[1]
    if parts[0] == "io":
        return "io/" + parts[1] if len(parts) > 2 else "io"
    if parts[0] == "api" and len(parts) > 2:
        return "api/" + parts[1]
    return ""


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    problems = []
    sources = [p for d in ("engine", "io", "api/cc", "api/c") for p in (root / d).rglob("*")
               if p.suffix in (".cc", ".h")]
    for source in sorted(sources):
        relative = source.relative_to(root).as_posix()
        mine = folder_of(relative)
        if mine not in RANK:
            problems.append(f"{relative}: folder {mine or '?'} is on no layer (tools/check_layers.py)")
            continue
        for number, line in enumerate(source.read_text().splitlines(), 1):
            match = INCLUDE.match(line)
            if not match:
                continue
            theirs = folder_of(match.group(1))
            if theirs in ("", mine):
                continue
            if theirs not in RANK:
                problems.append(f"{relative}:{number}: includes {match.group(1)}, on no layer")
            elif RANK[theirs] >= RANK[mine]:
                where = "beside" if RANK[theirs] == RANK[mine] else "above"
                problems.append(f"{relative}:{number}: {mine} includes {match.group(1)}: "
                                f"{theirs} is {where} it")
    if problems:
        print("FAIL: includes that go up (or across) a layer:")
        print("\n".join(problems))
        return 1
    print(f"OK: {len(sources)} sources include only their own layer and those below")
    return 0


if __name__ == "__main__":
    sys.exit(main())
