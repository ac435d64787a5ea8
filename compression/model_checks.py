"""Model settings checked against the model catalogue (SPEC §7.1, §9): what the pure validator in
`compression.core` cannot know because the catalogue lives in `llm`.

- the main model must be in the catalogue, or come with its window (`model.context_length`);
- its window, from the catalogue or the override, must be at least the 64,000-token minimum;
- the `custom` route needs the endpoint's base URL;
- an auxiliary model the catalogue knows must have a window of at least the minimum.

Each problem is (setting, message); the message names the setting, as the validator's do.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from compression.core.thresholds import MINIMUM_CONTEXT_LENGTH
from llm.models import get_model


def main_model_problems(values: Mapping[str, Any]) -> list[tuple[str, str]]:
    model = str(values.get("model") or "").strip()
    provider = str(values.get("provider") or "").strip()
    window = values.get("context_length")
    problems: list[tuple[str, str]] = []
    if provider == "custom" and not values.get("base_url"):
        problems.append(("base_url", "model.base_url: the custom provider needs the endpoint's base URL "
                                     "(an OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1)."))
    if not model or window:
        return problems  # an empty name is the validator's to refuse; an override decides the window
    info = get_model(model)
    if info is None:
        problems.append(("model", f"model.model: {model!r} is not in the model catalogue. Check the spelling, or "
                                  "give the model's window in model.context_length."))
    elif info.context_window < MINIMUM_CONTEXT_LENGTH:
        problems.append(("model", f"model.context_length: {model} has a {info.context_window:,}-token window, below "
                                  f"the minimum of {MINIMUM_CONTEXT_LENGTH:,} that compression needs. Choose a "
                                  "larger model."))
    return problems


def auxiliary_model_problems(values: Mapping[str, Any]) -> list[tuple[str, str]]:
    model = str(values.get("model") or "").strip()
    info = get_model(model) if model else None
    if info is not None and info.context_window < MINIMUM_CONTEXT_LENGTH:
        return [("model", f"auxiliary.compression.model: {model} has a {info.context_window:,}-token window, below "
                          f"the minimum of {MINIMUM_CONTEXT_LENGTH:,}: it could not read the middle it is asked to "
                          "summarise. Choose a larger model.")]
    return []
