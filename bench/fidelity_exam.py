"""The fidelity benchmark's real-model exam (run only when ANTHROPIC_API_KEY is set): each planted
fact's question is asked of a real model on the context the agent would have next, with the
agent's tools (the engine's recall tools answered by the engine, the workspace tools in the
conversation's workspace), at most two tool rounds; an answer scores when it holds the fact's
exact answer string (case-insensitive). Tokens and cost are the calls' own usage at the model's
catalogue prices. Nothing is stored: the conversation is not changed by the exam."""
from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

TOOL_ROUNDS = 2
MAX_TOKENS = 400
INSTRUCTION = " Answer with the exact value from our conversation, as briefly as you can."


def exam(provider, model: str, messages: Sequence[dict], tools: list[dict], engine, facts,
         run_workspace_tool: Callable[[str, str], str] | None = None) -> dict[str, Any]:
    from llm.models import get_model
    from llm.usage import compute_cost

    price = get_model(model).price
    engine_tools = {t["name"] for t in engine.get_tool_schemas()}
    right = tool_calls = input_tokens = output_tokens = 0
    cost = 0.0
    for fact in facts:
        convo = [*messages, {"role": "user", "content": fact.question + INSTRUCTION}]
        answer = ""
        for round_ in range(TOOL_ROUNDS + 1):
            final = provider.complete(convo, model=model, max_tokens=MAX_TOKENS, tools=tools)
            input_tokens += final.usage.prompt_tokens
            output_tokens += final.usage.output
            cost += compute_cost(final.usage, price).cost
            answer = final.text
            if not final.tool_calls or round_ == TOOL_ROUNDS:
                break
            convo.append({"role": "assistant", "content": final.message.get("content"),
                          "tool_calls": final.tool_calls})
            for call in final.tool_calls:
                fn = call.get("function") or {}
                name, arguments = fn.get("name", ""), fn.get("arguments") or "{}"
                tool_calls += 1
                if name in engine_tools:
                    try:
                        args = json.loads(arguments)
                    except ValueError:
                        args = {}
                    content = engine.handle_tool_call(name, args if isinstance(args, dict) else {}, messages=convo)
                elif run_workspace_tool is not None:
                    content = run_workspace_tool(name, arguments)
                else:
                    content = f"Error: {name} is not available during the exam"
                convo.append({"role": "tool", "tool_call_id": call.get("id", ""), "name": name, "content": content})
        right += fact.answer.lower() in (answer or "").lower()
    return {"model": model, "score": right / len(facts) if facts else 0.0, "right": right, "asked": len(facts),
            "input_tokens": input_tokens, "output_tokens": output_tokens, "cost": cost, "tool_calls": tool_calls}
