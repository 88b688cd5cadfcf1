"""Result cache benchmark: the same upload answered by a render once, then from the cache.

    python -m bench.result_cache [--hits 100]

Starts `foley serve` in its own process (the shipped model) and posts the 10 s 1280x720 H.264
clip of bench.offline for a WAV track: once (a miss: the render) and then --hits times (hits),
over one keep-alive connection on loopback. Twice: with the in-process cache (no Redis), and with
a real Redis cache (redis-server on a free port, `--maxmemory 256mb --maxmemory-policy
allkeys-lru`, as deployed).

Server time is the response's Server-Timing `total`: from the route's first line (after HTTP
parsing and query validation) to the response being built. It includes receiving the multipart
body, writing the upload to disk and hashing it, the cache lookup and decoding the entry (a hit)
or the render (a miss); not sending the response, nor storing the result and removing the work
dir, which follow the response. The client's round trip (send the upload, read the whole answer)
is printed beside it.
"""

from __future__ import annotations

import argparse
import http.client
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import redis

from bench.machine import describe
from bench.offline import bench_clip
from bench.servers import foley_serve, redis_server

BOUNDARY = "foley-bench-boundary"
# The cache Redis as deployed (docker-compose.yml), at a smaller size.
CACHE_REDIS = ("--save", "", "--appendonly", "no", "--maxmemory", "256mb",
               "--maxmemory-policy", "allkeys-lru")  # fmt: skip


@dataclass
class Answer:
    cache: str  # X-Foley-Cache
    timing_ms: dict[str, float]  # Server-Timing
    client_ms: float
    body: bytes


def multipart(clip: Path) -> bytes:
    head = (
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="{clip.name}"\r\n'
        "Content-Type: video/mp4\r\n\r\n"
    ).encode()
    return head + clip.read_bytes() + f"\r\n--{BOUNDARY}--\r\n".encode()


def post(conn: http.client.HTTPConnection, body: bytes) -> Answer:
    started = time.perf_counter()
    conn.request(
        "POST",
        "/v1/foley?format=wav",
        body,
        {"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"},
    )
    response = conn.getresponse()
    content = response.read()
    client_ms = 1000 * (time.perf_counter() - started)
    if response.status != 200:
        raise RuntimeError(f"HTTP {response.status}: {content[:200]!r}")
    timing = {}
    for metric in response.getheader("Server-Timing", "").split(", "):
        name, _, duration = metric.partition(";dur=")
        timing[name] = float(duration)
    return Answer(response.getheader("X-Foley-Cache", ""), timing, client_ms, content)


def measure(port: int, body: bytes, hits: int) -> tuple[Answer, list[Answer]]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        miss = post(conn, body)
        assert miss.cache == "miss", miss.cache
        time.sleep(0.5)  # the result is stored after its response has been sent
        answers = [post(conn, body) for _ in range(hits)]
    finally:
        conn.close()
    assert all(a.cache == "hit" for a in answers), [a.cache for a in answers]
    assert all(a.body == miss.body for a in answers), "a hit answered other bytes"
    return miss, answers


COLUMNS = ("cache", "request", "n", "server p50", "server p95", "upload p50", "cache p50",
           "client p50")  # fmt: skip
WIDTHS = (10, 7, 3, 10, 10, 10, 9, 10)


def line(cells: list[str]) -> str:
    aligned = [
        cell.ljust(width) if i < 2 else cell.rjust(width)
        for i, (cell, width) in enumerate(zip(cells, WIDTHS, strict=True))
    ]
    return "| " + " | ".join(aligned) + " |"


def rows(cache: str, miss: Answer, hits: list[Answer]) -> list[str]:
    def row(what: str, answers: list[Answer]) -> str:
        def ms(values: list[float], q: float = 50) -> str:
            return f"{np.percentile(values, q):.1f}" if values else "-"

        total = [a.timing_ms["total"] for a in answers]
        lookup = [a.timing_ms["cache"] for a in answers if "cache" in a.timing_ms]
        return line(
            [
                cache,
                what,
                str(len(answers)),
                ms(total),
                ms(total, 95),
                ms([a.timing_ms["upload"] for a in answers]),
                ms(lookup),
                ms([a.client_ms for a in answers]),
            ]
        )

    return [row("miss", [miss]), row("hit", hits)]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hits", type=int, default=100)
    args = parser.parse_args(argv)
    clip = bench_clip()
    body = multipart(clip)
    table = []
    with foley_serve({}) as port:
        miss, hits = measure(port, body, args.hits)
        table += rows("in-process", miss, hits)
    with (
        redis_server(*CACHE_REDIS) as url,
        foley_serve({"FOLEY_REDIS_URL": url}) as port,
    ):
        miss, hits = measure(port, body, args.hits)
        table += rows("redis", miss, hits)
    parser_name = "hiredis" if redis.utils.HIREDIS_AVAILABLE else "pure Python"
    redis_version = subprocess.run(
        ["redis-server", "--version"], capture_output=True, text=True, check=True
    ).stdout.split()[2]
    print(f"machine: {describe()}")
    print(f"redis-server {redis_version.removeprefix('v=')}, redis-py {redis.__version__} "
          f"({parser_name} reply parser)")  # fmt: skip
    print(
        f"clip: {clip.name} ({clip.stat().st_size / 1e3:.0f} kB upload, "
        f"{len(miss.body) / 1e3:.0f} kB WAV answer), 1 miss then {args.hits} hits, one "
        "keep-alive connection over loopback\n"
    )
    print(line(list(COLUMNS)))
    print("|" + "|".join("-" * (width + 2) for width in WIDTHS) + "|")
    for row in table:
        print(row)
    print(
        "\nms. server: Server-Timing total (the route's first line to the response built: upload "
        "received, written and hashed, lookup, render on a miss); upload, cache: its parts; "
        "client: the round trip, sending the upload and reading the whole answer."
    )


if __name__ == "__main__":
    main()
