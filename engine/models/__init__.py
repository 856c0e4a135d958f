"""The model layer: what the loop sends a model and gets back, and the providers that speak it.

``_types`` is the provider-neutral contract (messages, requests, responses); ``_openai`` and
``_anthropic`` map it to each SDK (imported only when a model of theirs is built), ``_failover``
makes one model of several, ``_scripted`` answers in-process for tests, ``_transcribe`` turns
voice into text through the same endpoint.
"""
