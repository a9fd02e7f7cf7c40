"""W8-slow-subscriber from Python: an `async def` subscriber awaiting asyncio.sleep(wait) per fact
on the caller's event loop (wharf.AsyncRuntime), at key_concurrency 1 and 64, beside the C ABI's
W8 (bench/c_abi_bench.c) in the same run, so that the ratio of the two says what the binding
costs. Optionally (--thread-loop) the thread-based Runtime's async subscriber too.

    WHARF_LIBRARY=build/release/libwharf.so \\
    python3 bench/python/w8_async.py --c-bench build/release/bench/c_abi_bench

Shape (bench/README.md, W8): facts of 10 000 keys ("customer-0001234") in 16 partitions, 100-byte
payloads, committed beforehand in transactions of 100 facts; one fresh database per measurement
(a consumer's retention would otherwise trim what the next one has to read). The rate is facts
done per second from start() until the last fact's coroutine ended. Prints one JSON line per
measurement and a summary line with the goals (kc=64 >= 20x kc=1; Python >= 50 % of C), and the
ceiling of the loop itself: the same coroutines with no Wharf at all ("asyncio alone").
"""

import argparse
import asyncio
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Dict, List, Optional

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "api",
                                "python"))
import wharf  # noqa: E402

FACT_TYPE = "OrderCreated"
PAYLOAD_BYTES = 100


def precommit(path: str, facts: int, keys: int, partitions: int) -> wharf.Engine:
    """A fresh database at `path` holding `facts` facts (rounded up to 100) over `keys` keys."""
    engine = wharf.Engine(path, {"partitions": partitions, "durability": "sync"})
    engine.declare_types(FACT_TYPE)
    transactions = (facts + 99) // 100

    def load(index: int, count: int) -> None:
        rng = random.Random(index)
        payload = os.urandom(PAYLOAD_BYTES)
        for _ in range(count):
            with engine.begin() as txn:
                for _ in range(100):
                    key = "customer-%07d" % rng.randrange(keys)
                    txn.emit(FACT_TYPE, payload, key=key)

    loaders = 8
    threads = [threading.Thread(target=load, args=(i, transactions // loaders +
                                                   (i < transactions % loaders)))
               for i in range(loaders)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return engine


class Checker:
    """Facts done (first time each), and per-key order: a fact started before an older one of
    its key is a violation."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.done = 0
        self.seen: set = set()
        self.last_started: Dict[bytes, int] = {}
        self.order_violations = 0
        self.in_flight = 0
        self.most_in_flight = 0
        self.end = 0.0
        self.finished: Optional[asyncio.Event] = None
        self.lock = threading.Lock()  # the thread-loop mode runs handlers off the main thread

    def started(self, fact: wharf.Fact) -> None:
        with self.lock:
            if fact.id < self.last_started.get(fact.key, 0):
                self.order_violations += 1
            self.last_started[fact.key] = fact.id
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)

    def ended(self, fact: wharf.Fact) -> bool:
        with self.lock:
            self.in_flight -= 1
            if fact.id in self.seen:
                return False
            self.seen.add(fact.id)
            self.done += 1
            if self.done == self.target:
                self.end = time.monotonic()
                return True
            return False


async def consume_on_the_callers_loop(engine: wharf.Engine, facts: int, key_concurrency: int,
                                      wait_s: float, workers: Optional[int]) -> Dict[str, Any]:
    checker = Checker(facts)
    finished = asyncio.Event()
    options = f"workers={workers}" if workers else None
    runtime = wharf.AsyncRuntime(engine, options)

    @runtime.subscriber("w8", [FACT_TYPE], {"key_concurrency": key_concurrency})
    async def handle(fact: wharf.Fact) -> None:
        checker.started(fact)
        await asyncio.sleep(wait_s)
        if checker.ended(fact):
            finished.set()

    cpu = time.process_time()
    start = time.monotonic()
    await runtime.start()
    try:
        await asyncio.wait_for(finished.wait(), timeout=600)
    finally:
        cpu = time.process_time() - cpu
        handed, wakeups = runtime.wakeups()
        await runtime.close()
    seconds = checker.end - start
    return {"facts_per_s": round(facts / seconds), "seconds": round(seconds, 3),
            "cpu_us_per_fact": round(cpu / facts * 1e6, 1),
            "facts_per_wakeup": round(handed / max(wakeups, 1), 1),
            "most_in_flight": checker.most_in_flight,
            "order_violations": checker.order_violations}


async def asyncio_alone(facts: int, in_flight: int, wait_s: float) -> Dict[str, Any]:
    """The ceiling without Wharf: `facts` coroutines awaiting asyncio.sleep(wait_s), at most
    `in_flight` at a time (16 partitions x key_concurrency 64 = 1 024), each started as a task
    when an earlier one ends, as the binding starts one per delivery."""
    finished = asyncio.Event()
    started = done = 0

    async def handle() -> None:
        nonlocal done
        await asyncio.sleep(wait_s)
        done += 1
        if done == facts:
            finished.set()
        elif started < facts:
            start_one()

    def start_one() -> None:
        nonlocal started
        started += 1
        asyncio.get_running_loop().create_task(handle())

    cpu = time.process_time()
    start = time.monotonic()
    for _ in range(min(in_flight, facts)):
        start_one()
    await finished.wait()
    seconds = time.monotonic() - start
    cpu = time.process_time() - cpu
    return {"workload": "W8-asyncio-alone", "facts": facts, "in_flight": in_flight,
            "wait_ms": wait_s * 1e3, "facts_per_s": round(facts / seconds),
            "seconds": round(seconds, 3), "cpu_us_per_fact": round(cpu / facts * 1e6, 1)}


def consume_on_a_loop_thread(engine: wharf.Engine, facts: int, key_concurrency: int,
                             wait_s: float, workers: Optional[int]) -> Dict[str, Any]:
    """The thread-based Runtime: its async def subscriber runs on a loop thread of its own."""
    checker = Checker(facts)
    finished = threading.Event()
    runtime = wharf.Runtime(engine, f"workers={workers}" if workers else None)

    @runtime.subscriber("w8", [FACT_TYPE], {"key_concurrency": key_concurrency})
    async def handle(fact: wharf.Fact) -> None:
        checker.started(fact)
        await asyncio.sleep(wait_s)
        if checker.ended(fact):
            finished.set()

    cpu = time.process_time()
    start = time.monotonic()
    runtime.start()
    finished.wait(600)
    cpu = time.process_time() - cpu
    runtime.close()
    seconds = checker.end - start
    return {"facts_per_s": round(facts / seconds), "seconds": round(seconds, 3),
            "cpu_us_per_fact": round(cpu / facts * 1e6, 1),
            "most_in_flight": checker.most_in_flight,
            "order_violations": checker.order_violations}


def measure(args: argparse.Namespace, scratch: str, api: str, facts: int,
            key_concurrency: int) -> Dict[str, Any]:
    path = tempfile.mkdtemp(prefix="w8-py-", dir=scratch)
    engine = precommit(path, facts, args.keys, args.partitions)
    committed = (facts + 99) // 100 * 100
    try:
        if api == "python_asyncio":
            result = asyncio.run(consume_on_the_callers_loop(
                engine, committed, key_concurrency, args.wait_ms / 1e3, args.workers))
        else:
            result = consume_on_a_loop_thread(engine, committed, key_concurrency,
                                              args.wait_ms / 1e3, args.workers)
    finally:
        engine.close()
        shutil.rmtree(path, ignore_errors=True)
    return {"workload": "W8-slow-subscriber", "api": api, "facts": committed,
            "keys": args.keys, "partitions": args.partitions,
            "key_concurrency": key_concurrency, "wait_ms": args.wait_ms, **result}


def c_abi(args: argparse.Namespace, scratch: str, facts: int,
          key_concurrency: int) -> Optional[Dict[str, Any]]:
    if not args.c_bench:
        return None
    command = [args.c_bench, "w8", "--facts", str(facts), "--keys", str(args.keys),
               "--partitions", str(args.partitions), "--key-concurrency", str(key_concurrency),
               "--wait-ms", str(args.wait_ms), "--dir", scratch]
    if args.workers:
        command += ["--workers", str(args.workers)]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--facts", type=int, default=100000,
                        help="facts at key_concurrency 64 (and for the C ABI)")
    parser.add_argument("--facts-kc1", type=int, default=10000,
                        help="facts at key_concurrency 1 (16 lanes x 200/s: 3 s at 10 000)")
    parser.add_argument("--keys", type=int, default=10000)
    parser.add_argument("--partitions", type=int, default=16)
    parser.add_argument("--wait-ms", type=float, default=5)
    parser.add_argument("--workers", type=int, default=0, help="runtime workers (0: default)")
    parser.add_argument("--runs", type=int, default=1, help="measurements of each; the median")
    parser.add_argument("--c-bench", default="", help="path of c_abi_bench (built in bench/)")
    parser.add_argument("--thread-loop", action="store_true",
                        help="also the thread-based Runtime's async def subscriber")
    parser.add_argument("--dir", default=os.environ.get("TMPDIR", "/tmp"))
    args = parser.parse_args()
    scratch = tempfile.mkdtemp(prefix="w8-python-", dir=args.dir)
    results: Dict[str, Dict[str, Any]] = {}

    def median(name: str, run: Any) -> Optional[Dict[str, Any]]:
        runs = [r for r in (run() for _ in range(args.runs)) if r is not None]
        if not runs:
            return None
        runs.sort(key=lambda r: r["facts_per_s"])
        chosen = dict(runs[len(runs) // 2])
        chosen["runs_facts_per_s"] = [r["facts_per_s"] for r in runs]
        print(json.dumps(chosen), flush=True)
        results[name] = chosen
        return chosen

    try:
        median("c64", lambda: c_abi(args, scratch, args.facts, 64))
        median("alone", lambda: asyncio.run(asyncio_alone(args.facts, args.partitions * 64,
                                                          args.wait_ms / 1e3)))
        median("py1", lambda: measure(args, scratch, "python_asyncio", args.facts_kc1, 1))
        median("py64", lambda: measure(args, scratch, "python_asyncio", args.facts, 64))
        if args.thread_loop:
            median("thread64", lambda: measure(args, scratch, "python_loop_thread", args.facts,
                                               64))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    summary: Dict[str, Any] = {"workload": "W8-slow-subscriber-summary",
                               "machine": {"cores": os.cpu_count()}}
    if "py1" in results and "py64" in results:
        ratio = results["py64"]["facts_per_s"] / results["py1"]["facts_per_s"]
        summary["kc64_over_kc1"] = round(ratio, 1)
        summary["kc64_over_kc1_goal_20"] = ratio >= 20
    if "c64" in results and "py64" in results:
        share = results["py64"]["facts_per_s"] / results["c64"]["facts_per_s"]
        summary["python_over_c_abi"] = round(share, 3)
        summary["python_over_c_abi_goal_0.5"] = share >= 0.5
    if "alone" in results and "py64" in results:
        summary["python_over_asyncio_alone"] = round(
            results["py64"]["facts_per_s"] / results["alone"]["facts_per_s"], 3)
    print(json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
