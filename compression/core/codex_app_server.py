"""The ``compression.codex_app_server_auto`` decision (SPEC §9; Hermes Agent's codex app-server route).

The product offers no Codex app-server route, so the setting is stored and validated and this
decision is unit-tested, ready for such a route. Pure; no state.
"""

from __future__ import annotations

from dataclasses import dataclass

CODEX_APP_SERVER_MODES = ("native", "hermes", "off")


@dataclass(frozen=True)
class CodexAppServerDecision:
    """What a Codex app-server route does about compaction.

    ``run_preflight``: the turn-prologue preflight check runs (only in ``hermes`` mode).
    ``compact_thread``: this ``compress`` call asks the Codex thread to compact itself.
    ``record_native``: compactions Codex starts on its own are recorded (``native`` mode).
    """

    mode: str
    run_preflight: bool
    compact_thread: bool
    record_native: bool
    reason: str


def decide_codex_app_server(mode: str, *, force: bool = False, has_live_thread: bool = True
                            ) -> CodexAppServerDecision:
    """The ``codex_app_server_auto`` decision. An unknown mode is treated as ``native`` (as built).

    - preflight runs only in ``hermes`` mode (skipped in ``native`` and ``off``);
    - a non-forced compression outside ``hermes`` mode is skipped (Codex owns the context);
    - a forced (manual) compression compacts the thread in every mode;
    - without a live Codex thread nothing is compacted.
    """
    if mode not in CODEX_APP_SERVER_MODES:
        mode = "native"
    run_preflight = mode == "hermes"
    record_native = mode == "native"
    if not has_live_thread:
        return CodexAppServerDecision(mode, run_preflight, False, record_native, "no live Codex thread")
    if not force and mode != "hermes":
        return CodexAppServerDecision(mode, run_preflight, False, record_native,
                                      f"skipped: codex_app_server_auto is {mode}")
    return CodexAppServerDecision(mode, run_preflight, True, record_native,
                                  "forced compaction" if force else "hermes-triggered compaction")
