"""Uses of the wharf package as the README and docs/bindings.md show them, for mypy --strict
(ctest python_typing checks this file with the package): each must type-check as written. Lines
marked `type: ignore[...]` are misuses mypy must refuse: --strict warns about an ignore that is
not needed, so accepting one of them fails the check. Nothing here runs (the functions are never
called)."""

import asyncio
from typing import List, Optional, Tuple

import wharf


def trace_with_attempt(runtime_options: str, engine: wharf.Engine) -> wharf.Runtime:
    events: List[Tuple[str, int]] = []

    # The documented shape: the five event fields and `attempt` (which delivery it is about).
    def trace(level: wharf.TraceLevel, name: str, consumer: str, fact_id: int, reason: str,
              attempt: int) -> None:
        events.append((name, attempt))

    return wharf.Runtime(engine, runtime_options, trace=trace)


def trace_without_attempt(engine: wharf.Engine) -> wharf.Runtime:
    def trace(level: wharf.TraceLevel, name: str, consumer: str, fact_id: int,
              reason: str) -> None:
        print(level, name, consumer, fact_id, reason)

    return wharf.Runtime(engine, trace=trace)


def trace_with_keyword_only_attempt(engine: wharf.Engine) -> wharf.Runtime:
    def trace(lvl: wharf.TraceLevel, what: str, who: str, fact: int, why: str, *,
              attempt: int = 0) -> None:
        print(lvl, what, who, fact, why, attempt)

    return wharf.Runtime(engine, trace=trace)


def trace_of_the_wrong_shape(engine: wharf.Engine) -> None:
    def trace(level: wharf.TraceLevel, name: str) -> None:
        print(level, name)

    wharf.Runtime(engine, trace=trace)  # type: ignore[arg-type]


def emit_takes_the_key_by_keyword(engine: wharf.Engine) -> None:
    with engine.begin() as txn:
        txn.emit("OrderPlaced", b"o-1", key="alice")
        txn.emit("OrderPlaced", b"o-2", key=b"bob", headers=[("trace-id", b"abc")], v=1,
                 deliver_at_ms=0)
        txn.emit("OrderPlaced", "alice", b"o-3")  # type: ignore[misc]


def handlers(engine: wharf.Engine) -> None:
    runtime = wharf.Runtime(engine)

    @runtime.projection("order-index", ["OrderPlaced"])
    def index(fact: wharf.Fact, effects: wharf.Effects) -> None:
        effects.put("by-customer", fact.key, fact.payload)

    @runtime.subscriber("webhooks", ["OrderPlaced"], {"key_concurrency": 16})
    async def notify(fact: wharf.Fact) -> Optional[wharf.Outcome]:
        await asyncio.sleep(0)
        return wharf.Outcome.HANDLED if fact.attempt < 5 else wharf.Outcome.REJECTED

    runtime.drain()
    runtime.close()


async def asyncio_on_the_callers_loop(path: str) -> int:
    async with await wharf.open_async(path, {"partitions": 16}) as engine:
        await engine.declare_types("OrderPlaced")
        async with engine.transaction() as txn:
            txn.emit("OrderPlaced", b"o-1", key="alice")
        async with wharf.AsyncRuntime(engine, "workers=2") as runtime:
            @runtime.subscriber("webhooks", ["OrderPlaced"], {"key_concurrency": 64})
            async def notify(fact: wharf.Fact) -> None:
                await asyncio.sleep(0.005)

            await runtime.drain()
        rows: List[Tuple[bytes, bytes]] = await engine.scan("orders", limit=10)
        return txn.last_fact_id + len(rows)


def a_sync_handler_is_not_an_async_subscriber(runtime: wharf.AsyncRuntime) -> None:
    def sync(fact: wharf.Fact) -> None:
        pass

    runtime.subscribe("sync", ["OrderPlaced"], sync)  # type: ignore[arg-type]
