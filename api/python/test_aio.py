"""Tests of asyncio on the caller's loop (wharf.AsyncEngine, AsyncTxn, AsyncRuntime): commits
awaited without blocking the loop, async def subscribers running as tasks of the test's own loop
with key_concurrency and per-key order, a raising coroutine counted as a failed delivery,
closing while deliveries are in flight, and bad input. Run by ctest (python_binding) with
WHARF_LIBRARY set to the built libwharf.so."""

import asyncio
import os
import shutil
import tempfile
import threading
import unittest
from typing import Awaitable, Callable, Dict, List, Optional, Tuple

import wharf

FAST_RETRY = "backoff_initial_ms=1;backoff_max_ms=5"


async def wait_until(condition: "Callable[[], Awaitable[bool]]", timeout_s: float = 10) -> None:
    """Polls `condition` on the loop (the deliveries run there meanwhile)."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not await condition():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.005)


class AsyncEngineTestCase(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="wharf-aio-")
        self.path = os.path.join(self.dir, "db")
        self.engine = await wharf.open_async(self.path, {"partitions": 4})
        await self.engine.declare_types("OrderPlaced")

    async def asyncTearDown(self) -> None:
        await self.engine.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    async def commit_facts(self, keys: List[str]) -> List[int]:
        ids = []
        async with self.engine.transaction() as txn:
            for i, key in enumerate(keys):
                txn.emit("OrderPlaced", f"{key}:{i}".encode(), key=key)
        first = txn.last_fact_id - len(keys) + 1
        ids = list(range(first, txn.last_fact_id + 1))
        return ids


class TestAsyncCommits(AsyncEngineTestCase):
    async def test_a_commit_is_awaited_while_the_loop_keeps_running(self) -> None:
        # A coroutine counting its turns runs during each commit: a commit that blocked the
        # loop (fdatasync included) would leave it no turn until it returned.
        turns = 0
        running = asyncio.Event()

        async def count_turns() -> None:
            nonlocal turns
            running.set()
            while True:
                turns += 1
                await asyncio.sleep(0)

        counter = asyncio.create_task(count_turns())
        await running.wait()
        try:
            turns_during: List[int] = []
            for i in range(5):
                txn = self.engine.transaction()
                txn.emit("OrderPlaced", b"p", key=f"k{i}")
                txn.put("orders", f"o{i}", b"v")
                before = turns
                last_id = await txn.commit()
                turns_during.append(turns - before)
                self.assertEqual(last_id, i + 1)
        finally:
            counter.cancel()
        self.assertTrue(all(turns > 0 for turns in turns_during), turns_during)
        self.assertEqual(await self.engine.get("orders", "o4"), b"v")

    async def test_commits_of_many_coroutines_at_once(self) -> None:
        async def one(i: int) -> int:
            async with self.engine.transaction() as txn:
                txn.emit("OrderPlaced", b"p", key=f"k{i}")
            return txn.last_fact_id

        ids = await asyncio.gather(*(one(i) for i in range(40)))
        self.assertEqual(sorted(ids), list(range(1, 41)))

    async def test_a_block_that_raises_aborts(self) -> None:
        with self.assertRaises(KeyError):
            async with self.engine.transaction() as txn:
                txn.put("orders", "o1", b"v")
                raise KeyError("no")
        self.assertIsNone(await self.engine.get("orders", "o1"))

    async def test_a_failed_commit_raises_from_the_await(self) -> None:
        txn = self.engine.transaction()
        txn.emit("OrderPlaced", b"p", key="k")
        self.engine.engine.close()  # the commit is refused: the engine is closed
        with self.assertRaises(wharf.Closed):
            await txn.commit()

    async def test_bad_input(self) -> None:
        with self.assertRaises(TypeError):
            wharf.AsyncEngine("not an engine")  # type: ignore[arg-type]
        with self.assertRaises(wharf.InvalidArgument) as caught:
            await wharf.open_async(os.path.join(self.dir, "other"), "x=1")
        self.assertIn("Engine(path=", str(caught.exception))
        txn = self.engine.transaction()
        with self.assertRaises(wharf.InvalidArgument) as caught:
            txn.emit("Nope", b"p", key="k")
        self.assertIn("Txn.emit(type='Nope')", str(caught.exception))
        with self.assertRaises(TypeError):
            txn.emit("OrderPlaced", "k", b"p")  # type: ignore[misc]
        txn.abort()
        runtime = wharf.AsyncRuntime(self.engine)
        with self.assertRaises(TypeError):
            runtime.subscribe("sync", ["OrderPlaced"], lambda fact: None)  # type: ignore
        with self.assertRaises(wharf.InvalidArgument):
            async def handler(fact: wharf.Fact) -> None:
                pass
            runtime.subscribe("bad", ["OrderPlaced"], handler, {"key_concurrency": 0})
        with self.assertRaises(TypeError):
            wharf.AsyncRuntime(object())  # type: ignore[arg-type]
        await runtime.close()


class TestAsyncRuntime(AsyncEngineTestCase):
    async def test_subscribers_run_on_the_callers_loop_with_key_concurrency_in_key_order(
            self) -> None:
        keys = [f"key-{i % 12}" for i in range(120)]
        ids = await self.commit_facts(keys)
        loop = asyncio.get_running_loop()
        seen: Dict[str, List[int]] = {}
        in_handler = 0
        most_in_handler = 0
        threads = set()
        loops = set()

        async with wharf.AsyncRuntime(self.engine, "workers=2") as runtime:
            @runtime.subscriber("mailer", ["OrderPlaced"], {"key_concurrency": 16})
            async def mail(fact: wharf.Fact) -> None:
                nonlocal in_handler, most_in_handler
                threads.add(threading.get_ident())
                loops.add(asyncio.get_running_loop())
                in_handler += 1
                most_in_handler = max(most_in_handler, in_handler)
                await asyncio.sleep(0.002)
                in_handler -= 1
                seen.setdefault(fact.key.decode(), []).append(fact.id)

            await runtime.drain()
            facts, wakeups = runtime.wakeups()
        self.assertEqual(loops, {loop})
        self.assertEqual(threads, {threading.get_ident()})
        self.assertEqual(sorted(i for key_ids in seen.values() for i in key_ids), ids)
        for key, key_ids in seen.items():
            self.assertEqual(key_ids, sorted(key_ids), key)
        # Facts of different keys overlapped (4 partitions x up to 16 keys each).
        self.assertGreater(most_in_handler, 1)
        self.assertEqual(facts, len(ids))
        self.assertLessEqual(wakeups, facts)
        # The cursor passed every fact: a second drain delivers nothing.
        async with wharf.AsyncRuntime(self.engine) as again:
            more: List[int] = []

            @again.subscriber("mailer", ["OrderPlaced"])
            async def mail_again(fact: wharf.Fact) -> None:
                more.append(fact.id)

            await again.drain()
        self.assertEqual(more, [])

    async def test_a_raising_coroutine_is_a_failed_delivery(self) -> None:
        [fact_id] = await self.commit_facts(["k"])
        attempts: List[Tuple[int, int]] = []

        async with wharf.AsyncRuntime(self.engine, "workers=1;" + FAST_RETRY) as runtime:
            @runtime.subscriber("hooks", ["OrderPlaced"], {"max_attempts": 2})
            async def hook(fact: wharf.Fact) -> Optional[wharf.Outcome]:
                attempts.append((fact.id, fact.attempt))
                await asyncio.sleep(0)
                raise ConnectionError(f"503 on attempt {fact.attempt}")

            await runtime.start()

            async def dead_lettered() -> bool:
                return await self.engine.dead_letters("hooks") != []

            await wait_until(dead_lettered)
            errors = runtime.errors
        self.assertEqual(attempts, [(fact_id, 1), (fact_id, 2)])
        self.assertEqual([str(e) for e in errors],
                         ["503 on attempt 1", "503 on attempt 2"])
        [letter] = await self.engine.dead_letters("hooks")
        self.assertEqual(letter.fact.id, fact_id)
        self.assertIn("ConnectionError: 503 on attempt 2", letter.reason)

    async def test_an_outcome_returned_by_the_coroutine_counts(self) -> None:
        ids = await self.commit_facts(["a", "b"])

        async with wharf.AsyncRuntime(self.engine, "workers=1") as runtime:
            @runtime.subscriber("picky", ["OrderPlaced"])
            async def picky(fact: wharf.Fact) -> wharf.Outcome:
                return wharf.Outcome.REJECTED if fact.key == b"a" else wharf.Outcome.HANDLED

            await runtime.drain()
        letters = await self.engine.dead_letters("picky")
        self.assertEqual([letter.fact.id for letter in letters], ids[:1])

    async def test_close_while_deliveries_are_in_flight(self) -> None:
        ids = await self.commit_facts(["a", "b", "c"])
        entered = asyncio.Event()
        cancelled: List[int] = []
        never = asyncio.Event()

        runtime = wharf.AsyncRuntime(self.engine, "workers=1")

        @runtime.subscriber("slow", ["OrderPlaced"], {"key_concurrency": 4})
        async def slow(fact: wharf.Fact) -> None:
            entered.set()
            try:
                await never.wait()
            except asyncio.CancelledError:
                cancelled.append(fact.id)
                raise

        await runtime.start()
        await asyncio.wait_for(entered.wait(), 10)
        await asyncio.wait_for(runtime.close(), 10)
        self.assertTrue(cancelled)
        self.assertLessEqual(set(cancelled), set(ids))
        await runtime.close()  # idempotent
        # None of them was done: the next run delivers them all again.
        delivered: List[int] = []
        async with wharf.AsyncRuntime(self.engine) as again:
            @again.subscriber("slow", ["OrderPlaced"])
            async def quick(fact: wharf.Fact) -> None:
                delivered.append(fact.id)

            await again.drain()
        self.assertEqual(sorted(delivered), ids)

    async def test_cancelling_a_task_from_inside_fails_the_delivery(self) -> None:
        [fact_id] = await self.commit_facts(["k"])
        attempts: List[int] = []

        async with wharf.AsyncRuntime(self.engine, "workers=1;" + FAST_RETRY) as runtime:
            @runtime.subscriber("once", ["OrderPlaced"])
            async def once(fact: wharf.Fact) -> None:
                attempts.append(fact.attempt)
                task = asyncio.current_task()
                if fact.attempt == 1 and task is not None:
                    task.cancel()
                    await asyncio.sleep(1)

            await runtime.start()

            async def retried() -> bool:
                return len(attempts) == 2 and await self.engine.cursors() != []

            await wait_until(retried)
        self.assertEqual(attempts, [1, 2])
        self.assertEqual(await self.engine.dead_letters("once"), [])
        self.assertEqual(fact_id, 1)


if __name__ == "__main__":
    unittest.main()
