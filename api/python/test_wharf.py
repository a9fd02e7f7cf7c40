"""Tests of the Python binding (run by ctest with WHARF_LIBRARY set to the built libwharf.so):
commit and read, exactly-once projection across a reopen, reactions, a subscriber, async
commits, cursors and dead letters, and the error cases mapped from the C status codes."""

import os
import shutil
import tempfile
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
        with self.engine.begin() as txn:
            txn.emit("OrderPlaced", b"p", key="k", headers=[("trace-id", b"abc")], v=3)
        (fact,) = self.engine.read_facts(self.engine.partition_of("k"))
        self.assertEqual(fact.headers, [("trace-id", b"abc")])
        self.assertEqual(fact.version, 3)

        with self.engine.begin() as txn:
            txn.emit("OrderPlaced", b"later", key="k", deliver_at_ms=1)  # due already
        runtime = wharf.Runtime(self.engine, "workers=0")
        self.assertEqual(runtime.release_timers(), 1)
        runtime.close()
        payloads = [f.payload for f in self.engine.read_facts(self.engine.partition_of("k"))]
        self.assertEqual(payloads, [b"p", b"later"])

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

    def test_subscriber_at_least_once(self):
        delivered = []
        attempts = {"flaky": 0}
        traces = []
        got_all = threading.Event()

        def trace(level, name, consumer, fact_id, reason):
            traces.append((name, consumer))

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
        self.assertEqual(traces.count(("subscriber-failed", "mailer")), 2)

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


if __name__ == "__main__":
    unittest.main()
