"""The cache-economics benchmark's printed output: a table per workload, every strategy under both
modes side by side, and the verdicts against its targets."""
from __future__ import annotations

from typing import Any

from bench.economics.accounting import MODES, REWARM_HIT_RATE, same_requests
from bench.economics.workload import MODEL, SEEDS, Workload

BASELINE = "system_and_3"
TARGET_S3_SHARE = 0.25
TARGET_BEST_SAVING = 0.15


def _pauses_line(workload: Workload) -> str:
    pauses = [t.pause for t in workload.turns[1:]]
    over5 = sum(1 for p in pauses if p > 300)
    over60 = sum(1 for p in pauses if p > 3600)
    median = sorted(pauses)[len(pauses) // 2] if pauses else 0
    seed = SEEDS[workload.pattern] if workload.seed is None else workload.seed
    return (f"{workload.pattern} workload: {len(workload.turns)} turns on {MODEL}, random seed {seed}; "
            f"{over5} of {len(pauses)} pauses > 5 min ({over60} > 1 h), median {median:.0f} s")


def format_table(results: dict[str, dict[str, Any]], workload: Workload | None = None) -> str:
    """One workload's results: every strategy under both modes side by side."""
    base = {m: results.get(BASELINE, {}).get(m, {}).get("figures") for m in MODES}
    group = f"{'':<18}{'documented (default)':^47}  {'optimistic (1h re-pin promotes)':^32}"
    head = (f"{'strategy':<18}{'input $':>9}{'vs none':>8}{'vs s&3':>8}{'hit':>7}{'write%':>7}{'x limit':>8}  "
            f"{'input $':>9}{'vs s&3':>8}{'hit':>7}{'x limit':>8}  {'compr':>5}{'rewarm':>7}{'total $':>9}")
    lines = [_pauses_line(workload)] if workload is not None else []
    lines += [group, head, "-" * len(head)]
    for spec, res in results.items():
        d, o = res["documented"]["figures"], res["optimistic"]["figures"]

        def vs(f, mode):
            b = base[mode]
            return f"{f['input_cost'] / b['input_cost']:.3f}" if b and b["input_cost"] else "-"

        rw = "-" if d["rewarm_mean"] is None else f"{d['rewarm_mean']:.1f}"
        lines.append(
            f"{spec:<18}{d['input_cost']:>9.4f}{d['relative_to_none']:>8.3f}{vs(d, 'documented'):>8}"
            f"{d['hit_rate']:>7.1%}{d['write_share']:>7.1%}{d['x_lower_bound']:>8.2f}  "
            f"{o['input_cost']:>9.4f}{vs(o, 'optimistic'):>8}{o['hit_rate']:>7.1%}{o['x_lower_bound']:>8.2f}  "
            f"{d['compressions']:>5}{rw:>7}{d['total_cost']:>9.4f}"
        )
    limits = {round(r["documented"]["figures"]["lower_bound"], 6) for r in results.values()}
    limit = ", ".join(f"{x:.4f}" for x in sorted(limits))
    lines.append("")
    lines.append(f"lower bound under the documented rules: ${limit} (every prefix re-sent within 1 h at the hit "
                 "price, every new token once: 5m write price if read back later, else base input)")
    lines.append("same requests for every strategy (prompt tokens, call by call): "
                 + ("yes" if same_requests(results) else "NO"))
    lines.append("input $ = agent calls' billed input; vs none = / the same prompts uncached; hit = read / prompt; "
                 "write% = writes' share of input $;")
    lines.append(f"rewarm = agent calls after a compression until one reads >= {REWARM_HIT_RATE:.0%} of its prompt; "
                 "total $ = agent in+out + summariser (documented).")
    lines.append("")
    for spec, res in results.items():
        f = res["documented"]["figures"]
        lines.append(f"{spec}: {f['agent_calls']} agent calls, {f['summariser_calls']} summariser calls "
                     f"(${f['summariser_cost']:.4f}), failed turns {f['failed_turns']}, rewarm per compression "
                     f"{f['rewarm']}, {f['seconds']:.0f} s")
    return "\n".join(lines)


def verdict(results: dict[str, dict[str, Any]], mode: str = "documented") -> list[str]:
    out = []
    base = results.get(BASELINE, {}).get(mode, {}).get("figures")
    if not base:
        return out
    out.append(f"target system_and_3 <= {TARGET_S3_SHARE:.0%} of no-cache input ({mode}): "
               f"{base['relative_to_none']:.1%} -> {'MET' if base['relative_to_none'] <= TARGET_S3_SHARE else 'MISSED'}")
    others = {s: r[mode]["figures"] for s, r in results.items() if s not in (BASELINE, "none")}
    if others:
        best, f = min(others.items(), key=lambda kv: kv[1]["input_cost"])
        saving = 1 - f["input_cost"] / base["input_cost"]
        ok = saving >= TARGET_BEST_SAVING and f["compressions"] <= base["compressions"] and same_requests(results)
        out.append(f"target best >= {TARGET_BEST_SAVING:.0%} cheaper than system_and_3 ({mode}): {best} "
                   f"{saving:.1%} cheaper, {f['compressions']} vs {base['compressions']} compressions -> "
                   f"{'MET' if ok else 'MISSED'}")
    return out
