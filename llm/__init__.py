"""Everything that talks to a model (no Django imports).

- `llm.base`: the provider interface (`Provider.stream` -> `TextDelta`, `ToolCall`, `Final`).
- `llm.providers.get_provider(name, ...)`: anthropic, simulator, openrouter, nous, custom.
- `llm.errors`: typed provider errors; `llm.usage`: normalised `Usage` and cost.
- `llm.convert` / `llm.validation`: pure message conversion and the strict request validator.
- `llm.models`: the default model catalog; `llm.simulator`: the offline Anthropic-compatible server.

This package imports nothing heavy itself: the SDKs load only with the provider modules.
"""
