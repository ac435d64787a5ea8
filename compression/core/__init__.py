"""The context engine's pure core: stdlib + tiktoken only (no Django, Celery, Channels or SDKs).

Entry points: ``compression.core.engine`` (contract, results, engine selection) and
``compression.core.compressor`` (the built-in ``ContextCompressor``). Everything here takes
messages and injected callables (summariser, clock, token counter) and returns new values; nothing
reads settings, the environment or the network.
"""
