"""Record one model call: tokens, cache reads/writes, cost and what caching saved."""
from __future__ import annotations

from decimal import Decimal

from compression import settings_store
from llm.models import get_model
from llm.usage import Usage, compute_cost
from sessions.models import ApiCall


def price_of(model: str):
    price = settings_store.price_for(model)
    if price:
        return price
    info = get_model(model)
    return info.price if info else None


def usage_record(*, conversation_id, session_id, usage: Usage | None, model: str, provider: str, purpose: str = "agent",
                 latency: float = 0.0, stop_reason: str = "", error: str = "") -> ApiCall:
    usage = usage or Usage()
    price = price_of(model)
    cost = compute_cost(usage, price) if price else None
    return ApiCall.objects.create(
        conversation_id=conversation_id, session_id=session_id, purpose=purpose, provider=provider, model=model,
        input_tokens=usage.input, output_tokens=usage.output, cache_read_tokens=usage.cache_read,
        cache_write_tokens=usage.cache_write, cache_write_5m_tokens=usage.cache_write_5m,
        cache_write_1h_tokens=usage.cache_write_1h, prompt_tokens=usage.prompt_tokens,
        cost=Decimal(str(round(cost.cost, 6))) if cost else 0,
        cost_without_cache=Decimal(str(round(cost.no_cache_cost, 6))) if cost else 0,
        latency_ms=int(latency * 1000), stop_reason=stop_reason or "", error=error[:2000],
    )
