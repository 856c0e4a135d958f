"""The models a config describes: `[llm]`, and its `[[llm.fallback]]` entries behind failover.

The one place that knows which provider class a `provider` name means; the engine only sees a
:class:`engine.Model`. Keys are resolved here, when the daemon starts, so a fallback whose key
is missing stops start-up instead of failing the first time the primary is down.
"""

from __future__ import annotations

import functools

from bot.config import Config, ModelEndpoint
from engine import Model
from engine.context import ContextSettings, discover_window
from engine.models import FailoverModel, OpenAIModel, ResponsesModel


def build_model(config: Config) -> Model:
    """The model the engine talks to: the primary alone, or failover over the fallbacks."""
    llm = config.llm
    models = [
        endpoint_model(endpoint, where, strict_tools=config.tools.strict_schemas)
        for where, endpoint in llm.endpoints()
    ]
    if len(models) == 1:
        return models[0]
    return FailoverModel(models, cooldown_s=llm.failover_cooldown_s)


def endpoint_model(endpoint: ModelEndpoint, where: str = "llm", *, strict_tools: bool) -> Model:
    """One configured model (`where` names its section in errors)."""
    key = endpoint.resolve_api_key(where)
    if endpoint.provider == "anthropic":
        from engine.models import DEFAULT_MAX_TOKENS, AnthropicModel  # only for its endpoints

        options = endpoint.request_options()
        max_tokens = options.pop("max_tokens", DEFAULT_MAX_TOKENS)
        return AnthropicModel(
            base_url=endpoint.base_url,
            api_key=key,
            model=endpoint.model,
            max_tokens=max_tokens,
            timeout_s=endpoint.request_timeout_s,
            max_retries=endpoint.max_retries,
            options=options,
            thinking=thinking_budget(endpoint),
        )
    if endpoint.api == "responses":
        return ResponsesModel(
            base_url=endpoint.base_url,
            api_key=key,
            model=endpoint.model,
            timeout_s=endpoint.request_timeout_s,
            max_retries=endpoint.max_retries,
            options=endpoint.request_options(),
            effort=endpoint.reasoning_effort,
            summary=endpoint.reasoning_summary,
            store=endpoint.store_responses,
        )
    options = endpoint.request_options()
    if endpoint.reasoning_effort is not None:
        options.setdefault("reasoning_effort", endpoint.reasoning_effort)
    return OpenAIModel(
        base_url=endpoint.base_url,
        api_key=key,
        model=endpoint.model,
        timeout_s=endpoint.request_timeout_s,
        max_retries=endpoint.max_retries,
        options=options,
        strict_tools=strict_tools,
        reasoning_back=endpoint.reasoning_back,
    )


# Anthropic's thinking budget for an effort, when `thinking_tokens` is not set.
_BUDGETS = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 16384, "xhigh": 32768}


def thinking_budget(endpoint: ModelEndpoint) -> int | None:
    """Anthropic's extended thinking budget: `thinking_tokens`, else by `reasoning_effort`
    (None: thinking off)."""
    if endpoint.thinking_tokens is not None:
        return endpoint.thinking_tokens
    return _BUDGETS.get(endpoint.reasoning_effort or "")


def openai_compatible(model: Model) -> OpenAIModel | ResponsesModel | None:
    """The OpenAI-compatible endpoint among the configured models (the primary first), whose
    SDK client also serves `/audio/transcriptions`; None when every model is Anthropic's."""
    candidates = model.models if isinstance(model, FailoverModel) else [model]
    found = (m for m in candidates if isinstance(m, OpenAIModel | ResponsesModel))
    return next(found, None)


def chat_models(config: Config, default: Model) -> dict[str, Model]:
    """`[llm] models_allowed` by name, each on the `[llm]` endpoint and provider."""
    llm = config.llm
    return {
        name: default
        if name == default.name
        else endpoint_model(
            llm.model_copy(update={"model": name}), strict_tools=config.tools.strict_schemas
        )
        for name in llm.models_allowed
    }


def context_settings(cfg: Config) -> ContextSettings:
    """The context budget as configured; a model's window is asked of the server when not set
    (an OpenAI-compatible one: Anthropic's models are in the table). The chat models of
    /settings share the endpoint, so they are asked the same way."""
    llm = cfg.llm
    probe = llm.provider == "openai"
    key = llm.resolve_api_key() if probe else ""
    return ContextSettings(
        window=cfg.llm.context_window,
        max_output_tokens=cfg.llm.output_reserve(),
        budget=cfg.context.budget,
        keep_recent_turns=cfg.context.keep_recent_turns,
        tool_result_chars=cfg.context.tool_result_chars,
        history_limit=cfg.engine.history_limit,
        discover=functools.partial(discover_window, llm.base_url, key, probe=probe),
    )
