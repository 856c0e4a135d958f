"""The @tool decorator: plain typed functions become tools."""

from __future__ import annotations

import inspect
import logging
import typing
from collections.abc import Callable
from typing import Annotated, Any, get_origin

import pydantic
from pydantic import ConfigDict, Field

from tools._base import Tier, Tool, ToolContext, current_context
from tools._result import ToolResult
from tools._schema import clean_schema
from tools.errors import ToolDefinitionError, ToolRetry

log = logging.getLogger(__name__)


def _split_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """(description, {param: description}) from a Google, reST or numpydoc docstring.

    The description is the docstring without its sections (Args, Returns, Raises, ...);
    a parameter's description is folded onto one line.
    """
    import docstring_parser  # only once a tool is made: a daemon without any never loads it

    parsed = docstring_parser.parse(doc or "")
    params = {p.arg_name: " ".join((p.description or "").split()) for p in parsed.params}
    return (parsed.description or "").strip(), {k: v for k, v in params.items() if v}


class FunctionTool(Tool):
    """A Tool made from a typed function by :func:`tool`."""

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        destructive: bool = False,
        background: bool = False,
        exclusive: bool = False,
        timeout_s: float | None = None,
        safety: dict[str, Any] | None = None,
        summary: str | Callable[..., str] | None = None,
    ) -> None:
        self.fn = fn
        self.name = name or fn.__name__
        doc_desc, param_docs = _split_docstring(fn.__doc__ or "")
        self.description = description or doc_desc or self.name.replace("_", " ")
        self.tier = Tier.DESTRUCTIVE if destructive else Tier.SAFE
        self.background = background
        self.exclusive = exclusive
        self.timeout_s = timeout_s
        self.safety = dict(safety or {})
        self._summary = summary
        self._is_async = inspect.iscoroutinefunction(fn)
        self._ctx_param, self._model = self._build_model(fn, param_docs)
        self.parameters = clean_schema(self._model.model_json_schema())
        self.parameters.setdefault("properties", {})
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn

    def _build_model(
        self, fn: Callable[..., Any], param_docs: dict[str, str]
    ) -> tuple[str | None, type[pydantic.BaseModel]]:
        try:
            hints = typing.get_type_hints(fn, include_extras=True)
        except Exception as exc:
            msg = f"tool {self.name!r}: cannot read annotations: {exc}"
            raise ToolDefinitionError(msg) from exc
        ctx_param: str | None = None
        fields: dict[str, Any] = {}
        for pname, param in inspect.signature(fn).parameters.items():
            ann = hints.get(pname, Any)
            if ann is ToolContext:
                if ctx_param is not None:
                    raise ToolDefinitionError(f"tool {self.name!r}: more than one ToolContext")
                if param.default is not inspect.Parameter.empty:
                    raise ToolDefinitionError(
                        f"tool {self.name!r}: the ToolContext parameter {pname!r} takes no default"
                    )
                ctx_param = pname
                continue
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise ToolDefinitionError(f"tool {self.name!r}: *args/**kwargs are not supported")
            if pname in hints and _mentions_context(ann):
                raise ToolDefinitionError(
                    f"tool {self.name!r}: parameter {pname!r} must be annotated exactly ToolContext"
                )
            if pname in param_docs and not _has_description(ann):
                ann = Annotated[ann, Field(description=param_docs[pname])]
            default = ... if param.default is inspect.Parameter.empty else param.default
            fields[pname] = (ann, default)
        model = pydantic.create_model(
            f"{self.name}_arguments", __config__=ConfigDict(extra="forbid"), **fields
        )
        return ctx_param, model

    def validate(self, args: dict[str, Any]) -> dict[str, Any]:
        try:
            model = self._model.model_validate(args)
        except pydantic.ValidationError as exc:
            problems = [
                f"{'.'.join(map(str, e['loc'])) or '(arguments)'}: {e['msg']}"
                for e in exc.errors(include_url=False)
            ]
            raise ToolRetry("; ".join(problems)) from None
        return {name: getattr(model, name) for name in type(model).model_fields}

    async def execute(self, args: dict[str, Any]) -> ToolResult:
        kwargs = dict(args)
        if self._ctx_param:
            kwargs[self._ctx_param] = current_context()
        if self._is_async:
            value = await self.fn(**kwargs)
        else:
            import asyncio  # here, not at the top: `from tools import tool` stays cheap

            value = await asyncio.to_thread(self.fn, **kwargs)
        return value if isinstance(value, ToolResult) else ToolResult.ok(value)

    def describe_call(self, args: dict[str, Any]) -> str:
        """`summary` filled in with the arguments (defaults included), else the default line."""
        if self._summary is None:
            return super().describe_call(args)
        values = {
            name: field.get_default(call_default_factory=True)
            for name, field in self._model.model_fields.items()
            if not field.is_required()
        }
        values.update(args)
        try:
            if callable(self._summary):
                return self._summary(**values)
            return self._summary.format_map(values)
        except (KeyError, IndexError, TypeError, ValueError):
            log.warning("summary of tool %s does not fit its arguments", self.name, exc_info=True)
            return super().describe_call(args)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<tool {self.name} ({self.tier})>"


def _has_description(ann: Any) -> bool:
    if get_origin(ann) is Annotated:
        return any(getattr(m, "description", None) for m in ann.__metadata__)
    return False


def _mentions_context(ann: Any) -> bool:
    return "ToolContext" in repr(ann)


@typing.overload
def tool(fn: Callable[..., Any], /) -> FunctionTool: ...
@typing.overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    destructive: bool = False,
    background: bool = False,
    exclusive: bool = False,
    timeout_s: float | None = None,
    safety: dict[str, Any] | None = None,
    summary: str | Callable[..., str] | None = None,
) -> Callable[[Callable[..., Any]], FunctionTool]: ...


def tool(fn: Callable[..., Any] | None = None, /, **options: Any) -> Any:
    """Turn a typed function into a Tool.

    The name comes from the function, the description from its docstring (parameter
    descriptions from an ``Args:`` section or ``Annotated[..., Field(description=...)]``), the
    schema from the signature. A parameter annotated ``ToolContext`` is injected, never shown
    to the model. Sync functions run in a worker thread.
    """
    if fn is not None:
        return FunctionTool(fn, **options)
    return lambda f: FunctionTool(f, **options)
