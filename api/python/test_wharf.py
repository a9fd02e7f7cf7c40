"""Tests of the Python binding (run by ctest with WHARF_LIBRARY set to the built libwharf.so):
commit and read, exactly-once projection across a reopen, reactions, a subscriber, async
commits, cursors and dead letters, and the error cases mapped from the C status codes."""

import asyncio
import functools
import inspect
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import unittest

import wharf


class EngineTestCase(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="wharf-py-")
        self.path = os.path.join(self.dir, "db")
        self.engine = self.open()

    def tearDown(self):
        self.engine.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def open(self):
        engine = wharf.Engine(self.path, {"partitions": 4})
        engine.declare_types("OrderPlaced", "OrderShipped")
        return engine

    def reopen(self):
        self.engine.close()
        self.engine = self.open()

    def commit(self, type_, key, payload):
        with self.engine.begin() as txn:
            txn.emit(type_, payload, key=key)
        return txn.last_fact_id


class TestBasics(unittest.TestCase):
    def test_version(self):
        self.assertRegex(wharf.version(), r"^\d+\.\d+\.\d+$")
        self.assertTrue(os.path.exists(wharf.library_path) or "/" not in wharf.library_path)


class TestCommitAndRead(EngineTestCase):
    def test_second_engine_is_refused_with_a_subcode(self):
        with self.assertRaises(wharf.WharfError) as caught:
            wharf.Engine(self.path, {"partitions": 4})
        self.assertEqual(caught.exception.subcode, wharf.SUBCODE_DATABASE_LOCKED)

    def test_commit_and_read(self):
        with self.engine.begin() as txn:
            txn.put("orders", "o-1", b'{"cents": 1250}')
            txn.put("orders", b"o-2", "text is encoded as UTF-8")
            txn.emit("OrderPlaced", b"o-1", key="alice")
            txn.emit("OrderPlaced", b"o-2")  # unkeyed
        self.assertEqual(txn.last_fact_id, 2)
        self.assertGreaterEqual(self.engine.durable_lsn, 2)
        self.assertEqual(self.engine.get("orders", "o-1"), b'{"cents": 1250}')
        self.assertEqual(self.engine.get("orders", "o-2"), b"text is encoded as UTF-8")
        self.assertIsNone(self.engine.get("orders", "o-3"))
        self.assertEqual(self.engine.get("orders", "o-3", default=b"?"), b"?")

        facts = self.engine.read_facts(self.engine.partition_of("alice"))
        self.assertIn(b"o-1", [f.payload for f in facts])
        fact = next(f for f in facts if f.payload == b"o-1")
        self.assertEqual((fact.type, fact.key, fact.depth, fact.source), ("OrderPlaced", b"alice",
                                                                          0, ""))

        with self.engine.begin() as txn:
            txn.delete("orders", "o-2")
        self.assertIsNone(self.engine.get("orders", "o-2"))

        self.reopen()
        self.assertEqual(self.engine.get("orders", "o-1"), b'{"cents": 1250}')

    def test_txn_aborts_on_exception(self):
        with self.assertRaises(RuntimeError):
            with self.engine.begin() as txn:
                txn.put("orders", "o-9", b"x")
                txn.emit("OrderPlaced", b"o-9")
                raise RuntimeError("changed my mind")
        self.assertIsNone(self.engine.get("orders", "o-9"))
        self.assertEqual(self.engine.last_lsn, 0)

    def test_headers_and_deliver_at(self):
        self.engine.declare_type("OrderPlaced", 3)  # v=3 may be emitted from now on
        with self.engine.begin() as txn:
            txn.emit("OrderPlaced", b"p", key="k", headers=[("trace-id", b"abc")], v=3)
        (fact,) = self.engine.read_facts(self.engine.partition_of("k"))
        self.assertEqual(fact.headers, [("trace-id", b"abc")])
        self.assertEqual(fact.version, 3)

        with self.engine.begin() as txn:
            txn.emit("OrderPlaced", b"later", key="k", deliver_at_ms=1)  # due already
        scheduled_id = txn.last_fact_id
        runtime = wharf.Runtime(self.engine, "workers=0")
        self.assertEqual(runtime.release_timers(), 1)
        runtime.close()
        facts = self.engine.read_facts(self.engine.partition_of("k"))
        self.assertEqual([f.payload for f in facts], [b"p", b"later"])
        # Released under a new id, carrying the one the commit returned.
        self.assertEqual(facts[0].scheduled_id, 0)
        self.assertGreater(facts[1].id, scheduled_id)
        self.assertEqual(facts[1].scheduled_id, scheduled_id)

    def test_commit_async(self):
        done = threading.Event()
        result = {}

        def on_commit(error, first_id, last_id):
            result.update(error=error, first=first_id, last=last_id,
                          thread=threading.get_ident())
            done.set()

        txn = self.engine.begin()
        txn.emit("OrderPlaced", b"a", key="k")
        txn.emit("OrderPlaced", b"b", key="k")
        txn.commit_async(on_commit)
        self.assertTrue(done.wait(30))
        self.assertIsNone(result["error"])
        self.assertEqual((result["first"], result["last"]), (1, 2))
        self.assertNotEqual(result["thread"], threading.get_ident())


class TestMetrics(EngineTestCase):
    def test_samples_and_text(self):
        for i in range(3):
            self.commit("OrderPlaced", f"k{i}", b"{}")
        samples = self.engine.metrics()
        self.assertEqual(samples["wharf_durable_lsn"], 3)
        self.assertIn("wharf_commit_duration_seconds_count", samples)
        self.assertTrue(any(k.startswith('wharf_commit_duration_seconds_bucket{le="') for k in samples))
        text = self.engine.metrics_text()
        self.assertIn("# TYPE wharf_durable_lsn gauge\nwharf_durable_lsn 3\n", text)
        # The text's sample lines are the samples, one for one.
        lines = [line for line in text.splitlines() if line and not line.startswith("#")]
        self.assertEqual(len(lines), len(samples))

    def test_closed_engine(self):
        self.engine.close()
        with self.assertRaises(wharf.WharfError):
            self.engine.metrics()
        with self.assertRaises(wharf.WharfError):
            self.engine.metrics_text()
        self.engine = self.open()


class TestRuntime(EngineTestCase):
    def test_projection_exactly_once_across_reopen(self):
        for i in range(10):
            self.commit("OrderPlaced", f"c-{i % 3}", f"o-{i}")
        calls = []

        def make_runtime():
            runtime = wharf.Runtime(self.engine, {"workers": 2})

            @runtime.projection("order-index", ["OrderPlaced"], options="batch_facts=4")
            def index(fact, effects):
                calls.append(fact.id)
                effects.put("order-index", fact.payload, fact.key)

            return runtime

        runtime = make_runtime()
        runtime.drain()
        runtime.drain()  # nothing new: nothing delivered twice
        runtime.close()
        self.assertEqual(sorted(calls), list(range(1, 11)))
        self.assertEqual(self.engine.get("order-index", "o-7"), b"c-1")

        self.reopen()
        self.commit("OrderPlaced", "c-0", "o-10")
        runtime = make_runtime()
        runtime.drain()
        runtime.close()
        self.assertEqual(wharf._callbacks, {})  # the handlers were released with the runtime
        self.assertEqual(sorted(calls), list(range(1, 12)))  # only the new fact, once
        self.assertEqual(self.engine.get("order-index", "o-10"), b"c-0")
        self.assertEqual(self.engine.cursor("order-index", self.engine.partition_of("c-0")), 11)

    def test_reaction_emits_and_failures_become_dead_letters(self):
        self.commit("OrderPlaced", "alice", "o-1")
        self.commit("OrderPlaced", "bob", "broken")
        shipped = []
        with wharf.Runtime(self.engine, "workers=0") as runtime:
            @runtime.reaction("shipper", ["OrderPlaced"])
            def ship(fact, effects):
                if fact.payload == b"broken":
                    raise ValueError("cannot ship")
                effects.emit("OrderShipped", fact.payload, key=fact.key)

            @runtime.projection("shipments", ["OrderShipped"])
            def record(fact, effects):
                shipped.append((fact.payload, fact.depth, fact.source))
                effects.put("shipped", fact.payload, b"1")

            runtime.drain()
            self.assertEqual(len(runtime.errors), 1)
            self.assertIsInstance(runtime.errors[0], ValueError)
        self.assertEqual(shipped, [(b"o-1", 1, "shipper")])
        (letter,) = self.engine.dead_letters("shipper")
        # The exception's text is the failure's reason.
        self.assertEqual(letter.reason, "handler-failed: ValueError: cannot ship")
        self.assertEqual(letter.fact.payload, b"broken")
        self.assertEqual(letter.attempt, 1)

    def test_relay_to_redis(self):
        # A real redis-server on a free port, stopped by pid whatever happens.
        import socket
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        redis_dir = os.path.join(self.dir, "redis")
        os.mkdir(redis_dir)
        server = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                                   "--dir", redis_dir, "--save", "", "--appendonly", "yes",
                                   "--appendfsync", "always"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.addCleanup(server.wait)
        self.addCleanup(server.kill)
        for _ in range(300):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        runtime = wharf.Runtime(self.engine, "workers=1")
        with self.assertRaises(wharf.InvalidArgument) as bad:
            runtime.relay("to-redis", "OrderPlaced", {"kind": "redis_streams", "stream": "one"})
        self.assertIn("stream='one'", str(bad.exception))
        runtime.relay("to-redis", "OrderPlaced",
                      {"kind": "redis_streams", "url": f"redis://127.0.0.1:{port}",
                       "stream": "orders:{partition}", "ordering": "partition"})
        for i in range(10):
            self.commit("OrderPlaced", "customer-1", f"order {i}")
        runtime.drain()
        runtime.close()
        # One key: one partition, one stream, every fact once.
        stream = f"orders:{self.engine.partition_of('customer-1')}"
        out = subprocess.run(["redis-cli", "-p", str(port), "XLEN", stream],
                             capture_output=True, text=True, check=True).stdout
        self.assertEqual(int(out.strip()), 10)
        # The same relay declared in a YAML runtime file alone: config=FILE registers it.
        config = os.path.join(self.dir, "relay.yaml")
        with open(config, "w") as f:
            f.write("pools: {p: {workers: 1}}\n"
                    "runtime:\n  outboxes:\n    op:\n      in:\n"
                    "        delivery: at_least_once\n"
                    "        partitioning: {kind: none}\n"
                    "        ordering: global\n"
                    "        dispatch: {pool: p, member_assignment: {kind: round_robin}}\n"
                    "consumers:\n"
                    "  - {id: yaml-to-redis, kind: relay, input: op/in, types: [OrderPlaced],\n"
                    f"     relay: {{kind: redis_streams, url: 'redis://127.0.0.1:{port}',\n"
                    "             stream: yaml-orders}}\n")
        runtime = wharf.Runtime(self.engine, f"config={config}")
        runtime.drain()
        runtime.close()
        out = subprocess.run(["redis-cli", "-p", str(port), "XLEN", "yaml-orders"],
                             capture_output=True, text=True, check=True).stdout
        self.assertEqual(int(out.strip()), 10)

    def test_subscriber_at_least_once(self):
        delivered = []
        attempts = {"flaky": 0}
        traces = []
        got_all = threading.Event()

        def trace(level, name, consumer, fact_id, reason, attempt):
            traces.append((name, consumer, attempt))

        runtime = wharf.Runtime(self.engine, "workers=2;backoff_initial_ms=1;backoff_max_ms=5",
                                trace=trace)

        def mailer(fact):
            if fact.payload == b"flaky" and attempts["flaky"] < 2:
                attempts["flaky"] += 1
                return wharf.Outcome.FAILED if attempts["flaky"] == 1 else 0 / 0
            delivered.append(fact.payload)
            if len(delivered) == 3:
                got_all.set()
            return wharf.Outcome.HANDLED

        runtime.subscribe("mailer", "OrderPlaced", mailer)
        runtime.start()
        for payload in ("one", "flaky", "two"):
            self.commit("OrderPlaced", "same-customer", payload)
        self.assertTrue(got_all.wait(30), delivered)
        runtime.stop()
        runtime.close()
        self.assertEqual(delivered, [b"one", b"flaky", b"two"])
        self.assertEqual(attempts["flaky"], 2)
        # Each failure's trace says which attempt it was.
        self.assertEqual(traces.count(("subscriber-failed", "mailer", 1)), 1)
        self.assertEqual(traces.count(("subscriber-failed", "mailer", 2)), 1)

    def test_tap(self):
        seen = []
        event = threading.Event()
        runtime = wharf.Runtime(self.engine, "workers=1")

        @runtime.tapper("live", ["OrderShipped"])
        def live(fact):
            seen.append(fact.payload)
            event.set()

        runtime.start()
        self.commit("OrderShipped", "k", "s-1")
        self.assertTrue(event.wait(30))
        runtime.close()
        self.assertEqual(seen, [b"s-1"])

    def test_cursors(self):
        last = self.commit("OrderPlaced", "k", "o-1")
        with wharf.Runtime(self.engine, "workers=0") as runtime:
            runtime.project("store-requests", ["OrderPlaced"], lambda fact, effects: None)
            runtime.drain()
        partition = self.engine.partition_of("k")
        self.engine.copy_cursor("store-requests", "store-reviews")
        self.assertEqual(self.engine.cursor("store-reviews", partition), last)
        with self.assertRaises(wharf.InvalidArgument):
            self.engine.copy_cursor("store-requests", "store-reviews")
        self.engine.copy_cursor("store-requests", "store-reviews", force=True)
        self.engine.set_cursor("store-reviews", 0)
        self.assertEqual(self.engine.cursor("store-reviews", partition), 0)
        names = {c.consumer for c in self.engine.cursors()}
        self.assertEqual(names, {"store-requests", "store-reviews"})
        self.engine.delete_cursor("store-reviews")
        with self.assertRaises(wharf.NotFound):
            self.engine.delete_cursor("store-reviews")


def wait_until(predicate, timeout_s=30.0):
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def event_loop_threads():
    return [t for t in threading.enumerate() if t.name.startswith("wharf-asyncio")]


class TestAsyncAndAttempts(EngineTestCase):
    """async def subscribers (awaited on the runtime's event loop), key_concurrency, fact.attempt,
    max_attempts, handler_timeout_ms, and the consumer options' errors."""

    FAST_RETRY = "backoff_initial_ms=1;backoff_max_ms=5"

    def keys_of_one_partition(self, count):
        partition = self.engine.partition_of("key-0")
        keys = [k for k in (f"key-{i}" for i in range(10 * count))
                if self.engine.partition_of(k) == partition]
        self.assertGreaterEqual(len(keys), count)
        return partition, keys[:count]

    def test_async_handlers_overlap_across_keys_in_key_order(self):
        partition, keys = self.keys_of_one_partition(24)
        with self.engine.begin() as txn:
            for round_ in range(4):
                for key in keys:
                    txn.emit("OrderPlaced", f"{key}/{round_}", key=key)
        last = txn.last_fact_id
        lock = threading.Lock()
        in_flight, by_key, order, threads = set(), {}, {}, set()
        peak = [0]
        overlaps = []

        runtime = wharf.Runtime(self.engine, {"workers": 2})

        @runtime.subscriber("webhooks", "OrderPlaced", {"key_concurrency": 16})
        async def webhook(fact):
            with lock:
                if fact.key in in_flight:
                    overlaps.append(fact.id)  # two facts of one key in the handler at once
                in_flight.add(fact.key)
                peak[0] = max(peak[0], len(in_flight))
                threads.add(threading.current_thread().name)
            await asyncio.sleep(0.05)
            with lock:
                in_flight.discard(fact.key)
                order.setdefault(fact.key, []).append(fact.id)
                by_key.setdefault(fact.key, []).append(int(fact.payload.split(b"/")[1]))

        runtime.start()
        self.assertTrue(wait_until(lambda: self.engine.cursor("webhooks", partition) == last))
        self.assertEqual(len(event_loop_threads()), 1)
        runtime.close()
        self.assertEqual(event_loop_threads(), [])  # stopped and joined
        self.assertEqual(runtime.errors, [])
        self.assertEqual(overlaps, [])
        # Several keys were in the handler at once (16 at most; each call sleeps 50 ms)...
        self.assertGreaterEqual(peak[0], 8)
        self.assertLessEqual(peak[0], 16)
        # ...each key's facts in id order, each once, on the loop's thread.
        self.assertEqual(by_key, {key.encode(): [0, 1, 2, 3] for key in keys})
        self.assertTrue(all(ids == sorted(ids) for ids in order.values()))
        self.assertEqual(len(threads), 1)
        self.assertTrue(next(iter(threads)).startswith("wharf-asyncio"), threads)

    def test_drain_awaits_async_handlers_and_outcomes_map_like_sync_ones(self):
        partition, keys = self.keys_of_one_partition(4)
        for key, payload in zip(keys, ["handled", "none", "rejected", "true"]):
            self.commit("OrderPlaced", key, payload)
        results = {"handled": wharf.Outcome.HANDLED, "none": None,
                   "rejected": wharf.Outcome.REJECTED, "true": True}
        seen = []

        async def hook(fact):
            await asyncio.sleep(0)
            seen.append(fact.payload)
            return results[fact.payload.decode()]

        class Counter:
            calls = 0

            async def __call__(self, fact, step):
                await asyncio.sleep(0)
                self.calls += step

        counter = Counter()
        with wharf.Runtime(self.engine, "workers=0") as runtime:
            runtime.subscribe("hooks", ["OrderPlaced"], hook)  # key_concurrency 1: one at a time
            # Awaited too: an object whose __call__ is async def, through functools.partial.
            runtime.subscribe("counter", ["OrderPlaced"], functools.partial(counter, step=10))
            runtime.drain()
            self.assertEqual(counter.calls, 40)
            self.assertEqual(len(event_loop_threads()), 1)
            runtime.stop()
            self.assertEqual(event_loop_threads(), [])
        self.assertEqual(seen, [b"handled", b"none", b"rejected", b"true"])
        (letter,) = self.engine.dead_letters("hooks")
        self.assertEqual((letter.fact.payload, letter.reason), (b"rejected",
                                                                "handler-rejected: rejected"))
        self.assertEqual(self.engine.cursor("hooks", partition), 4)

    def test_async_exception_reaches_trace_and_dead_letter_after_max_attempts(self):
        traces = []

        def trace(level, name, consumer, fact_id, reason, attempt):
            traces.append((name, fact_id, reason, attempt))

        bad = self.commit("OrderPlaced", "k1", "bad")
        good = self.commit("OrderPlaced", "k2", "good")
        attempts = []
        runtime = wharf.Runtime(self.engine, "workers=1;" + self.FAST_RETRY, trace=trace)

        @runtime.subscriber("hooks", "OrderPlaced", {"max_attempts": 2, "key_concurrency": 4})
        async def hook(fact):
            attempts.append((fact.id, fact.attempt))
            await asyncio.sleep(0.001)
            if fact.payload == b"bad":
                raise ConnectionError(f"webhook answered 503 on attempt {fact.attempt}")

        runtime.start()
        self.assertTrue(wait_until(lambda: self.engine.dead_letters("hooks") != []))
        runtime.close()
        self.assertEqual(sorted(attempts), [(bad, 1), (bad, 2), (good, 1)])
        self.assertIn(("subscriber-failed", bad,
                       "ConnectionError: webhook answered 503 on attempt 1", 1), traces)
        (letter,) = self.engine.dead_letters("hooks")
        self.assertEqual((letter.fact.id, letter.attempt, letter.fact.attempt), (bad, 2, 2))
        self.assertTrue(letter.reason.startswith("attempts-exhausted: "), letter.reason)
        self.assertIn("ConnectionError: webhook answered 503 on attempt 2", letter.reason)
        self.assertEqual([type(e) for e in runtime.errors], [ConnectionError, ConnectionError])

    def test_sync_exception_and_attempts_counting_with_key_concurrency(self):
        traces = []

        def trace(level, name, consumer, fact_id, reason, attempt):
            traces.append((name, fact_id, reason, attempt))

        _, keys = self.keys_of_one_partition(2)
        poison = self.commit("OrderPlaced", keys[0], "poison")
        self.commit("OrderPlaced", keys[1], "fine")
        attempts = []
        runtime = wharf.Runtime(self.engine, "workers=1;" + self.FAST_RETRY, trace=trace)

        def mailer(fact):  # synchronous, with key_concurrency > 1: just an option
            attempts.append((fact.payload, fact.attempt))
            if fact.payload == b"poison":
                raise RuntimeError(f"smtp refused (attempt {fact.attempt})")

        runtime.subscribe("mailer", "OrderPlaced", mailer, "key_concurrency=4;max_attempts=3")
        runtime.start()
        self.assertTrue(wait_until(lambda: self.engine.dead_letters("mailer") != []))
        runtime.close()
        self.assertEqual(sorted(attempts), [(b"fine", 1), (b"poison", 1), (b"poison", 2),
                                            (b"poison", 3)])
        for attempt in (1, 2):
            self.assertIn(("subscriber-failed", poison,
                           f"RuntimeError: smtp refused (attempt {attempt})", attempt), traces)
        (letter,) = self.engine.dead_letters("mailer")
        self.assertEqual((letter.fact.id, letter.attempt), (poison, 3))
        self.assertIn("RuntimeError: smtp refused (attempt 3)", letter.reason)

    def test_attempt_in_projections_and_reactions(self):
        self.commit("OrderPlaced", "k", "o-1")
        seen = []

        def flaky(kind):
            def handler(fact, effects):
                seen.append((kind, fact.type, fact.attempt))
                return wharf.Outcome.RETRY if fact.attempt < 3 else None
            return handler

        with wharf.Runtime(self.engine, "workers=1;" + self.FAST_RETRY) as runtime:
            runtime.react("shipper", ["OrderPlaced"], flaky("reaction"))
            runtime.project("index", ["OrderPlaced"], flaky("projection"))
            runtime.start()
            self.assertTrue(wait_until(lambda: len(seen) == 6))
        self.assertEqual(sorted(seen), [(kind, "OrderPlaced", attempt)
                                        for kind in ("projection", "reaction")
                                        for attempt in (1, 2, 3)])
        # Outside a handler a fact carries no attempt.
        self.assertEqual([f.attempt for f in self.engine.read_facts(self.engine.partition_of("k"))],
                         [0])

    def test_handler_timeout_delivers_again_and_the_late_done_is_refused_quietly(self):
        traces = []
        fact_id = self.commit("OrderPlaced", "k", "slow")
        finished = []
        # An exception in a future's done-callback or on the loop is logged, not raised: watch.
        logged = []
        catcher = logging.Handler()
        catcher.emit = logged.append
        for name in ("concurrent.futures", "asyncio"):
            logging.getLogger(name).addHandler(catcher)
            self.addCleanup(logging.getLogger(name).removeHandler, catcher)

        async def slow_once(fact):
            if fact.attempt == 1:
                await asyncio.sleep(1.0)  # beyond handler_timeout_ms: its done is refused
            finished.append(fact.attempt)

        runtime = wharf.Runtime(self.engine, "workers=1;" + self.FAST_RETRY,
                                trace=lambda level, name, consumer, fact_id, reason, attempt:
                                traces.append((name, fact_id, attempt)))
        runtime.subscribe("hooks", "OrderPlaced", slow_once, {"handler_timeout_ms": 200})
        runtime.start()
        partition = self.engine.partition_of("k")
        self.assertTrue(wait_until(lambda: self.engine.cursor("hooks", partition) == fact_id))
        self.assertTrue(wait_until(lambda: 1 in finished))  # the late one ended too
        runtime.close()
        self.assertIn(2, finished)
        self.assertIn(("handler-timeout", fact_id, 1), traces)
        self.assertEqual(runtime.errors, [])
        self.assertEqual(logged, [])

    def test_stop_cancels_coroutines_in_flight_and_they_are_delivered_again(self):
        fact_id = self.commit("OrderPlaced", "k", "x")
        started, cancelled = threading.Event(), threading.Event()

        async def forever(fact):
            started.set()
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                cancelled.set()
                raise

        runtime = wharf.Runtime(self.engine, "workers=1")
        runtime.subscribe("hooks", "OrderPlaced", forever)
        runtime.start()
        self.assertTrue(started.wait(30))
        begin = time.monotonic()
        runtime.close()
        self.assertLess(time.monotonic() - begin, 5)
        self.assertTrue(cancelled.is_set())
        self.assertEqual(event_loop_threads(), [])
        self.assertEqual(self.engine.cursor("hooks", self.engine.partition_of("k")), 0)
        delivered = []

        async def record(fact):
            delivered.append((fact.id, fact.attempt))

        with wharf.Runtime(self.engine, "workers=0") as runtime:
            runtime.subscribe("hooks", "OrderPlaced", record)
            runtime.drain()
        self.assertEqual(delivered, [(fact_id, 1)])  # at least once: again, after the stop

    def test_closing_the_engine_stops_the_event_loop(self):
        self.commit("OrderPlaced", "k", "x")

        async def hook(fact):
            pass

        runtime = wharf.Runtime(self.engine, "workers=0")
        runtime.subscribe("hooks", "OrderPlaced", hook)
        runtime.drain()
        self.assertEqual(len(event_loop_threads()), 1)
        self.engine.close()  # stops the runtime: its loop has nothing left to complete
        self.assertEqual(event_loop_threads(), [])
        with self.assertRaises(wharf.Closed):
            runtime.drain()
        runtime.close()
        self.engine = self.open()

    def test_coroutines_cancelled_before_their_first_step_are_closed(self):
        # The loop stopping right after a delivery was handed to it cancels the task before it
        # ran: the handler's coroutine, never started, is closed (no "never awaited" warning).
        async def handler_body():
            pass

        handler = wharf._Handler(lambda fact: None, "h", wharf._RuntimeShared(10))
        states = []
        for _ in range(20):
            loop = wharf._EventLoop()
            inner = handler_body()
            future = loop.submit(wharf._settle(handler, inner))
            # Delivery 0 was never issued: wharf_delivery_done refuses it, quietly.
            future.add_done_callback(lambda done, inner=inner: wharf._complete(0, inner, done))
            loop.stop()
            self.assertTrue(future.done())
            states.append((future.cancelled(), inspect.getcoroutinestate(inner)))
        self.assertIn((True, inspect.CORO_CLOSED), states)  # the case happened at least once
        self.assertEqual({state for _, state in states}, {inspect.CORO_CLOSED})
        self.assertEqual(event_loop_threads(), [])

    def test_async_kinds_refused_and_awaitables_from_sync_handlers_fail(self):
        self.commit("OrderPlaced", "k", "x")
        traces = []

        async def nothing(*args):
            pass

        with wharf.Runtime(self.engine, "workers=1;" + self.FAST_RETRY,
                           trace=lambda level, name, consumer, fact_id, reason:
                           traces.append((name, reason))) as runtime:
            for register in (runtime.project, runtime.react, runtime.tap):
                with self.assertRaises(TypeError) as caught:
                    register("c", ["OrderPlaced"], nothing)
                self.assertIn("async def", str(caught.exception))
            # A lambda around an async def looks synchronous: its coroutine is refused, closed.
            runtime.subscribe("wrapped", "OrderPlaced", lambda fact: nothing(fact),
                              {"max_attempts": 1})
            runtime.start()
            self.assertTrue(wait_until(lambda: self.engine.dead_letters("wrapped") != []))
        (letter,) = self.engine.dead_letters("wrapped")
        self.assertIn("subscriber-failed: TypeError: the handler returned <coroutine",
                      letter.reason)
        self.assertIn(("attempts-exhausted", letter.reason[len("attempts-exhausted: "):]),
                      traces)

    def test_bad_consumer_options_name_the_value(self):
        async def hook(fact):
            pass

        def sync_hook(fact):
            pass

        with wharf.Runtime(self.engine, "workers=0") as runtime:
            for fn in (hook, sync_hook):
                for options, needle in [({"key_concurrency": 0}, "key_concurrency 0"),
                                        ({"key_concurrency": 5000}, "key_concurrency"),
                                        ("max_attempts=x", "max_attempts"),
                                        ({"handler_timeout_ms": 0}, "handler_timeout_ms"),
                                        ({"key_concurrency": 8, "key_window_facts": 4},
                                         "key_window_facts"),
                                        ({"key_concurrency": 2, "ordering": "global"},
                                         "global")]:
                    with self.assertRaises(wharf.InvalidArgument, msg=repr(options)) as caught:
                        runtime.subscribe("hooks", "OrderPlaced", fn, options)
                    self.assertIn(needle, str(caught.exception))
            self.assertEqual(runtime._handler_keys, [])
        self.assertEqual(wharf._callbacks, {})  # refused registrations released their handlers


class TestAdminOps(EngineTestCase):
    def dead_letters_of_shipper(self, count):
        for i in range(count):
            self.commit("OrderPlaced", f"k{i}", "broken")
        with wharf.Runtime(self.engine, "workers=0") as runtime:
            @runtime.reaction("shipper", ["OrderPlaced"])
            def ship(fact, effects):
                raise ValueError("cannot ship")

            runtime.drain()
        return sorted(letter.fact.id for letter in self.engine.dead_letters("shipper"))

    def test_purge_dead_letters(self):
        ids = self.dead_letters_of_shipper(3)
        self.assertEqual(len(ids), 3)
        with self.assertRaises(wharf.NotFound) as caught:
            self.engine.purge_dead_letters("shipper", [ids[-1] + 100])
        self.assertIn(str(ids[-1] + 100), str(caught.exception))
        self.assertEqual(len(self.engine.dead_letters("shipper")), 3)  # nothing changed
        self.assertEqual(self.engine.purge_dead_letters("shipper", [ids[0]]), 1)
        self.assertEqual(self.engine.purge_dead_letters("shipper"), 2)
        self.assertEqual(self.engine.dead_letters("shipper"), [])
        with self.assertRaises(wharf.NotFound):
            self.engine.purge_dead_letters("shipper")
        with self.assertRaises(wharf.InvalidArgument) as caught:
            self.engine.purge_dead_letters("")
        self.assertIn("consumer", str(caught.exception))
        with self.assertRaises(wharf.InvalidArgument):
            self.engine.purge_dead_letters("shipper", [-1])

    def test_release_lease(self):
        # A started runtime takes the mailer's lease to deliver, and releases it when it stops.
        delivered = threading.Event()
        runtime = wharf.Runtime(self.engine, "workers=1")

        def mailer(fact):
            delivered.set()
            return wharf.Outcome.HANDLED

        runtime.subscribe("shipper", "OrderPlaced", mailer)
        runtime.start()
        self.commit("OrderPlaced", "k", "o-1")
        self.assertTrue(delivered.wait(60))  # a bound for a hung runtime only
        runtime.stop()
        runtime.close()
        self.engine.release_lease("shipper")
        with self.assertRaises(wharf.NotFound) as caught:
            self.engine.release_lease("shipper")
        self.assertIn("shipper", str(caught.exception))
        with self.assertRaises(wharf.InvalidArgument):
            self.engine.release_lease("")


class TestAdminApi(EngineTestCase):
    """retry_dead_letters, leases, retention_losses, trim and stat: each over the C ABI."""

    def dead_letters_of_shipper(self, count):
        for i in range(count):
            self.commit("OrderPlaced", f"k{i}", f"broken-{i}")
        with wharf.Runtime(self.engine, "workers=0") as runtime:
            @runtime.reaction("shipper", ["OrderPlaced"])
            def ship(fact, effects):
                raise ValueError("cannot ship")

            runtime.drain()
        return sorted(letter.fact.id for letter in self.engine.dead_letters("shipper"))

    def test_retry_dead_letters(self):
        ids = self.dead_letters_of_shipper(2)
        with self.assertRaises(wharf.NotFound) as caught:
            self.engine.retry_dead_letters("shipper", [ids[-1] + 100])
        self.assertIn(str(ids[-1] + 100), str(caught.exception))
        (retried,) = self.engine.retry_dead_letters("shipper", [ids[1]])
        self.assertIsInstance(retried, wharf.RetriedLetter)
        self.assertEqual(retried.dead_fact_id, ids[1])
        self.assertGreater(retried.new_fact_id, ids[1])
        partition = self.engine.partition_of("k1")
        (fact,) = self.engine.read_facts(partition, retried.new_fact_id, 1)
        self.assertEqual(fact.payload, b"broken-1")
        self.assertIn(("wharf-retry-for", b"shipper"), fact.headers)
        self.assertEqual([l.fact.id for l in self.engine.dead_letters("shipper")], [ids[0]])
        self.assertEqual(len(self.engine.retry_dead_letters("shipper")), 1)
        self.assertEqual(self.engine.dead_letters("shipper"), [])
        with self.assertRaises(wharf.NotFound):
            self.engine.retry_dead_letters("shipper")
        with self.assertRaises(wharf.InvalidArgument) as caught:
            self.engine.retry_dead_letters("")
        self.assertIn("consumer", str(caught.exception))
        with self.assertRaises(wharf.InvalidArgument):
            self.engine.retry_dead_letters("shipper", [-1])
        with self.assertRaises(wharf.InvalidArgument):
            self.engine.retry_dead_letters("ship\0per")

    def test_leases(self):
        self.assertEqual(self.engine.leases(), [])
        delivered = threading.Event()
        runtime = wharf.Runtime(self.engine, "workers=1")
        runtime.subscribe("mailer", "OrderPlaced", lambda fact: delivered.set())
        runtime.start()
        self.commit("OrderPlaced", "k", "o-1")
        self.assertTrue(delivered.wait(60))  # a bound for a hung runtime only
        runtime.stop()
        runtime.close()
        (lease,) = self.engine.leases()
        self.assertIsInstance(lease, wharf.LeaseInfo)
        self.assertEqual(lease.consumer, "mailer")
        self.assertEqual(lease.owner, "")  # released when the runtime stopped
        self.assertGreaterEqual(lease.epoch, 1)
        self.engine.release_lease("mailer")
        self.assertEqual(self.engine.leases(), [])

    def test_retention_losses_without_bounds(self):
        # Without a retention bound nothing is ever lost (records are made by bounded retention).
        self.assertEqual(self.engine.retention_losses(), [])
        self.assertEqual(self.engine.stat().consumers, [])

    def test_trim(self):
        first = self.commit("OrderPlaced", "a", "1")
        second = self.commit("OrderPlaced", "b", "2")
        self.commit("OrderPlaced", "c", "3")
        report = self.engine.trim(dry_run=True)
        self.assertEqual((report.consumer_count, report.fact_count), (0, 0))
        self.engine.set_cursor("reader", second)
        report = self.engine.trim(dry_run=True)
        self.assertIsInstance(report, wharf.TrimReport)
        self.assertEqual(report.consumer_count, 1)
        self.assertEqual(report.fact_count, 2)
        self.assertGreater(report.bytes, 0)
        self.assertEqual([p.partition for p in report.partitions], [0, 1, 2, 3])
        self.assertEqual(sum(p.fact_count for p in report.partitions), 2)
        self.assertEqual(self.engine.stat().fact_count, 3)  # a dry run changes nothing
        self.assertEqual(self.engine.trim().fact_count, 2)
        self.assertEqual(self.engine.stat().fact_count, 1)
        remaining = self.engine.read_facts(self.engine.partition_of("a"), 0, 10)
        self.assertNotIn(first, [fact.id for fact in remaining])
        with self.assertRaises(wharf.InvalidArgument):
            self.engine.trim(dry_run="yes")

    def test_stat(self):
        self.commit("OrderPlaced", "a", "1")
        delivered = []
        with wharf.Runtime(self.engine, "workers=0") as runtime:
            runtime.subscribe("mailer", "OrderPlaced", lambda fact: delivered.append(fact.id))
            runtime.drain()
        self.commit("OrderShipped", "b", "2")  # the mailer does not take it
        third = self.commit("OrderPlaced", "c", "3")
        stat = self.engine.stat()
        self.assertIsInstance(stat, wharf.StatSnapshot)
        self.assertEqual(stat.durable_lsn, self.engine.durable_lsn)
        self.assertEqual(stat.last_lsn, self.engine.last_lsn)
        self.assertGreaterEqual(stat.durable_lsn, third)
        self.assertEqual(stat.fact_count, 3)
        self.assertEqual(len(stat.partitions), 4)
        self.assertEqual(sum(p.fact_count for p in stat.partitions), 3)
        self.assertEqual(sum(p.bytes for p in stat.partitions), stat.fact_bytes)
        self.assertEqual((stat.dead_letter_count, stat.timer_count), (0, 0))
        (mailer,) = stat.consumers
        self.assertEqual(mailer.consumer, "mailer")
        self.assertTrue(mailer.registered)
        self.assertEqual(mailer.types, ["OrderPlaced"])
        self.assertEqual(mailer.lag_facts, 1)
        self.assertEqual(mailer.facts_behind, 2)
        self.assertEqual(mailer.lost_fact_count, 0)
        self.assertEqual(len(mailer.partitions), 4)
        self.assertEqual(sum(lane.lag_facts for lane in mailer.partitions), 1)
        self.assertTrue(any(lane.has_cursor for lane in mailer.partitions))
        self.assertFalse(mailer.retrying)
        self.assertEqual(mailer.last_error, "")

        # A subscriber that keeps failing: stat shows the fact, its attempts and its own error.
        with wharf.Runtime(self.engine, "workers=0") as runtime:
            def pusher(fact):
                raise ConnectionError("gateway timeout")
            runtime.subscribe("pusher", "OrderPlaced", pusher)
            for _ in range(2):
                with self.assertRaises(wharf.Busy):
                    runtime.drain()
        pusher_stat = next(c for c in self.engine.stat().consumers if c.consumer == "pusher")
        self.assertTrue(pusher_stat.retrying)
        self.assertEqual(pusher_stat.retrying_fact_id, 1)
        self.assertEqual(pusher_stat.retrying_attempt, 2)
        self.assertGreater(pusher_stat.retrying_since_ms, 0)
        self.assertEqual(pusher_stat.last_error,
                         "subscriber-failed: ConnectionError: gateway timeout")
        self.engine.close()
        with self.assertRaises(wharf.Closed):
            self.engine.stat()
        with self.assertRaises(wharf.Closed):
            self.engine.trim()
        with self.assertRaises(wharf.Closed):
            self.engine.leases()
        self.engine = self.open()


class TestBackup(EngineTestCase):
    """Engine.backup, list_backups, restore, verify_database, verify_backup, Engine.incarnation
    and the stat snapshot's backup fields, over the C ABI."""

    def setUp(self):
        super().setUp()
        self.target = os.path.join(self.dir, "backups")
        self.destination = os.path.join(self.dir, "restored")

    def skip_until_built(self, function, *args, **kwargs):
        """function(*args, **kwargs), or a skip while the core answers "not built yet"."""
        try:
            return function(*args, **kwargs)
        except wharf.NotSupported as e:
            if "not built yet" in str(e):
                self.skipTest(f"not built yet: {e}")
            raise

    def backup_or_skip(self, **kwargs):
        return self.skip_until_built(self.engine.backup, self.target, **kwargs)

    def fill(self):
        """State, three facts and a cursor at the second; returns the last fact id."""
        with self.engine.begin() as txn:
            txn.put("orders", "o-1", b"1250")
        self.commit("OrderPlaced", "k", b"one")
        second = self.commit("OrderPlaced", "k", b"two")
        last = self.commit("OrderPlaced", "k", b"three")
        self.engine.set_cursor("audit", second)
        return last

    def test_bad_arguments_are_refused_naming_them(self):
        for bad, text in [("", "target is empty"), ("a\0b", "contains a NUL byte"),
                          (b"", "target is empty")]:
            with self.assertRaises(wharf.InvalidArgument) as caught:
                self.engine.backup(bad)
            self.assertIn(text, str(caught.exception))
        with self.assertRaises(TypeError):
            self.engine.backup(None)
        for kwargs, text in [({"keep": -1}, "keep"), ({"keep": 2**32}, "keep"),
                             ({"rate_limit": 2**64}, "rate_limit")]:
            with self.assertRaises(wharf.InvalidArgument) as caught:
                self.engine.backup(self.target, **kwargs)
            self.assertIn(text, str(caught.exception))
        with self.assertRaises(TypeError):
            self.engine.backup(self.target, progress="not callable")

        with self.assertRaises(wharf.InvalidArgument) as caught:
            wharf.restore("", self.destination)
        self.assertIn("target is empty", str(caught.exception))
        with self.assertRaises(wharf.InvalidArgument) as caught:
            wharf.restore(self.target, "dest\0ination")
        self.assertIn("destination", str(caught.exception))
        with self.assertRaises(wharf.InvalidArgument) as caught:
            wharf.restore(self.target, self.destination, force=1)
        self.assertIn("force", str(caught.exception))
        with self.assertRaises(wharf.InvalidArgument) as caught:
            wharf.restore(self.target, self.destination, backup_id=-1)
        self.assertIn("backup_id", str(caught.exception))
        with self.assertRaises(wharf.InvalidArgument) as caught:
            wharf.verify_database("db\0")
        self.assertIn("path", str(caught.exception))
        with self.assertRaises(wharf.InvalidArgument) as caught:
            wharf.verify_backup(self.target, backup_id=2**32)
        self.assertIn("backup_id", str(caught.exception))
        with self.assertRaises(wharf.InvalidArgument) as caught:
            wharf.list_backups("")
        self.assertIn("target is empty", str(caught.exception))
        self.assertFalse(os.path.exists(self.target))
        self.assertFalse(os.path.exists(self.destination))

        self.engine.close()
        with self.assertRaises(wharf.Closed):
            self.engine.backup(self.target)
        with self.assertRaises(wharf.Closed):
            self.engine.incarnation

    def test_never_backed_up(self):
        self.assertEqual(self.engine.incarnation, 0)
        snapshot = self.engine.stat()
        self.assertEqual(snapshot.incarnation, 0)
        self.assertIsNone(snapshot.last_backup)

    def test_backup_restore_open_verify(self):
        last = self.fill()
        calls = []
        info = self.backup_or_skip(progress=lambda copied, total: calls.append((copied, total)))
        self.assertIsInstance(info, wharf.BackupInfo)
        self.assertEqual((info.id, info.last_fact_id, info.durable_lsn, info.partitions,
                          info.incarnation), (1, last, last, 4, 0))
        self.assertGreater(info.files, 0)
        self.assertTrue(calls)
        self.assertTrue(all(copied <= total for copied, total in calls))
        # What the target lists for a backup is what was stored with it at its point (its
        # duration and copied bytes are known only after its list of files was written).
        (listed,) = wharf.list_backups(self.target)
        self.assertEqual((listed.id, listed.last_fact_id, listed.size_bytes, listed.files,
                          listed.created_ms), (1, last, info.size_bytes, info.files,
                                               info.created_ms))
        last_backup = self.engine.stat().last_backup
        self.assertIsNotNone(last_backup)
        self.assertEqual((last_backup.ok, last_backup.backup_id, last_backup.last_fact_id,
                          last_backup.target, last_backup.error),
                         (True, 1, last, self.target, ""))

        report = wharf.restore(self.target, self.destination)
        self.assertEqual(report.backup, listed)
        self.assertNotEqual(report.incarnation, 0)
        with self.assertRaises(wharf.InvalidArgument):  # not empty now: needs force
            wharf.restore(self.target, self.destination)

        with wharf.Engine(self.destination) as restored:
            self.assertEqual(restored.incarnation, report.incarnation)
            self.assertEqual(restored.get("orders", "o-1"), b"1250")
            self.assertEqual(restored.last_lsn, last)
            self.assertEqual(restored.cursor("audit", restored.partition_of("k")), last - 1)
            self.assertEqual(restored.stat().incarnation, report.incarnation)

        verified = self.skip_until_built(wharf.verify_database, self.destination)
        self.assertTrue(verified.ok)
        self.assertEqual([f.name for f in verified.families],
                         ["outbox", "cursors", "leases", "timers", "dead", "state", "meta"])
        self.assertGreaterEqual(verified.families[0].records, 3)
        self.assertEqual((verified.damage, verified.damage_count, verified.backup_id), ([], 0, 0))
        verified = wharf.verify_backup(self.target)
        self.assertTrue(verified.ok)
        self.assertEqual(verified.backup_id, 1)
        self.assertGreater(verified.files, 0)

    def test_a_progress_callback_that_raises_fails_the_call(self):
        self.fill()

        def broken(copied, total):
            raise ValueError("progress is broken")

        try:
            self.engine.backup(self.target, progress=broken)
            self.fail("backup returned although its progress callback raised")
        except ValueError as e:
            self.assertEqual(str(e), "progress is broken")
        except wharf.NotSupported as e:
            if "not built yet" in str(e):
                self.skipTest(f"backup core not built yet: {e}")
            raise
        self.engine.backup(self.target)
        with self.assertRaises(ValueError):
            wharf.restore(self.target, self.destination, progress=broken)

    def test_damage_raises_corruption_carrying_the_report(self):
        self.fill()
        self.backup_or_skip()
        # Damage one table file of the backup in the middle (its size stays).
        shared = os.path.join(self.target, "shared_checksum")
        tables = sorted(f for f in os.listdir(shared) if f.endswith(".sst"))
        self.assertTrue(tables)
        with open(os.path.join(shared, tables[0]), "r+b") as file:
            file.seek(os.path.getsize(file.name) // 2)
            byte = file.read(1)
            file.seek(-1, os.SEEK_CUR)
            file.write(bytes([byte[0] ^ 0xFF]))
        with self.assertRaises(wharf.Corruption) as caught:
            self.skip_until_built(wharf.verify_backup, self.target)
        report = caught.exception.report
        self.assertIsInstance(report, wharf.VerifyReport)
        self.assertFalse(report.ok)
        self.assertGreaterEqual(report.damage_count, 1)
        self.assertTrue(report.damage)
        self.assertIn(report.damage[0].place, str(caught.exception))


class TestErrors(EngineTestCase):
    def test_bad_options(self):
        with self.assertRaises(wharf.InvalidArgument) as caught:
            wharf.Engine(os.path.join(self.dir, "other"), "partitions=many")
        self.assertIn("partitions", str(caught.exception))
        self.assertEqual(caught.exception.code, 1)
        with self.assertRaises(wharf.InvalidArgument):
            wharf.Runtime(self.engine, {"no_such_option": 1})

    def test_database_is_locked(self):
        with self.assertRaises(wharf.IOError_) as caught:
            wharf.Engine(self.path)
        self.assertIsInstance(caught.exception, OSError)

    def test_bad_input_names_the_problem(self):
        txn = self.engine.begin()
        with self.assertRaises(wharf.InvalidArgument) as caught:
            txn.emit("NoSuchType", b"x")
        self.assertIn("NoSuchType", str(caught.exception))
        with self.assertRaises(wharf.InvalidArgument):
            txn.put("", "k", b"v")
        with self.assertRaises(wharf.InvalidArgument):
            txn.put("t", "", b"v")
        with self.assertRaises(wharf.InvalidArgument):
            txn.emit("OrderPlaced", b"")
        with self.assertRaises(TypeError):
            txn.put("t", 42, b"v")
        txn.abort()

    def test_messages_name_the_python_call_and_argument(self):
        # The library's messages start with the C function ("wharf_open: ..."): a Python user
        # sees the call they made instead, with its argument, and the same code and subcode.
        other = os.path.join(self.dir, "other")
        cases = [
            (lambda: wharf.Engine(other, "x=1"), wharf.InvalidArgument,
             f"Engine(path={other!r}): unknown engine option 'x'"),
            (lambda: self.engine.begin().emit("Nope", b"p", key="k"), wharf.InvalidArgument,
             "Txn.emit(type='Nope'): fact type 'Nope' is not declared (Engine.declare_types)"),
            (lambda: self.engine.begin().put("t", b"", b"v"), wharf.InvalidArgument,
             "Txn.put(table='t'): key is empty"),
            (lambda: wharf.Runtime(self.engine, "workers=abc"), wharf.InvalidArgument,
             "Runtime(options='workers=abc'): option 'workers'"),
            (lambda: list(self.engine.scan("t", prefix=b"x" * 5000)), wharf.InvalidArgument,
             "Engine.scan(table='t'): prefix of 5000 bytes"),
            (lambda: self.engine.copy_cursor("a", "b"), wharf.NotFound,
             "Engine.copy_cursor(from_consumer='a'): consumer 'a' has no cursors"),
            (lambda: wharf.Engine(self.path), wharf.IOError_, f"Engine(path={self.path!r}): "),
        ]
        for call, error, text in cases:
            with self.subTest(text):
                with self.assertRaises(error) as caught:
                    call()
                self.assertTrue(str(caught.exception).startswith(text), str(caught.exception))
                self.assertNotIn("wharf_", str(caught.exception))
                self.assertEqual(caught.exception.code, error.code)
        with self.assertRaises(wharf.IOError_) as caught:
            wharf.Engine(self.path)
        self.assertEqual(caught.exception.subcode, wharf.SUBCODE_DATABASE_LOCKED)

    def test_the_key_of_emit_is_keyword_only(self):
        # C, C++ and Go emit (type, key, payload): the same call ported to Python positionally
        # must fail, not commit a fact whose key and payload are swapped.
        txn = self.engine.begin()
        with self.assertRaises(TypeError):
            txn.emit("OrderPlaced", "alice", b"o-1")
        txn.emit("OrderPlaced", b"o-1", key="alice")
        txn.commit()
        [fact] = self.engine.read_facts(self.engine.partition_of(b"alice"))
        self.assertEqual((fact.key, fact.payload), (b"alice", b"o-1"))
        runtime = wharf.Runtime(self.engine)
        refused = []

        @runtime.reaction("echo", ["OrderPlaced"])
        def echo(fact, effects):
            try:
                effects.emit("OrderPlaced", fact.key, fact.payload)
            except TypeError as e:
                refused.append(e)

        runtime.drain()
        runtime.close()
        self.assertEqual(len(refused), 1)

    def test_names_are_taken_whole_or_refused(self):
        # A NUL would cut the name at the C ABI (a header "a\0b" stored as "a", table "t\0x"
        # writing into "t"): every name, path and option string is refused instead, naming it.
        txn = self.engine.begin()
        refusals = [
            ("header name", lambda: txn.emit("OrderPlaced", b"p", headers=[("a\0b", b"v")])),
            ("table", lambda: txn.put("t\0x", "k", b"v")),
            ("table", lambda: txn.delete("t\0x", "k")),
            ("table", lambda: txn.get("t\0x", "k")),
            ("type", lambda: txn.emit("OrderPlaced\0zz", b"p")),
            ("type", lambda: self.engine.declare_types("A\0zz")),
            ("type", lambda: self.engine.is_declared("OrderPlaced\0")),
            ("table", lambda: self.engine.get("t\0x", "k")),
            ("consumer", lambda: self.engine.cursor("c\0d", 0)),
            ("consumer", lambda: self.engine.set_cursor("c\0d", 0)),
            ("consumer", lambda: self.engine.delete_cursor("c\0d")),
            ("consumer", lambda: self.engine.dead_letters("c\0d")),
            ("to_consumer", lambda: self.engine.copy_cursor("c", "c\0d")),
            ("path", lambda: wharf.Engine(self.path + "\0x")),
            ("options", lambda: wharf.Engine(self.dir + "/other", "partitions=4\0;x")),
            ("options", lambda: wharf.Runtime(self.engine, "workers=1\0")),
            ("table", lambda: txn.put("\udc80", "k", b"v")),  # not encodable as UTF-8
        ]
        for what, call in refusals:
            with self.assertRaises(wharf.InvalidArgument, msg=what) as caught:
                call()
            self.assertIn(what, str(caught.exception))
            self.assertEqual(caught.exception.code, 1)
        runtime = wharf.Runtime(self.engine, "workers=0")
        with self.assertRaises(wharf.InvalidArgument) as caught:
            runtime.subscribe("s\0t", ["OrderPlaced"], lambda fact: None)
        self.assertIn("name", str(caught.exception))
        with self.assertRaises(wharf.InvalidArgument):
            runtime.subscribe("s", ["OrderPlaced\0"], lambda fact: None)
        runtime.close()
        txn.put("t", "k", b"v")
        txn.commit()
        self.assertFalse(os.path.exists(self.dir + "/other"))
        self.assertEqual(self.engine.read_facts(0) + self.engine.read_facts(1), [])

    def test_binary_keys_and_values(self):
        keys = [(1).to_bytes(8, "big"), (256).to_bytes(8, "big"), b"\0", b"a\0b", b"a"]
        with self.engine.begin() as txn:
            for i, key in enumerate(keys):
                txn.put("t", key, b"v\0" + bytes([i]))
            txn.emit("OrderPlaced", b"\0p", key=b"\0k\xff", headers=[("h", b"\0v")])
        for i, key in enumerate(keys):
            self.assertEqual(self.engine.get("t", key), b"v\0" + bytes([i]))
        (fact,) = self.engine.read_facts(self.engine.partition_of(b"\0k\xff"))
        self.assertEqual((fact.key, fact.payload, fact.headers),
                         (b"\0k\xff", b"\0p", [("h", b"\0v")]))
        with self.engine.begin() as txn:
            txn.delete("t", b"a\0b")
        self.assertIsNone(self.engine.get("t", b"a\0b"))
        self.assertEqual(self.engine.get("t", b"a"), b"v\0\x04")

    def test_dict_options_cannot_inject(self):
        other = os.path.join(self.dir, "other")
        for options, needle in [({"partitions": "4;durability=buffered"}, "partitions"),
                                ({"partitions;durability": "buffered"}, "option name"),
                                ({"durability=buffered;partitions": 4}, "option name"),
                                ({"partitions": " 4"}, "partitions")]:
            with self.assertRaises(wharf.InvalidArgument, msg=repr(options)) as caught:
                wharf.Engine(other, options)
            self.assertIn(needle, str(caught.exception))
        self.assertFalse(os.path.exists(other))
        with self.assertRaises(wharf.InvalidArgument):
            wharf.Runtime(self.engine, {"instance": "a;workers=1000"})

    def test_integers_out_of_range_are_refused(self):
        fact_id = self.commit("OrderPlaced", "k", "o-1")
        partition = self.engine.partition_of("k")
        refusals = [
            ("partition", lambda: self.engine.read_facts(partition + 2**32)),
            ("partition", lambda: self.engine.read_facts(-1)),
            ("from_id", lambda: self.engine.read_facts(partition, from_id=-1)),
            ("limit", lambda: self.engine.read_facts(partition, limit=-1)),
            ("limit", lambda: self.engine.read_facts(partition, limit=2**64)),
            ("fact_id", lambda: self.engine.set_cursor("c", -1)),
            ("fact_id", lambda: self.engine.set_cursor("c", 2**64)),
            ("partition", lambda: self.engine.cursor("c", 2**32 + partition)),
            ("deliver_at_ms", lambda: self.engine.begin().emit("OrderPlaced", b"p",
                                                               deliver_at_ms=2**63)),
            ("v", lambda: self.engine.begin().emit("OrderPlaced", b"p", v=-1)),
        ]
        for what, call in refusals:
            with self.assertRaises(wharf.InvalidArgument, msg=what) as caught:
                call()
            self.assertIn(what, str(caught.exception))
            self.assertIsInstance(caught.exception, ValueError)
        with self.assertRaises(TypeError):
            self.engine.read_facts("0")
        self.assertEqual(self.engine.cursors(), [])  # set_cursor(c, -1) created nothing
        self.assertEqual([f.id for f in self.engine.read_facts(partition, limit=2**64 - 1)],
                         [fact_id])

    def test_runtime_options_are_checked(self):
        for options in ["workers=1000000", "backoff_initial_ms=100;backoff_max_ms=10"]:
            with self.assertRaises(wharf.InvalidArgument, msg=options):
                wharf.Runtime(self.engine, options)
        runtime = wharf.Runtime(self.engine, {"workers": 0})
        with self.assertRaises(wharf.InvalidArgument) as caught:
            runtime.subscribe("s", ["OrderPlaced"], lambda fact: None, {"batch_facts": 0})
        self.assertIn("batch_facts", str(caught.exception))
        runtime.close()

    def test_reopen_with_contradicting_options(self):
        self.engine.close()
        for options, needle in [({"partitions": 16}, "database has 4 partitions; partitions=16"),
                                ("ordering=none",
                                 "database has ordering=partition; ordering=none")]:
            with self.assertRaises(wharf.InvalidArgument) as caught:
                wharf.Engine(self.path, options)
            self.assertIn(needle, str(caught.exception))
        self.engine = wharf.Engine(self.path)  # left out: the stored values
        self.assertEqual(self.engine.partitions, 4)

    def test_commit_twice(self):
        txn = self.engine.begin()
        txn.put("t", "k", b"v")
        txn.commit()
        with self.assertRaises(wharf.InvalidArgument) as caught:
            txn.commit()
        self.assertIn("already committed", str(caught.exception))
        with self.assertRaises(wharf.InvalidArgument):
            txn.put("t", "k", b"v")

    def test_use_after_close(self):
        txn = self.engine.begin()
        txn.put("t", "k", b"v")
        runtime = wharf.Runtime(self.engine, "workers=1")
        runtime.project("p", ["OrderPlaced"], lambda fact, effects: None)
        self.engine.close()
        with self.assertRaises(wharf.Closed):
            self.engine.get("t", "k")
        with self.assertRaises(wharf.Closed):
            txn.commit()  # the C ABI answers CLOSED for a transaction of a closed engine
        with self.assertRaises(wharf.Closed):
            runtime.drain()
        runtime.close()
        self.engine.close()  # idempotent

    def test_registration_errors(self):
        runtime = wharf.Runtime(self.engine)
        with self.assertRaises(wharf.InvalidArgument):
            runtime.project("p", [], lambda fact, effects: None)
        with self.assertRaises(wharf.InvalidArgument):
            runtime.project("p", ["OrderPlaced"], lambda f, e: None, options="batch_facts=x")
        with self.assertRaises(TypeError):
            runtime.project("p", ["OrderPlaced"], None)
        runtime.project("p", ["Undeclared"], lambda fact, effects: None)
        with self.assertRaises(wharf.InvalidArgument) as caught:
            runtime.start()
        self.assertIn("Undeclared", str(caught.exception))
        runtime.close()
        with self.assertRaises(wharf.Closed):
            runtime.start()


class TestPayloadVersions(EngineTestCase):
    """Payload versions: Engine.declare_type, Txn.emit's v, Engine.register_upcaster; consumers
    receive facts lifted to the declared version (payload_version="stored": as stored)."""

    def emit_every_version(self):
        """Facts of "Order" at each of its versions, one key (so in order): b"one" at v=1,
        b"two" at v=2, b"three" at the declared v=3 (emit's default)."""
        self.engine.declare_type("Order")
        self.assertEqual(self.engine.declared_version("Order"), 1)
        self.engine.declare_type("Order", 3)
        self.engine.declare_type("Order", 3)  # the version it has: a no-op
        self.assertEqual(self.engine.declared_version("Order"), 3)
        self.assertEqual(self.engine.declared_version("Unknown"), 0)
        with self.engine.begin() as txn:
            txn.emit("Order", b"one", key="k", v=1)
            txn.emit("Order", b"two", key="k", v=2)
            txn.emit("Order", b"three", key="k")

    def test_a_chain_lifts_every_fact_to_the_declared_version(self):
        self.emit_every_version()
        # As stored: read_facts does not upcast.
        facts = self.engine.read_facts(self.engine.partition_of("k"))
        self.assertEqual([(f.payload, f.stored_version) for f in facts],
                         [(b"one", 1), (b"two", 2), (b"three", 3)])
        calls = []

        def one_to_two(payload):
            calls.append(1)
            return bytearray(payload + b">2")

        def two_to_three(payload):
            calls.append(2)
            return memoryview(payload + b">3")

        self.engine.register_upcaster("Order", 1, one_to_two)
        self.engine.register_upcaster("Order", 2, two_to_three)
        delivered = []
        runtime = wharf.Runtime(self.engine, "workers=2")
        runtime.subscribe("mailer", "Order", lambda fact: delivered.append(
            (fact.payload, fact.version, fact.stored_version, fact.v, fact.stored_v)))

        @runtime.projection("order-index", ["Order"], options={"batch_facts": 2})
        def index(fact, effects):
            effects.put("orders", fact.payload, f"{fact.version}/{fact.stored_version}")

        runtime.start()
        runtime.drain()
        runtime.close()
        self.assertEqual(delivered, [(b"one>2>3", 3, 1, 3, 1), (b"two>3", 3, 2, 3, 2),
                                     (b"three", 3, 3, 3, 3)])
        self.assertEqual(list(self.engine.scan("orders")),
                         [(b"one>2>3", b"3/1"), (b"three", b"3/3"), (b"two>3", b"3/2")])
        self.assertEqual(set(calls), {1, 2})
        # The engine keeps the upcasters until it closes, then releases them.
        self.assertIn(one_to_two, wharf._callbacks.values())
        self.engine.close()
        self.assertEqual(wharf._callbacks, {})

    def test_payload_version_stored_receives_them_as_stored(self):
        self.emit_every_version()
        calls = []
        self.engine.register_upcaster("Order", 1, lambda p: calls.append(1) or p)
        # No upcaster lifts 2 to 3: only consumers of the latest version need the whole chain.
        delivered = []
        runtime = wharf.Runtime(self.engine, "workers=1")
        runtime.subscribe("raw", "Order", lambda fact: delivered.append(
            (fact.payload, fact.version, fact.stored_version)), payload_version="stored")

        @runtime.projection("raw-index", "Order", options={"payload_version": "stored"})
        def index(fact, effects):
            effects.put("raw", fact.payload, f"{fact.version}/{fact.stored_version}")

        @runtime.reaction("raw-react", "Order", "batch_facts=5", payload_version="stored")
        def react(fact, effects):
            effects.put("reacted", fact.payload, f"{fact.version}")

        runtime.start()
        runtime.drain()
        runtime.close()
        self.assertEqual(delivered, [(b"one", 1, 1), (b"two", 2, 2), (b"three", 3, 3)])
        self.assertEqual(list(self.engine.scan("raw")),
                         [(b"one", b"1/1"), (b"three", b"3/3"), (b"two", b"2/2")])
        self.assertEqual(list(self.engine.scan("reacted")),
                         [(b"one", b"1"), (b"three", b"3"), (b"two", b"2")])
        self.assertEqual(calls, [])

    def test_a_missing_step_fails_start_naming_it(self):
        self.emit_every_version()
        self.engine.register_upcaster("Order", 2, lambda p: p + b">3")
        delivered = []
        runtime = wharf.Runtime(self.engine, "workers=1")
        runtime.subscribe("mailer", "Order", lambda fact: delivered.append(fact.payload))
        with self.assertRaises(wharf.InvalidArgument) as caught:
            runtime.start()
        self.assertIn("no upcaster lifts it from version 1 to 2", str(caught.exception))
        self.assertIn("'mailer'", str(caught.exception))
        # Start failed without side effects: with the step registered it starts.
        self.engine.register_upcaster("Order", 1, lambda p: p + b">2")
        runtime.start()
        runtime.drain()
        runtime.close()
        self.assertEqual(delivered, [b"one>2>3", b"two>3", b"three"])

    def test_a_failing_upcaster_gives_one_dead_letter_and_the_lane_goes_on(self):
        self.engine.declare_type("Order")
        with self.engine.begin() as txn:
            for payload in (b"ok-1", b"boom", b"ok-2", b"text", b"ok-3", b"none", b"ok-4"):
                txn.emit("Order", payload, key="k")
        self.engine.declare_type("Order", 2)

        def lift(payload):
            if payload == b"boom":
                raise ValueError("cannot lift boom")
            if payload == b"text":
                return "a str is not a payload"
            if payload == b"none":
                return None
            return payload + b">2"

        self.engine.register_upcaster("Order", 1, lift)
        delivered = []
        runtime = wharf.Runtime(self.engine, "workers=2;backoff_initial_ms=1;backoff_max_ms=5")
        runtime.subscribe("mailer", "Order", lambda fact: delivered.append(fact.payload))
        runtime.start()
        runtime.drain()
        runtime.close()
        self.assertEqual(delivered, [b"ok-1>2", b"ok-2>2", b"ok-3>2", b"ok-4>2"])
        letters = self.engine.dead_letters("mailer")
        self.assertEqual([letter.fact.payload for letter in letters], [b"boom", b"text", b"none"])
        prefix = "upcast-failed: upcasting 'Order' from version 1 to 2: "
        for letter, text in zip(letters, ["ValueError: cannot lift boom",
                                          "TypeError: the upcaster returned str, not bytes",
                                          "TypeError: the upcaster returned NoneType, not bytes"]):
            self.assertTrue(letter.reason.startswith(prefix), letter.reason)
            self.assertIn(text, letter.reason)
            # The letter keeps the payload as stored.
            self.assertEqual((letter.fact.version, letter.fact.stored_version), (1, 1))
        self.assertEqual(self.engine.cursor("mailer", self.engine.partition_of("k")), 7)

    def test_relay_payload_latest_or_stored(self):
        if shutil.which("redis-server") is None:
            self.skipTest("redis-server is not installed")
        import socket
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        redis_dir = os.path.join(self.dir, "redis")
        os.mkdir(redis_dir)
        server = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                                   "--dir", redis_dir, "--save", ""],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.addCleanup(server.wait)
        self.addCleanup(server.kill)
        for _ in range(300):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        self.emit_every_version()
        self.engine.register_upcaster("Order", 1, lambda p: p + b">2")
        self.engine.register_upcaster("Order", 2, lambda p: p + b">3")
        runtime = wharf.Runtime(self.engine, "workers=1")
        url = f"redis://127.0.0.1:{port}"
        runtime.relay("latest", "Order", {"kind": "redis_streams", "url": url,
                                          "stream": "latest:{partition}"})
        runtime.relay("stored", "Order", {"kind": "redis_streams", "url": url,
                                          "stream": "stored:{partition}"},
                      relay_payload="stored")
        runtime.drain()
        runtime.close()

        def entries(stream):
            out = subprocess.run(["redis-cli", "-p", str(port), "XRANGE", stream, "-", "+"],
                                 capture_output=True, text=True, check=True).stdout
            rows = []
            for line in out.splitlines():
                if re.fullmatch(r"\d+-\d+", line):
                    rows.append([])
                else:
                    rows[-1].append(line)
            return [dict(zip(row[::2], row[1::2])) for row in rows]

        partition = self.engine.partition_of("k")
        self.assertEqual([(e["payload"], e["v"], e["stored_v"])
                          for e in entries(f"latest:{partition}")],
                         [("one>2>3", "3", "1"), ("two>3", "3", "2"), ("three", "3", "3")])
        self.assertEqual([(e["payload"], e["v"], e["stored_v"])
                          for e in entries(f"stored:{partition}")],
                         [("one", "1", "1"), ("two", "2", "2"), ("three", "3", "3")])

    def test_bad_input_names_the_call_and_argument(self):
        self.engine.declare_type("Order", 3)
        self.engine.register_upcaster("Order", 1, lambda p: p)
        self.engine.declare_type("Late", 2)  # first declared at 2: its facts are never v=1
        kept = dict(wharf._callbacks)

        async def lift_async(payload):
            return payload

        runtime = wharf.Runtime(self.engine, "workers=0")
        self.addCleanup(runtime.close)
        cases = [
            (lambda: self.engine.declare_type("Order2", 0), wharf.InvalidArgument,
             "Engine.declare_type: version 0"),
            (lambda: self.engine.declare_type("Order2", 2**32), wharf.InvalidArgument,
             "Engine.declare_type: version 4294967296"),
            (lambda: self.engine.declare_type("Order2", "2"), TypeError,
             "Engine.declare_type: version"),
            (lambda: self.engine.declare_type("Order\0x", 2), wharf.InvalidArgument,
             "Engine.declare_type: type"),
            (lambda: self.engine.declare_type("Order", 2), wharf.InvalidArgument,
             "never goes back"),
            (lambda: self.engine.declared_version(3), TypeError, "Engine.declared_version: type"),
            (lambda: self.engine.begin().emit("Order", b"p", v=4), wharf.InvalidArgument,
             "version 4 is above"),
            (lambda: self.engine.begin().emit("Late", b"p", v=1), wharf.InvalidArgument,
             "Late"),
            (lambda: self.engine.begin().emit("Order", b"p", v=0), wharf.InvalidArgument,
             "Txn.emit: v 0"),
            (lambda: self.engine.begin().emit("Order", b"p", v=2**32), wharf.InvalidArgument,
             "Txn.emit: v 4294967296"),
            (lambda: self.engine.begin().emit("Order", b"p", v="2"), TypeError, "Txn.emit: v"),
            (lambda: self.engine.register_upcaster("Undeclared", 1, lambda p: p),
             wharf.InvalidArgument, "not declared"),
            (lambda: self.engine.register_upcaster("Order", 1, lambda p: p),
             wharf.InvalidArgument, "already registered"),
            (lambda: self.engine.register_upcaster("Order", 3, lambda p: p),
             wharf.InvalidArgument, "declared at version 3"),
            (lambda: self.engine.register_upcaster("Order", 0, lambda p: p),
             wharf.InvalidArgument, "Engine.register_upcaster: from_v 0"),
            (lambda: self.engine.register_upcaster("Order", "2", lambda p: p), TypeError,
             "Engine.register_upcaster: from_v"),
            (lambda: self.engine.register_upcaster("Order", 2, b"not a function"), TypeError,
             "Engine.register_upcaster: fn must be callable, not bytes"),
            (lambda: self.engine.register_upcaster("Order", 2, lift_async), TypeError,
             "Engine.register_upcaster: fn cannot be an async def"),
            (lambda: self.engine.register_upcaster("Or\0der", 2, lambda p: p),
             wharf.InvalidArgument, "Engine.register_upcaster: type"),
            (lambda: runtime.subscribe("s", "Order", lambda f: None, payload_version="newest"),
             wharf.InvalidArgument, "Runtime.subscribe: payload_version 'newest'"),
            (lambda: runtime.project("p", "Order", lambda f, e: None, payload_version=3),
             TypeError, "Runtime.project: payload_version"),
            (lambda: runtime.react("r", "Order", lambda f, e: None, {"payload_version": "latest"},
                                   payload_version="stored"),
             wharf.InvalidArgument, "Runtime.react: payload_version 'stored' contradicts"),
            (lambda: runtime.tap("t", "Order", lambda f: None, payload_version="Stored"),
             wharf.InvalidArgument, "Runtime.tap: payload_version 'Stored'"),
            (lambda: runtime.relay("to-redis", "Order", {"kind": "redis_streams"},
                                   relay_payload="all"),
             wharf.InvalidArgument, "Runtime.relay: relay_payload 'all'"),
            (lambda: runtime.subscribe("s", "Order", lambda f: None, "payload_version=other"),
             wharf.InvalidArgument, "payload_version"),
        ]
        for call, error, named in cases:
            with self.assertRaises(error, msg=named) as caught:
                call()
            self.assertIn(named, str(caught.exception))
        # Refused registrations keep nothing.
        self.assertEqual(wharf._callbacks, kept)
        self.assertEqual(self.engine.declared_version("Order2"), 0)
        self.engine.close()
        for call in (lambda: self.engine.declare_type("Order", 4),
                     lambda: self.engine.declared_version("Order"),
                     lambda: self.engine.register_upcaster("Order", 2, lambda p: p)):
            with self.assertRaises(wharf.Closed):
                call()


class TestTableVersions(EngineTestCase):
    """Table versions: Engine.declare_table, Engine.table_version, Engine.register_migration and
    Engine.migrate_table; rows read at an older version are lifted, and written back by the
    transactions that read them."""

    def put_rows(self, count=10, table="acct"):
        """Rows k0..k(count-1) = b"r0".., written at the table's declared version."""
        with self.engine.begin() as txn:
            for i in range(count):
                txn.put(table, f"k{i}", f"r{i}")

    def declare_chain(self, top=3):
        """Declares "acct" at `top`, with the migrations 1→2 (appends b"|v2") ... (top-1)→top,
        counting their calls in self.calls."""
        self.calls = []
        self.engine.declare_table("acct", top)

        def step(mark):
            def lift(row):
                self.calls.append(mark)
                return bytearray(row + mark) if mark == b"|v2" else memoryview(row + mark)
            return lift

        for from_v in range(1, top):
            self.engine_migration = step(f"|v{from_v + 1}".encode())
            self.engine.register_migration("acct", from_v, self.engine_migration)

    def reopen_without_migrations(self):
        """Reopens the engine: no migration is registered, so a row still at an older version
        cannot be read."""
        self.engine.close()
        self.engine = wharf.Engine(self.path, {"partitions": 4})

    def test_a_chain_lifts_rows_on_read_and_a_transaction_writes_them_back(self):
        self.put_rows()  # at version 1: the table was never declared
        self.assertEqual(self.engine.table_version("acct"), 1)
        self.assertEqual(self.engine.table_version("never"), 1)
        self.declare_chain(3)
        self.engine.declare_table("acct", 3)  # the version it has: a no-op
        self.assertEqual(self.engine.table_version("acct"), 3)
        # Engine.get and Engine.scan lift without writing.
        self.assertEqual(self.engine.get("acct", "k0"), b"r0|v2|v3")
        self.assertEqual(self.calls, [b"|v2", b"|v3"])
        self.assertEqual(list(self.engine.scan("acct", limit=2)),
                         [(b"k0", b"r0|v2|v3"), (b"k1", b"r1|v2|v3")])
        # A transaction reads them lifted and writes them back in its own commit.
        with self.engine.begin() as txn:
            self.assertEqual(txn.get("acct", "k2"), b"r2|v2|v3")
            self.assertEqual(list(txn.scan("acct", start="k3", end="k5")),
                             [(b"k3", b"r3|v2|v3"), (b"k4", b"r4|v2|v3")])
        self.assertEqual(self.engine.migrate_table("acct", dry_run=True),
                         wharf.MigrateReport(version=3, rows=10, migrated=7, batches=1,
                                             done=True))
        report = self.engine.migrate_table("acct")
        self.assertEqual(report, wharf.MigrateReport(3, 10, 7, 1, True))
        self.assertIsInstance(report.done, bool)
        # Every row is at version 3 now: nothing is migrated again, no migration runs.
        self.calls.clear()
        self.assertEqual(self.engine.migrate_table("acct").migrated, 0)
        self.assertEqual(self.engine.get("acct", "k9"), b"r9|v2|v3")
        self.assertEqual(self.calls, [])
        # The engine keeps the migrations until it closes, then releases them.
        self.assertEqual(len(wharf._callbacks), 2)
        self.reopen_without_migrations()
        self.assertEqual(wharf._callbacks, {})
        self.assertEqual(self.engine.table_version("acct"), 3)  # persisted
        self.assertEqual([value for _, value in self.engine.scan("acct")],
                         [f"r{i}|v2|v3".encode() for i in range(10)])

    def test_migrate_table_in_batches_reports_progress(self):
        self.put_rows()
        self.declare_chain(2)
        reports = []
        final = self.engine.migrate_table("acct", batch_rows=3, rows_per_second=10**9,
                                          progress=reports.append)
        # Called after every batch but the last (whose report is the result).
        self.assertEqual(reports, [wharf.MigrateReport(2, 3 * n, 3 * n, n, False)
                                   for n in (1, 2, 3)])
        self.assertEqual(final, wharf.MigrateReport(2, 10, 10, 4, True))
        # True goes on too.
        self.assertEqual(self.engine.migrate_table("acct", batch_rows=4,
                                                   progress=lambda so_far: True),
                         wharf.MigrateReport(2, 10, 0, 3, True))

    def test_progress_stops_the_migration(self):
        self.put_rows()
        self.declare_chain(2)
        # False stops after the first batch: what it committed stays migrated.
        stopped = self.engine.migrate_table("acct", batch_rows=3, progress=lambda so_far: False)
        self.assertEqual(stopped, wharf.MigrateReport(2, 3, 3, 1, False))
        self.assertEqual(self.engine.migrate_table("acct", dry_run=True).migrated, 7)

        # An exception stops it and is raised once the call returned.
        seen = []

        def broken(so_far):
            seen.append(so_far)
            if len(seen) == 2:
                raise ValueError("progress is broken")

        with self.assertRaises(ValueError) as caught:
            self.engine.migrate_table("acct", batch_rows=2, progress=broken)
        self.assertEqual(str(caught.exception), "progress is broken")
        self.assertEqual(len(seen), 2)
        # It started again from the first row: its two batches (k0-k1, k2-k3) migrated k3 only.
        self.assertEqual(seen[-1], wharf.MigrateReport(2, 4, 1, 2, False))
        self.assertEqual(self.engine.migrate_table("acct", dry_run=True).migrated, 6)

        # An answer that is not None, True or False stops it too, raising TypeError.
        with self.assertRaises(TypeError) as caught:
            self.engine.migrate_table("acct", batch_rows=5, progress=lambda so_far: 0)
        self.assertIn("Engine.migrate_table: progress returned int", str(caught.exception))
        self.assertEqual(self.engine.migrate_table("acct", dry_run=True).migrated, 5)
        self.assertEqual(self.engine.migrate_table("acct"), wharf.MigrateReport(2, 10, 5, 1, True))
        # The progress callables were released; the engine holds its migration only.
        self.assertEqual(list(wharf._callbacks.values()), [self.engine_migration])

    def test_a_dry_run_changes_nothing(self):
        self.put_rows()
        self.declare_chain(3)
        reports = []
        for _ in range(2):
            report = self.engine.migrate_table("acct", batch_rows=4, dry_run=True,
                                               progress=reports.append)
            self.assertEqual(report, wharf.MigrateReport(3, 10, 10, 3, True))
        self.assertEqual(len(reports), 4)
        self.assertEqual(len(self.calls), 2 * 2 * 10)  # both steps, every row, twice
        # Without the migrations, the rows cannot be read: they are still at version 1.
        self.reopen_without_migrations()
        with self.assertRaises(wharf.NotSupported) as caught:
            self.engine.get("acct", "k0")
        self.assertIn("migrating the row from version 1 to 2: no migration is registered",
                      str(caught.exception))

    def test_a_refusing_migration_fails_the_read_naming_it(self):
        with self.engine.begin() as txn:
            for key in ("a", "boom", "c", "none", "text"):
                txn.put("acct", key, key)
        self.engine.declare_table("acct", 2)

        def lift(row):
            if row == b"boom":
                raise ValueError("cannot lift boom")
            if row == b"text":
                return "a str is not a row"
            if row == b"none":
                return None
            return row + b"|v2"

        self.engine.register_migration("acct", 1, lift)
        self.assertEqual(self.engine.get("acct", "a"), b"a|v2")
        prefix = "migrating the row from version 1 to 2: "
        for key, text in [("boom", "ValueError: cannot lift boom"),
                          ("text", "TypeError: the migration returned str, not bytes"),
                          ("none", "TypeError: the migration returned NoneType, not bytes")]:
            with self.assertRaises(wharf.NotSupported, msg=key) as caught:
                self.engine.get("acct", key)
            message = str(caught.exception)
            self.assertIn(f"table 'acct', key '{key}': {prefix}{text}", message)
            with self.assertRaises(wharf.NotSupported, msg=key) as caught:
                with self.engine.begin() as txn:
                    txn.get("acct", key)
            self.assertIn(prefix + text, str(caught.exception))
        # migrate_table stops at the first refused row, in key order: the batch before it is
        # committed.
        with self.assertRaises(wharf.NotSupported) as caught:
            self.engine.migrate_table("acct", batch_rows=1)
        self.assertIn("key 'boom': " + prefix + "ValueError: cannot lift boom",
                      str(caught.exception))
        self.reopen_without_migrations()
        self.assertEqual(self.engine.get("acct", "a"), b"a|v2")
        with self.assertRaises(wharf.NotSupported):
            self.engine.get("acct", "c")

    def test_bad_input_names_the_call_and_argument(self):
        kept = dict(wharf._callbacks)

        async def lift_async(row):
            return row

        async def progress_async(so_far):
            return True

        lift = lambda row: row  # noqa: E731
        cases = [
            (lambda: self.engine.declare_table("acct", 0), wharf.InvalidArgument,
             "Engine.declare_table: version 0"),
            (lambda: self.engine.declare_table("acct", 2**32), wharf.InvalidArgument,
             "Engine.declare_table: version 4294967296"),
            (lambda: self.engine.declare_table("acct", "2"), TypeError,
             "Engine.declare_table: version"),
            (lambda: self.engine.declare_table("ac\0ct", 2), wharf.InvalidArgument,
             "Engine.declare_table: table"),
            (lambda: self.engine.declare_table("", 2), wharf.InvalidArgument, "table"),
            (lambda: self.engine.table_version(3), TypeError, "Engine.table_version: table"),
            (lambda: self.engine.register_migration("acct", 1, lift), wharf.InvalidArgument,
             "the table is at version 1"),
        ]
        for call, error, named in cases:
            with self.assertRaises(error, msg=named) as caught:
                call()
            self.assertIn(named, str(caught.exception))
        self.assertEqual(self.engine.table_version("acct"), 1)

        self.engine.declare_table("acct", 3)
        self.engine.register_migration("acct", 1, lift)
        kept = dict(wharf._callbacks)
        cases = [
            (lambda: self.engine.declare_table("acct", 2), wharf.InvalidArgument,
             "never goes back"),
            (lambda: self.engine.register_migration("acct", 1, lift), wharf.InvalidArgument,
             "already registered"),
            (lambda: self.engine.register_migration("acct", 3, lift), wharf.InvalidArgument,
             "declared at version 3"),
            (lambda: self.engine.register_migration("acct", 0, lift), wharf.InvalidArgument,
             "Engine.register_migration: from_v 0"),
            (lambda: self.engine.register_migration("acct", "2", lift), TypeError,
             "Engine.register_migration: from_v"),
            (lambda: self.engine.register_migration("acct", 2, b"not a function"), TypeError,
             "Engine.register_migration: fn must be callable, not bytes"),
            (lambda: self.engine.register_migration("acct", 2, lift_async), TypeError,
             "Engine.register_migration: fn cannot be an async def"),
            (lambda: self.engine.register_migration("ac\0ct", 2, lift), wharf.InvalidArgument,
             "Engine.register_migration: table"),
            (lambda: self.engine.migrate_table("acct", batch_rows=0), wharf.InvalidArgument,
             "Engine.migrate_table: batch_rows 0 is out of range [1, 100000]"),
            (lambda: self.engine.migrate_table("acct", batch_rows=100001),
             wharf.InvalidArgument, "Engine.migrate_table: batch_rows 100001"),
            (lambda: self.engine.migrate_table("acct", batch_rows="3"), TypeError,
             "Engine.migrate_table: batch_rows"),
            (lambda: self.engine.migrate_table("acct", rows_per_second=-1),
             wharf.InvalidArgument, "Engine.migrate_table: rows_per_second -1"),
            (lambda: self.engine.migrate_table("acct", dry_run=1), wharf.InvalidArgument,
             "Engine.migrate_table: dry_run must be True or False"),
            (lambda: self.engine.migrate_table("acct", progress=b"x"), TypeError,
             "Engine.migrate_table: progress must be callable, not bytes"),
            (lambda: self.engine.migrate_table("acct", progress=progress_async), TypeError,
             "Engine.migrate_table: progress cannot be an async def"),
            (lambda: self.engine.migrate_table("ac\0ct"), wharf.InvalidArgument,
             "Engine.migrate_table: table"),
            (lambda: self.engine.migrate_table("acct", 10), TypeError, "positional"),
        ]
        for call, error, named in cases:
            with self.assertRaises(error, msg=named) as caught:
                call()
            self.assertIn(named, str(caught.exception))
        # Refused registrations and calls keep nothing.
        self.assertEqual(wharf._callbacks, kept)
        self.assertEqual(self.engine.table_version("acct"), 3)
        # A handler must not migrate (it would wait for its own commit).
        with self.engine.begin() as txn:
            txn.emit("OrderPlaced", b"p", key="k")
        runtime = wharf.Runtime(self.engine, "workers=1")
        self.addCleanup(runtime.close)
        refused = []

        def handler(fact):
            try:
                self.engine.migrate_table("acct")
            except wharf.InvalidArgument as e:
                refused.append(str(e))

        runtime.subscribe("migrator", "OrderPlaced", handler)
        runtime.drain()
        self.assertEqual(len(refused), 1)
        self.assertIn("wharf_migrate_table", refused[0])
        runtime.close()
        self.engine.close()
        self.assertEqual(wharf._callbacks, {})
        for call in (lambda: self.engine.declare_table("acct", 4),
                     lambda: self.engine.table_version("acct"),
                     lambda: self.engine.register_migration("acct", 2, lift),
                     lambda: self.engine.migrate_table("acct")):
            with self.assertRaises(wharf.Closed):
                call()
        self.assertEqual(wharf._callbacks, {})


class TestIsolation(EngineTestCase):
    """Serializable transactions: Engine.transact, ReadConflict, and scans paging through the C
    ABI."""

    def counter(self, table="c", key="n"):
        return int(self.engine.get(table, key, b"0"))

    def emitted_values(self):
        values = []
        for partition in range(self.engine.partitions):
            facts = self.engine.read_facts(partition, limit=100000)
            values += [int(f.payload) for f in facts if f.type == "OrderPlaced"]
        return sorted(values)

    def test_lost_update_through_transact_is_exact(self):
        threads, increments = 4, 200

        def increment(txn):
            value = int(txn.get("c", "n", b"0")) + 1
            txn.put("c", "n", str(value))
            txn.emit("OrderPlaced", str(value), key="n")

        failures = []

        def run():
            try:
                for _ in range(increments):
                    # Enough attempts for four threads on one counter on a slow machine (ASan): the
                    # default 16 can all be refused there, and a thread that raised would leave
                    # the count short without any update being lost.
                    self.engine.transact(increment, attempts_max=1000, backoff_max_ms=5)
            except BaseException as e:  # noqa: B902 (reported below)
                failures.append(e)

        workers = [threading.Thread(target=run) for _ in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        self.assertEqual(failures, [])
        self.assertEqual(self.counter(), threads * increments)
        # Every value was emitted exactly once: no fact describes an overwritten state.
        self.assertEqual(self.emitted_values(), list(range(1, threads * increments + 1)))

    def test_without_transact_conflicts_are_raised_and_no_update_is_lost(self):
        threads, increments = 4, 50
        committed, conflicts, others = [0], [], []
        lock = threading.Lock()

        def run():
            for _ in range(increments):
                txn = self.engine.begin()
                try:
                    txn.put("c", "n", str(int(txn.get("c", "n", b"0")) + 1))
                    txn.commit()
                except wharf.Conflict as e:
                    with lock:
                        conflicts.append(e)
                    continue
                except BaseException as e:  # noqa: B902 (reported below)
                    others.append(e)
                    return
                with lock:
                    committed[0] += 1

        workers = [threading.Thread(target=run) for _ in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        self.assertEqual(others, [])
        self.assertGreater(len(conflicts), 0, "4 threads never overlapped")
        for error in conflicts:
            self.assertIsInstance(error, wharf.ReadConflict)
            self.assertEqual(error.subcode, wharf.SUBCODE_READ_CONFLICT)
            self.assertEqual(error.code, wharf.Conflict.code)
        self.assertEqual(self.counter(), committed[0])  # every refused commit wrote nothing
        self.assertEqual(committed[0] + len(conflicts), threads * increments)

    def test_transact_retries_read_conflicts_up_to_attempts_max(self):
        calls = [0]

        def conflicting(conflicts):
            def fn(txn):
                calls[0] += 1
                txn.get("c", "n")
                if calls[0] <= conflicts:  # another commit writes what this attempt read
                    with self.engine.begin() as other:
                        other.put("c", "n", f"other-{calls[0]}")
                txn.put("c", "n", "mine")
                txn.emit("OrderPlaced", "mine", key="n")
            return fn

        last = self.engine.transact(conflicting(2), attempts_max=3, backoff_min_ms=0,
                                    backoff_max_ms=1)
        self.assertEqual(calls[0], 3)
        self.assertEqual(self.engine.get("c", "n"), b"mine")
        self.assertGreater(last, 0)  # the committed attempt's fact

        calls[0] = 0
        with self.assertRaises(wharf.ReadConflict) as caught:
            self.engine.transact(conflicting(100), attempts_max=2, backoff_min_ms=0,
                                 backoff_max_ms=1)
        self.assertEqual(caught.exception.subcode, wharf.SUBCODE_READ_CONFLICT)
        self.assertEqual(calls[0], 2)
        self.assertEqual(self.engine.get("c", "n"), b"other-2")

    def test_transact_raises_fns_exception_unchanged_and_commits_nothing(self):
        class Refused(Exception):
            pass

        raised = Refused("no")
        calls = [0]

        def fn(txn):
            calls[0] += 1
            txn.put("c", "n", "999")
            txn.emit("OrderPlaced", "999")
            raise raised

        with self.assertRaises(Refused) as caught:
            self.engine.transact(fn)
        self.assertIs(caught.exception, raised)
        self.assertEqual(calls[0], 1)  # not retried
        self.assertIsNone(self.engine.get("c", "n"))
        self.assertEqual(self.engine.last_lsn, 0)
        # A Ctrl-C inside fn too, and a wharf error raised by a call inside it.
        with self.assertRaises(KeyboardInterrupt):
            self.engine.transact(lambda txn: (_ for _ in ()).throw(KeyboardInterrupt()))
        with self.assertRaises(wharf.InvalidArgument):
            self.engine.transact(lambda txn: txn.put("bad\0table", "k", "v"))
        self.assertIsNone(self.engine.get("c", "n"))

    def test_transacts_txn_cannot_be_committed_aborted_or_kept(self):
        kept, refusals = [], []

        def fn(txn):
            kept.append(txn)
            txn.put("c", "n", "1")
            for attempt in (txn.commit, txn.abort, txn.__enter__,
                            lambda: txn.commit_async(lambda *args: None)):
                try:
                    attempt()
                except wharf.InvalidArgument as e:
                    refusals.append(str(e))

        self.assertEqual(self.engine.transact(fn), 0)
        self.assertEqual(len(refusals), 4)
        for message in refusals:
            self.assertIn("Engine.transact", message)
        self.assertEqual(self.engine.get("c", "n"), b"1")  # committed once fn returned
        with self.assertRaises(wharf.InvalidArgument) as caught:
            kept[0].put("c", "n", "2")
        self.assertIn("only usable during that call", str(caught.exception))

    def test_scan_pages_through_the_library(self):
        keys = [b"k%02d" % i for i in range(25)]
        with self.engine.begin() as txn:
            for key in keys:
                txn.put("t", key, key.upper())
            txn.put("t", "l", "after the prefix")
            txn.put("t", b"j\xff\x00", "binary, before k")
        calls = []
        original = wharf._lib.wharf_scan

        def counting(*args):
            status = original(*args)
            calls.append((args[8], args[-1]._obj.value))  # the page's limit, *more
            return status

        wharf._lib.wharf_scan = counting
        try:
            rows = list(self.engine.scan("t", prefix="k", page_size=4))
            self.assertEqual(rows, [(key, key.upper()) for key in keys])
            self.assertEqual(calls, [(4, 1)] * 6 + [(4, 0)])  # 25 rows: 6 full pages and one

            calls.clear()
            iterator = self.engine.scan("t", prefix="k", page_size=4)
            self.assertEqual(next(iterator), (b"k00", b"K00"))  # one page read, not the table
            self.assertEqual(len(calls), 1)

            calls.clear()
            rows = list(self.engine.scan("t", prefix=b"k", start="k10", limit=6, page_size=4))
            self.assertEqual([k for k, _ in rows], keys[10:16])
            self.assertEqual([limit for limit, _ in calls], [4, 2])  # limit caps the total
        finally:
            wharf._lib.wharf_scan = original
        self.assertEqual([k for k, _ in self.engine.scan("t", start="k23", end=b"l")],
                         [b"k23", b"k24"])
        self.assertEqual([k for k, _ in self.engine.scan("t", end="k")], [b"j\xff\x00"])
        self.assertEqual(list(self.engine.scan("t", prefix="k", start="l")), [])
        self.assertEqual(len(list(self.engine.scan("t"))), 27)

    def test_txn_scan_reads_its_snapshot_and_own_writes_and_refuses_phantoms(self):
        with self.engine.begin() as txn:
            for key in ("a", "b", "c"):
                txn.put("t", key, key)
        txn = self.engine.begin()
        txn.put("t", "bb", "own")
        txn.delete("t", "c")
        rows = []
        for key, value in txn.scan("t", page_size=1):  # writes between pages are fine
            rows.append((key, value))
            txn.put("u", key, value)
        self.assertEqual(rows, [(b"a", b"a"), (b"b", b"b"), (b"bb", b"own")])
        with self.engine.begin() as other:  # a phantom in the scanned range
            other.put("t", "ab", "phantom")
        self.assertEqual([k for k, _ in txn.scan("t", prefix="a")], [b"a"])  # one snapshot
        with self.assertRaises(wharf.ReadConflict):
            txn.commit()
        self.assertIsNone(self.engine.get("t", "bb"))
        self.assertIsNone(self.engine.get("u", "a"))
        with self.assertRaises(wharf.InvalidArgument) as caught:
            txn.scan("t")
        self.assertIn("already committed", str(caught.exception))

    def test_effects_scan_in_a_projection(self):
        with self.engine.begin() as txn:
            txn.put("totals", "a", "1")
            txn.put("totals", "b", "2")
        self.commit("OrderPlaced", "k", b"3")
        runtime = wharf.Runtime(self.engine)
        seen = []

        @runtime.projection("summer", ["OrderPlaced"])
        def sum_totals(fact, effects):
            effects.put("totals", "c", fact.payload)
            total = sum(int(value) for _, value in effects.scan("totals"))
            seen.append(total)
            effects.put("sums", "all", str(total))

        runtime.drain()
        runtime.close()
        self.assertEqual(seen, [6])
        self.assertEqual(self.engine.get("sums", "all"), b"6")

    def test_a_row_that_cannot_be_kept_fails_the_scan(self):
        with self.engine.begin() as txn:
            for i in range(5):
                txn.put("t", str(i), str(i))
        rows = wharf._txn  # the module whose row callback copies rows (with _view)
        original = rows._view
        count = [0]

        def failing(pointer, length):
            count[0] += 1
            if count[0] == 5:  # the third row's key
                raise MemoryError("no memory for the row")
            return original(pointer, length)

        rows._view = failing
        try:
            with self.assertRaises(MemoryError):
                list(self.engine.scan("t"))
        finally:
            rows._view = original
        self.assertEqual(wharf._collect_errors, {})

        class Unrecordable(dict):
            def setdefault(self, *args):
                raise MemoryError("cannot even record it")

        errors = rows._collect_errors
        rows._view, rows._collect_errors = failing, Unrecordable()
        count[0] = 0
        try:
            with self.assertRaises(wharf.InternalError) as caught:
                list(self.engine.scan("t"))
        finally:
            rows._view, rows._collect_errors = original, errors
        self.assertIn("visited 3 rows of the page but kept 2", str(caught.exception))

    def test_bad_input_names_the_call_and_argument(self):
        txn = self.engine.begin()
        cases = [
            (lambda: self.engine.scan("t\0x"), wharf.InvalidArgument, "Engine.scan: table"),
            (lambda: self.engine.scan(3), TypeError, "Engine.scan: table"),
            (lambda: self.engine.scan("t", limit=0), wharf.InvalidArgument,
             "Engine.scan: limit 0"),
            (lambda: self.engine.scan("t", limit=-1), wharf.InvalidArgument,
             "Engine.scan: limit -1"),
            (lambda: self.engine.scan("t", limit="3"), TypeError, "Engine.scan: limit"),
            (lambda: self.engine.scan("t", page_size=0), wharf.InvalidArgument,
             "Engine.scan: page_size 0"),
            (lambda: self.engine.scan("t", page_size=100001), wharf.InvalidArgument,
             "Engine.scan: page_size 100001"),
            (lambda: self.engine.scan("t", prefix=5), TypeError, "Engine.scan: prefix"),
            (lambda: self.engine.scan("t", start="b", end="a"), wharf.InvalidArgument,
             "Engine.scan: start b'b' is not below end b'a'"),
            (lambda: self.engine.scan("t", start="a", end="a"), wharf.InvalidArgument,
             "Engine.scan: start"),
            (lambda: txn.scan("t\0"), wharf.InvalidArgument, "Txn.scan: table"),
            (lambda: txn.scan("t", limit=0), wharf.InvalidArgument, "Txn.scan: limit 0"),
            (lambda: self.engine.transact(3), TypeError, "Engine.transact: fn"),
            (lambda: self.engine.transact(lambda t: None, attempts_max=0), wharf.InvalidArgument,
             "Engine.transact: attempts_max 0"),
            (lambda: self.engine.transact(lambda t: None, backoff_min_ms=5, backoff_max_ms=1),
             wharf.InvalidArgument, "Engine.transact: backoff_min_ms 5 is above"),
            (lambda: self.engine.transact(lambda t: None, backoff_max_ms=-1),
             wharf.InvalidArgument, "Engine.transact: backoff_max_ms -1"),
        ]
        for call, error, named in cases:
            with self.assertRaises(error) as caught:
                call()
            self.assertIn(named, str(caught.exception))
        txn.abort()
        with self.assertRaises(wharf.InvalidArgument):
            txn.scan("t")
        self.engine.close()
        with self.assertRaises(wharf.Closed):
            self.engine.scan("t")
        with self.assertRaises(wharf.Closed):
            self.engine.transact(lambda t: None)


class TestExit(unittest.TestCase):
    # A script that ends with a started runtime (module-level engine and runtime, a subscriber
    # that sleeps 1 ms, 2 000 facts) aborted at exit ("FATAL: exception not rethrown", rc 134)
    # in 5 of 5 runs: its workers called into the finalizing interpreter. Several runs, because
    # the abort needs a worker inside a handler when the interpreter finalizes.
    SCRIPT = textwrap.dedent("""
        import os, sys, time
        import wharf
        engine = wharf.Engine(os.path.join(sys.argv[1], "db"), "partitions=4")
        engine.declare_types("A")
        runtime = wharf.Runtime(engine, "workers=2")
        runtime.subscribe("slow", ["A"], lambda fact: time.sleep(0.001))
        runtime.start()
        for i in range(20):
            with engine.begin() as txn:
                for j in range(100):
                    txn.emit("A", b"x", key=str(j))
        print("committed", flush=True)
        """)

    # async def subscribers at exit: coroutines in flight (one sleeping for an hour), the event
    # loop's thread running. The exit must neither hang nor warn (never awaited, task destroyed).
    ASYNC_SCRIPT = textwrap.dedent("""
        import asyncio, os, sys, threading
        import wharf
        engine = wharf.Engine(os.path.join(sys.argv[1], "db"), "partitions=4")
        engine.declare_types("A")
        runtime = wharf.Runtime(engine, "workers=2")
        started = threading.Event()
        async def hook(fact):
            started.set()
            await asyncio.sleep(3600 if fact.payload == b"forever" else 0.001)
        runtime.subscribe("hooks", ["A"], hook, {"key_concurrency": 8})
        runtime.start()
        with engine.begin() as txn:
            txn.emit("A", b"forever", key="f")
            for j in range(200):
                txn.emit("A", b"x", key=str(j))
        assert started.wait(30)
        print("committed", flush=True)
        """)

    def run_script(self, script):
        # The directory the package under test was imported from (the source tree, or a venv).
        here = os.path.dirname(os.path.dirname(os.path.abspath(wharf.__file__)))
        env = dict(os.environ, PYTHONPATH=here + os.pathsep + os.environ.get("PYTHONPATH", ""))
        with tempfile.TemporaryDirectory(prefix="wharf-py-exit-") as scratch:
            return subprocess.run([sys.executable, "-X", "dev", "-c", script, scratch],
                                  env=env, capture_output=True, text=True, timeout=120)

    def test_exit_with_async_handlers_in_flight(self):
        for run in range(2):
            begin = time.monotonic()
            result = self.run_script(self.ASYNC_SCRIPT)
            self.assertEqual((result.returncode, result.stdout), (0, "committed\n"),
                             f"run {run}: {result.stderr}")
            # -X dev turns on asyncio's debug mode, which also reports every callback slower
            # than 100 ms: on a loaded machine (the sanitizers) that is timing, not a defect.
            slow = re.compile(r"^Executing <.*> took [0-9.]+ seconds$")
            stderr = "".join(line for line in result.stderr.splitlines(keepends=True)
                             if not slow.match(line.rstrip("\n")))
            self.assertEqual(stderr, "")
            self.assertLess(time.monotonic() - begin, 60)

    def test_exit_with_a_started_runtime(self):
        # The directory the package under test was imported from (the source tree, or a venv).
        here = os.path.dirname(os.path.dirname(os.path.abspath(wharf.__file__)))
        env = dict(os.environ, PYTHONPATH=here + os.pathsep + os.environ.get("PYTHONPATH", ""))
        for run in range(3):
            with tempfile.TemporaryDirectory(prefix="wharf-py-exit-") as scratch:
                result = subprocess.run([sys.executable, "-c", self.SCRIPT, scratch], env=env,
                                        capture_output=True, text=True, timeout=120)
            self.assertEqual((result.returncode, result.stdout), (0, "committed\n"),
                             f"run {run}: {result.stderr}")
            self.assertNotIn("FATAL", result.stderr)


class Unprintable(Exception):
    """An exception whose str() itself raises."""

    def __str__(self):
        raise RuntimeError("no text for you")


class TestCallbackIntegrity(EngineTestCase):
    """No way out of a binding callback turns a failure into success; interrupts keep the fact;
    the exceptions kept are bounded; a runtime closed inside its own handler stops delivering."""

    def commit_many(self, count, key="alice"):
        with self.engine.begin() as txn:
            for i in range(count):
                txn.emit("OrderPlaced", f"o-{i}", key=key)
        return txn.last_fact_id

    def test_an_exception_whose_str_raises_fails_the_fact(self):
        last = self.commit_many(3)
        runtime = wharf.Runtime(self.engine)

        def index(fact, effects):
            effects.put("idx", str(fact.id), fact.payload)
            if fact.id == last - 1:
                raise Unprintable()
        runtime.project("idx", "OrderPlaced", index)
        runtime.drain()
        runtime.close()
        self.assertIsNone(self.engine.get("idx", str(last - 1)))  # its effects did not commit
        self.assertEqual(self.engine.get("idx", str(last)), b"o-2")
        [letter] = self.engine.dead_letters("idx")
        self.assertEqual(letter.fact.id, last - 1)
        self.assertIn("Unprintable: <str() of the exception raised RuntimeError>", letter.reason)

    def test_subscribers_raising_unprintable_exceptions_fail(self):
        async def hook(fact):
            raise Unprintable()
        for name, fn in [("sync", lambda fact: (_ for _ in ()).throw(Unprintable())),
                         ("async", hook)]:
            with self.subTest(name):
                fact_id = self.commit_many(1, key=name)
                runtime = wharf.Runtime(self.engine)
                runtime.subscribe(name, "OrderPlaced", fn, {"max_attempts": 1})
                runtime.drain()
                runtime.close()
                letters = [letter for letter in self.engine.dead_letters(name)
                           if letter.fact.id == fact_id]
                self.assertEqual(len(letters), 1, self.engine.dead_letters(name))
                self.assertIn("Unprintable", letters[0].reason)

    def test_a_list_callback_that_raises_fails_the_call(self):
        self.commit_many(2)
        original = wharf.Fact._from_handle

        def broken(handle):
            raise MemoryError("no memory for the fact")
        wharf.Fact._from_handle = staticmethod(broken)
        try:
            with self.assertRaises(MemoryError):
                self.engine.read_facts(self.engine.partition_of("alice"))
        finally:
            wharf.Fact._from_handle = staticmethod(original)
        self.assertEqual(len(self.engine.read_facts(self.engine.partition_of("alice"))), 2)
        self.assertEqual(wharf._collect_errors, {})

    def test_ctrl_c_in_a_projection_stops_the_drain_and_keeps_the_fact(self):
        last = self.commit_many(5)
        runtime = wharf.Runtime(self.engine, trace=lambda *event: None)
        calls = []

        def index(fact, effects):
            calls.append(fact.id)
            effects.put("idx", str(fact.id), fact.payload)
            if fact.id == last - 2 and calls.count(fact.id) == 1:
                os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C, as the terminal sends it
                time.sleep(5)  # interrupted at once
        runtime.project("idx", "OrderPlaced", index)
        begin = time.monotonic()
        with self.assertRaises(KeyboardInterrupt):
            runtime.drain()
        self.assertLess(time.monotonic() - begin, 4)
        self.assertEqual(calls, [last - 4, last - 3, last - 2])  # nothing after the interrupt
        self.assertIsNone(self.engine.get("idx", str(last - 2)))
        self.assertEqual(self.engine.dead_letters(), [])
        self.assertEqual(runtime.errors, [])
        runtime.drain()  # delivered again, once each
        runtime.close()
        self.assertEqual(calls[3:], [last - 2, last - 1, last])
        for fact_id in range(last - 4, last + 1):
            self.assertIsNotNone(self.engine.get("idx", str(fact_id)))
        self.assertEqual(self.engine.dead_letters(), [])

    def test_sys_exit_in_a_subscriber_stops_the_drain_and_keeps_the_fact(self):
        last = self.commit_many(3)
        runtime = wharf.Runtime(self.engine, trace=lambda *event: None)
        calls = []

        def hook(fact):
            calls.append(fact.id)
            if len(calls) == 2:
                sys.exit(3)
        runtime.subscribe("hook", "OrderPlaced", hook)
        with self.assertRaises(SystemExit) as caught:
            runtime.drain()
        self.assertEqual(caught.exception.code, 3)
        self.assertEqual(calls, [last - 2, last - 1])
        runtime.drain()
        runtime.close()
        self.assertEqual(calls, [last - 2, last - 1, last - 1, last])
        self.assertEqual(self.engine.dead_letters(), [])

    def test_errors_keeps_the_last_hundred(self):
        last = self.commit_many(150)
        runtime = wharf.Runtime(self.engine, trace=lambda *event: None)

        def index(fact, effects):
            raise ValueError(f"fact {fact.id}")
        runtime.project("idx", "OrderPlaced", index)
        runtime.drain()
        runtime.close()
        self.assertEqual(len(self.engine.dead_letters("idx")), 150)
        errors = runtime.errors
        self.assertEqual(len(errors), 100)
        self.assertEqual(wharf.Runtime.ERRORS_KEPT, 100)
        self.assertEqual(str(errors[-1]), f"fact {last}")
        self.assertEqual(str(errors[0]), f"fact {last - 99}")

    def test_close_inside_a_handler_stops_delivery_at_once(self):
        last = self.commit_many(5)
        events = []
        runtime = wharf.Runtime(self.engine, trace=lambda level, name, *rest: events.append(name))
        calls = []

        def index(fact, effects):
            calls.append(fact.id)
            effects.put("idx", str(fact.id), fact.payload)
            runtime.close()
        runtime.project("idx", "OrderPlaced", index)
        with self.assertRaises(wharf.Closed):
            runtime.drain()
        self.assertEqual(calls, [last - 4])
        self.assertIn("runtime-free-deferred", events)
        self.assertTrue(wharf._wait_for_deferred_frees(10))  # freed on wharf's thread
        self.assertEqual(wharf._callbacks, {})
        again = wharf.Runtime(self.engine)
        again.project("idx", "OrderPlaced", lambda fact, effects: calls.append(fact.id))
        again.drain()
        again.close()
        self.assertEqual(calls, list(range(last - 4, last + 1)))
        self.assertEqual(self.engine.dead_letters(), [])

    def test_a_runtime_collected_inside_its_own_handler_stops_delivering(self):
        self.commit_many(1)
        events = []
        holder = [wharf.Runtime(self.engine, "workers=1",
                                trace=lambda level, name, *rest: events.append(name))]
        calls = []
        delivered = threading.Event()

        def hook(fact):
            calls.append(fact.id)
            holder.clear()  # the last reference: the runtime is collected here, in its handler
            delivered.set()
        holder[0].subscribe("hook", "OrderPlaced", hook)
        holder[0].start()
        self.assertTrue(delivered.wait(10))
        self.commit_many(10)
        self.assertTrue(wharf._wait_for_deferred_frees(10))
        time.sleep(0.1)
        self.assertEqual(len(calls), 1)
        self.assertIn("runtime-free-deferred", events)


class TestFork(unittest.TestCase):
    # With the ASan runtime preloaded into the uninstrumented interpreter (the ASan build's run:
    # GCC's libasan or clang's libclang_rt.asan), the forked child hangs in about 1 run of 4, not
    # yet diagnosed; the C ABI's fork test (c_abi_lifecycle_test) runs under ASan, and this one in
    # release.
    @unittest.skipIf("asan" in os.environ.get("LD_PRELOAD", ""),
                     "a forked child of CPython with the ASan runtime preloaded may hang")
    def test_a_forked_child_leaves_the_parents_database_alone(self):
        script = textwrap.dedent("""
            import json, os, socket, sys, threading, time
            import wharf
            db = os.path.join(sys.argv[1], "db")
            engine = wharf.Engine(db, "partitions=2")
            engine.declare_types("A")
            runtime = wharf.Runtime(engine, "workers=2")
            seen = []
            runtime.subscribe("s", ["A"], lambda fact: seen.append(fact.id))
            runtime.start()
            with engine.begin() as txn:
                txn.emit("A", b"x", key="k")
            pid = os.fork()
            if pid == 0:  # the child leaves the parent's database alone, and exits normally
                try:
                    with engine.begin() as txn:
                        txn.emit("A", b"from the child", key="k")
                except wharf.Closed as e:
                    sys.exit(0 if "forked" in str(e) else 4)
                sys.exit(5)
            begin = time.monotonic()
            while True:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    break
                if time.monotonic() - begin > 20:
                    os.kill(pid, 9)
                    sys.exit("the child hung")
                time.sleep(0.01)
            print("child exit", os.waitstatus_to_exitcode(status), time.monotonic() - begin < 5)
            print("clean-close record", os.path.exists(os.path.join(db, "WHARF-CLOSED")))
            with socket.socket(socket.AF_UNIX) as admin:
                admin.settimeout(10)
                admin.connect(os.path.join(db, "admin.sock"))
                admin.sendall(b'{"v":2,"op":"hello"}\\n')
                print("admin answers", json.loads(admin.makefile().readline())["ok"])
            with engine.begin() as txn:
                txn.emit("A", b"y", key="k")
            deadline = time.monotonic() + 10
            while len(seen) < 2 and time.monotonic() < deadline:
                time.sleep(0.01)
            print("delivered", len(seen))
            """)
        here = os.path.dirname(os.path.dirname(os.path.abspath(wharf.__file__)))
        env = dict(os.environ, PYTHONPATH=here + os.pathsep + os.environ.get("PYTHONPATH", ""))
        with tempfile.TemporaryDirectory(prefix="wharf-py-fork-") as scratch:
            result = subprocess.run([sys.executable, "-c", script, scratch], env=env,
                                    capture_output=True, text=True, timeout=120)
        self.assertEqual((result.returncode, result.stdout),
                         (0, "child exit 0 True\nclean-close record False\nadmin answers True\n"
                             "delivered 2\n"), result.stderr)



class TestReplication(unittest.TestCase):
    """Replication over the C ABI against one real nats-server -js (replicate_replicas=1), started
    on a free port in a temp dir and stopped by pid: a primary committing under
    durability=replicated, restore_from_stream elsewhere, a Standby promoted by Engine(path,
    replicate=...) and the old primary's commit raising PrimaryFenced. About 5 s."""

    def setUp(self):
        import socket
        self.dir = tempfile.mkdtemp(prefix="wharf-py-repl-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        server = subprocess.Popen(["nats-server", "-js", "-a", "127.0.0.1", "-p", str(self.port),
                                   "-sd", os.path.join(self.dir, "nats")],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.addCleanup(server.wait)
        self.addCleanup(server.kill)
        for _ in range(300):
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        else:
            self.fail("nats-server did not start")

    def options(self, stream, durability="sync"):
        return {"partitions": 4, "admin_socket": "off", "durability": durability,
                "replicate": f"nats://127.0.0.1:{self.port}", "replicate_stream": stream,
                "replicate_replicas": 1, "replicate_timeout_ms": 5000}

    def commit_rows(self, engine, rows):
        engine.declare_types("RowWritten")
        for i in rows:
            with engine.begin() as txn:
                txn.put("rows", f"row-{i}", f"value-{i}")
                txn.emit("RowWritten", f"value-{i}", key=f"row-{i}")

    def expect_rows(self, path, count):
        with wharf.Engine(path, "admin_socket=off") as engine:
            for i in range(count):
                self.assertEqual(engine.get("rows", f"row-{i}"), f"value-{i}".encode(), i)

    def test_replicated_commits_are_in_a_restore_elsewhere(self):
        primary = os.path.join(self.dir, "primary")
        copy = os.path.join(self.dir, "copy")
        with wharf.Engine(primary, self.options("P1", "replicated")) as engine:
            self.commit_rows(engine, range(30))
            # The machine is lost: the primary's directory is not read again.
            report = wharf.restore_from_stream(self.options("P1"), copy)
            self.assertIsInstance(report, wharf.StreamRestoreReport)
            self.assertEqual(report.last_fact_id, 30)
            self.assertEqual(report.last_group, report.snapshot_group + report.groups_applied)
            self.assertRegex(report.snapshot_id, r"^[0-9a-f]{16}$")
            self.expect_rows(copy, 30)
            with self.assertRaises(wharf.InvalidArgument):  # not empty, no force
                wharf.restore_from_stream(self.options("P1"), copy)
            wharf.restore_from_stream(self.options("P1"), copy, force=True)
            self.expect_rows(copy, 30)
        # A standby does not start in a primary's directory.
        with self.assertRaises(wharf.InvalidArgument) as caught:
            wharf.Standby(self.options("P1"), primary)
        self.assertIn("not a copy", str(caught.exception))

    def test_refusals(self):
        with self.assertRaises(wharf.InvalidArgument) as caught:
            wharf.restore_from_stream(None, os.path.join(self.dir, "c"))
        self.assertIn("replicate=", str(caught.exception))
        with self.assertRaises(wharf.InvalidArgument):
            wharf.restore_from_stream(self.options("P0"), "")
        with self.assertRaises(wharf.InvalidArgument):
            wharf.restore_from_stream(self.options("P0"), os.path.join(self.dir, "c"), force=1)
        with self.assertRaises(wharf.NotFound):
            wharf.restore_from_stream(self.options("P0"), os.path.join(self.dir, "c"))
        with self.assertRaises(wharf.NotFound):
            wharf.Standby(self.options("P0"), os.path.join(self.dir, "s"))

    def test_standby_is_promoted_and_the_old_primary_is_fenced(self):
        primary_path = os.path.join(self.dir, "primary")
        copy = os.path.join(self.dir, "standby")
        primary = wharf.Engine(primary_path, self.options("P2", "replicated"))
        self.addCleanup(primary.close)
        self.commit_rows(primary, range(10))
        with wharf.Standby(self.options("P2"), copy) as standby:
            self.commit_rows(primary, range(10, 20))  # followed as they come
            deadline = time.monotonic() + 20
            state = standby.state()
            while state.last_fact_id < 20 and time.monotonic() < deadline:
                time.sleep(0.02)
                state = standby.state()
            self.assertEqual(state.last_fact_id, 20, state.error)
            self.assertIsInstance(state, wharf.StandbyState)
            self.assertGreaterEqual(state.stream_group, state.applied_group)
            self.assertGreater(state.last_applied_ms, 0)
            standby.stop()
            standby.stop()  # idempotent
            self.assertEqual(standby.state().applied_group, state.applied_group)
        self.assertTrue(standby.closed)
        with self.assertRaises(wharf.Closed):
            standby.state()
        # Promoted while the old primary still runs: Engine(path, replicate=...) takes over.
        with wharf.Engine(copy, self.options("P2", "replicated")) as promoted:
            self.commit_rows(promoted, range(20, 25))
            with self.assertRaises(wharf.PrimaryFenced) as caught:
                with primary.begin() as txn:
                    txn.put("rows", "fork", "no")
            self.assertIsInstance(caught.exception, wharf.Conflict)
            self.assertEqual(caught.exception.subcode, wharf.SUBCODE_PRIMARY_FENCED)
            primary.close()
            with self.assertRaises(wharf.PrimaryFenced):
                wharf.Engine(primary_path, self.options("P2", "replicated"))
        self.expect_rows(copy, 25)

if __name__ == "__main__":
    unittest.main()
