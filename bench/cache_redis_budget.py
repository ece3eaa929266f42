"""What the Redis budget of the response cache costs a write (docs/cache.md, "Storage").

A redis-server of its own on a free port; 1 KiB answers written one after another, as a router's
event loop writes them, in interleaved rounds:

- `set`: the write before the budget, a SET with its TTL (the baseline);
- `budget`: the budget's script (`router/response_cache.py`, `_KEEP`) below the budget: the
  answer, its index entry, its size and the total;
- `evicting`: the same script at the budget, so that every write also deletes the oldest answer.

Per kind: the time a write takes seen from the client (median of the rounds), and what Redis
spent on it (`INFO commandstats`: microseconds of its one thread per call), the ratio to `set`.

    python -m bench.cache_redis_budget   (take /tmp/bench.lock first)
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import statistics
import subprocess
import time

from redis.asyncio import Redis

from chainrouter.router.response_cache import _REDIS_PREFIX, RedisTier, counted_bytes

WRITES = 5_000  # per kind and round
ROUNDS = 5
ANSWER = b'"' + b"a" * 1022 + b'"'


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


async def _server_usec(redis: Redis, command: str) -> tuple[int, float]:
    stats = await redis.info("commandstats")
    found = stats.get(f"cmdstat_{command}", {"calls": 0, "usec": 0})
    return int(found["calls"]), float(found["usec"])


async def main() -> None:
    port = _free_port()
    binary = shutil.which("redis-server")
    assert binary
    server = subprocess.Popen(
        [binary, "--port", str(port), "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
    )
    try:
        for _ in range(100):  # until it listens
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                await asyncio.sleep(0.05)
        redis = Redis(port=port)
        # Below the budget: room for every write of every round.
        roomy = RedisTier(redis, timeout_s=5.0, ttl_s=3600, max_bytes=1 << 40)
        # At the budget: room for 2,000 answers, so each write past them evicts one.
        size = counted_bytes(f"1:0.0:m:{0:040x}", ANSWER)
        tight_redis = Redis(port=port, db=1)  # an index of its own
        tight = RedisTier(tight_redis, timeout_s=5.0, ttl_s=3600, max_bytes=2_000 * size)
        took: dict[str, list[float]] = {"set": [], "budget": [], "evicting": []}
        server_usec: dict[str, list[float]] = {"set": [], "budget": [], "evicting": []}
        serial = 0
        for n in range(2_000):  # fill the tight budget first
            await tight._set(f"1:0.0:fill:{n:040x}", ANSWER)
        for _ in range(ROUNDS):
            for kind in ("set", "budget", "evicting"):
                await redis.config_resetstat()
                started = time.perf_counter()
                for _ in range(WRITES):
                    serial += 1
                    key = f"{kind[0]}:0.0:m:{serial:040x}"
                    if kind == "set":
                        await redis.set(_REDIS_PREFIX + key, ANSWER, ex=3600)
                    else:
                        await (roomy if kind == "budget" else tight)._set(key, ANSWER)
                took[kind].append((time.perf_counter() - started) / WRITES * 1e6)
                command = "set" if kind == "set" else "evalsha"
                calls, usec = await _server_usec(redis, command)
                server_usec[kind].append(usec / max(calls, 1))
            await redis.flushdb()  # the roomy answers and the baseline's: db 0 only
        assert tight.evicted >= ROUNDS * WRITES
        base_client = statistics.median(took["set"])
        base_server = statistics.median(server_usec["set"])
        print(f"{WRITES:,} writes of {len(ANSWER):,}-byte answers, {ROUNDS} interleaved rounds")
        print("kind       client µs/write  ratio   Redis µs/write  ratio")
        for kind in ("set", "budget", "evicting"):
            client = statistics.median(took[kind])
            inside = statistics.median(server_usec[kind])
            print(
                f"{kind:<10} {client:>15.1f} {client / base_client:>6.2f}x "
                f"{inside:>15.2f} {inside / base_server:>6.2f}x"
            )
        await redis.aclose()
        await tight_redis.aclose()
    finally:
        server.kill()
        server.wait(10)


if __name__ == "__main__":
    asyncio.run(main())
