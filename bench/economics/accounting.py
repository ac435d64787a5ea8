"""The cache-economics benchmark's accounting: model calls as billed, their costs, the input-cost
lower bound and the re-warm count after a compression, as bench/cache_economics.py's docstring
defines them."""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

REWARM_HIT_RATE = 0.5
LIMIT_TTL_SECONDS = 3600.0
MODES = ("documented", "optimistic")
PER_MILLION = 1_000_000


@dataclass
class Call:
    """One successful model call as billed, plus the request the simulator saw."""

    purpose: str  # agent | compression
    input: int
    output: int
    cache_read: int
    cache_write_5m: int
    cache_write_1h: int
    time: float = 0.0
    block_tokens: Sequence[int] = ()
    block_hashes: Sequence[str] = ()

    @property
    def cache_write(self) -> int:
        return self.cache_write_5m + self.cache_write_1h

    @property
    def prompt(self) -> int:
        return self.input + self.cache_read + self.cache_write

    @property
    def hit_rate(self) -> float:
        return self.cache_read / self.prompt if self.prompt else 0.0


def _usage(call: Call):
    from llm.usage import Usage

    return Usage(input=call.input, output=call.output, cache_read=call.cache_read, cache_write=call.cache_write,
                 cache_write_5m=call.cache_write_5m, cache_write_1h=call.cache_write_1h)


def input_cost(call: Call, price) -> float:
    """Billed input cost of one call: ``compute_cost`` without the output tokens."""
    from llm.usage import compute_cost

    return compute_cost(_usage(call), price).cost - call.output * price.output / PER_MILLION


def write_cost(call: Call, price) -> float:
    return (call.cache_write_5m * price.cache_write_5m + call.cache_write_1h * price.cache_write_1h) / PER_MILLION


def lower_bound(calls: Iterable[Call], price, ttl_seconds: float = LIMIT_TTL_SECONDS) -> float:
    """The input-cost floor of the module docstring over these requests (agent calls, in order)."""
    calls = list(calls)
    last_sent: dict[str, float] = {}
    origin: dict[str, int] = {}  # prefix hash -> the request that last sent it as new
    reused: set[tuple[str, int]] = set()
    reads: list[int] = []
    for r, call in enumerate(calls):
        hashes = call.block_hashes
        read_end = -1
        for i in range(len(hashes) - 1, -1, -1):
            seen = last_sent.get(hashes[i])
            if seen is not None and call.time - seen <= ttl_seconds:
                read_end = i
                break
        for i in range(read_end + 1):
            reused.add((hashes[i], origin.get(hashes[i], -1)))
        for i, h in enumerate(hashes):
            last_sent[h] = call.time
            if i > read_end:
                origin[h] = r
        reads.append(read_end)
    total = 0.0
    for r, (call, read_end) in enumerate(zip(calls, reads)):
        tokens = call.block_tokens
        read = sum(tokens[: read_end + 1])
        total += read * price.cache_read
        for i in range(read_end + 1, len(tokens)):
            total += tokens[i] * (price.cache_write_5m if (call.block_hashes[i], r) in reused else price.input)
    return total / PER_MILLION


def rewarm_counts(calls: Sequence[Call], threshold: float = REWARM_HIT_RATE) -> list[int | None]:
    """For each summariser call (a compression), the agent calls up to and including the first one
    whose hit rate reaches ``threshold`` (None: never within the replay)."""
    out: list[int | None] = []
    for k, call in enumerate(calls):
        if call.purpose != "compression":
            continue
        n, found = 0, None
        for later in calls[k + 1:]:
            if later.purpose != "agent":
                if later.purpose == "compression":
                    break
                continue
            n += 1
            if later.hit_rate >= threshold:
                found = n
                break
        out.append(found)
    return out


def summarize(calls: Sequence[Call], price, *, compressions: int | None = None) -> dict[str, Any]:
    agent = [c for c in calls if c.purpose == "agent"]
    aux = [c for c in calls if c.purpose != "agent"]
    cost_in = sum(input_cost(c, price) for c in agent)
    no_cache = sum(c.prompt for c in agent) * price.input / PER_MILLION
    writes = sum(write_cost(c, price) for c in agent)
    prompt = sum(c.prompt for c in agent)
    output = sum(c.output for c in agent) * price.output / PER_MILLION
    aux_cost = sum(input_cost(c, price) + c.output * price.output / PER_MILLION for c in aux)
    limit = lower_bound(agent, price)
    rewarm = rewarm_counts(calls)
    done = [r for r in rewarm if r is not None]
    return {
        "agent_calls": len(agent),
        "summariser_calls": len(aux),
        "compressions": len(rewarm) if compressions is None else compressions,
        "prompt_tokens": prompt,
        "cache_read": sum(c.cache_read for c in agent),
        "cache_write_5m": sum(c.cache_write_5m for c in agent),
        "cache_write_1h": sum(c.cache_write_1h for c in agent),
        "input_cost": cost_in,
        "no_cache_input_cost": no_cache,
        "relative_to_none": cost_in / no_cache if no_cache else 0.0,
        "hit_rate": sum(c.cache_read for c in agent) / prompt if prompt else 0.0,
        "write_share": writes / cost_in if cost_in else 0.0,
        "rewarm": rewarm,
        "rewarm_mean": sum(done) / len(done) if done else None,
        "output_cost": output,
        "summariser_cost": aux_cost,
        "total_cost": cost_in + output + aux_cost,
        "lower_bound": limit,
        "x_lower_bound": cost_in / limit if limit else 0.0,
    }


def same_requests(results: dict[str, dict[str, Any]]) -> bool:
    """True when every strategy of one workload sent the same prompts, call by call."""
    shapes = {tuple(c.prompt for c in r["documented"]["calls"]) for r in results.values()}
    return len(shapes) <= 1
