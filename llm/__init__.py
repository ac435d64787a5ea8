"""Everything that talks to a model (no Django imports).

- `llm.base`: the provider interface (`Provider.stream` -> `TextDelta`, `ToolCall`, `Final`).
- `llm.providers.get_provider(name, ...)`: anthropic, simulator, openrouter, nous, custom.
- `llm.errors`: typed provider errors; `llm.usage`: normalised `Usage` and cost.
- `llm.convert`: pure message conversion; `llm.models`: the default model catalog.

The offline Anthropic-compatible server is the top-level `simulator` package, which imports this one.

This package imports nothing heavy itself: the SDKs load only with the provider modules.
"""
