"""The tool contract: @tool, schemas (plain and strict), the registry, contextual tools."""

from __future__ import annotations

import asyncio
import threading
from typing import Annotated, Any

import jsonschema
import pytest
from pydantic import BaseModel, Field

from tools import (
    ContextualTool,
    Tier,
    ToolContext,
    ToolDefinitionError,
    ToolResult,
    ToolRetry,
    tool,
)
from tools.registry import ToolRegistry


class Address(BaseModel):
    street: str
    city: str = "Paris"
    note: str | None = None


class Order(BaseModel):
    items: list[str]
    ship_to: Address | None = None


@tool
async def place_order(
    order: Order,
    ctx: ToolContext,
    priority: Annotated[int, Field(description="1 is highest", ge=1, le=5)] = 3,
    gift: bool = False,
) -> dict[str, Any]:
    """Place an order for the user.

    Args:
        order: what to order and where to ship it
        gift: wrap it as a gift
    """
    return {
        "user": ctx.user_id,
        "items": order.items,
        "city": order.ship_to and order.ship_to.city,
        "priority": priority,
        "gift": gift,
    }


def test_schema_from_signature_and_docstring() -> None:
    schema = place_order.parameters
    assert place_order.description == "Place an order for the user."
    assert set(schema["properties"]) == {"order", "priority", "gift"}  # ctx never shown
    assert schema["required"] == ["order"]
    assert schema["properties"]["priority"]["description"] == "1 is highest"
    assert schema["properties"]["gift"]["description"] == "wrap it as a gift"
    assert schema["additionalProperties"] is False
    assert schema["$defs"]["Address"]["additionalProperties"] is False
    assert "title" not in str(schema).replace("'title'", "")  # titles stripped


def _check_openai_strict(schema: dict[str, Any]) -> None:
    """The rules OpenAI's strict mode enforces on every object in the schema."""
    if schema.get("type") == "object" or "properties" in schema:
        assert schema.get("additionalProperties") is False, schema
        assert sorted(schema.get("required", [])) == sorted(schema.get("properties", {})), schema
    for sub in [
        *schema.get("properties", {}).values(),
        *schema.get("$defs", {}).values(),
        *schema.get("anyOf", []),
        *([schema["items"]] if "items" in schema else []),
    ]:
        assert "default" not in sub
        _check_openai_strict(sub)


async def test_strict_variant_keeps_meaning_for_nested_models() -> None:
    strict = place_order.strict_parameters()
    _check_openai_strict(strict)
    jsonschema.Draft202012Validator.check_schema(strict)
    # What a strict-mode model must send: every key, nulls for the ones it leaves out.
    sent = {
        "order": {"items": ["tea"], "ship_to": {"street": "Rue A", "city": None, "note": None}},
        "priority": None,
        "gift": None,
    }
    jsonschema.validate(sent, strict)
    registry = ToolRegistry()
    registry.register(place_order)
    result = await registry.execute("place_order", sent, ToolContext(user_id="u7"))
    assert not result.is_error, result.for_llm
    assert result.for_llm == (
        '{"user":"u7","items":["tea"],"city":"Paris","priority":3,"gift":false}'
    )


def test_context_parameter_checked_at_definition() -> None:
    with pytest.raises(ToolDefinitionError, match="takes no default"):

        @tool
        async def bad(ctx: ToolContext = None) -> str:  # type: ignore[assignment]
            return ""

    with pytest.raises(ToolDefinitionError, match="annotated exactly ToolContext"):

        @tool
        async def bad2(ctx: ToolContext | None) -> str:
            return ""


def test_registry_names_and_duplicates() -> None:
    registry = ToolRegistry()

    @tool(name="has space")
    async def spaced() -> str:
        return ""

    with pytest.raises(ToolDefinitionError, match="must match"):
        registry.register(spaced)

    @tool
    async def twin() -> str:
        return "one"

    @tool(name="twin")
    async def twin2() -> str:
        return "two"

    registry.register(twin)
    with pytest.raises(ToolDefinitionError, match="already registered"):
        registry.register(twin2)
    registry.register(twin2, replace=True)
    assert registry.names() == ["twin"]
    assert registry.summaries() == ["twin [safe] twin"]


async def test_return_values_and_sync_functions() -> None:
    main_thread = threading.get_ident()

    @tool
    def blocking(n: int) -> list[int]:
        """Runs in a worker thread."""
        assert threading.get_ident() != main_thread
        return list(range(n))

    @tool
    async def model_out() -> Address:
        return Address(street="Main")

    @tool
    async def shown() -> ToolResult:
        return ToolResult.user("hello user")

    registry = ToolRegistry()
    for t in (blocking, model_out, shown):
        registry.register(t)
    assert (await registry.execute("blocking", '{"n": 3}')).for_llm == "[0,1,2]"
    assert (await registry.execute("model_out", "")).for_llm == (
        '{"street":"Main","city":"Paris","note":null}'
    )
    assert (await registry.execute("shown", "{}")).for_user == "hello user"


async def test_non_object_arguments_and_tool_retry() -> None:
    @tool
    async def picky(x: int) -> str:
        if x < 0:
            raise ToolRetry("x must be positive; try abs(x)")
        return "ok"

    registry = ToolRegistry()
    registry.register(picky)
    r = await registry.execute("picky", "[1, 2]")
    assert r.is_error and r.retryable and "must be a JSON object, got list" in r.for_llm
    r = await registry.execute("picky", '{"x": -1}')
    assert r.is_error and r.retryable and r.for_llm == "x must be positive; try abs(x)"


async def test_class_tools_validate_against_their_schema() -> None:
    class Echo(ContextualTool):
        name = "echo_chat"
        description = "Say which chat this is."
        parameters = {
            "type": "object",
            "properties": {"times": {"type": "integer"}},
            "required": ["times"],
            "additionalProperties": False,
        }

        async def execute(self, args: dict[str, Any]) -> ToolResult:
            await asyncio.sleep(0)  # let other calls interleave
            return ToolResult.ok(f"{self.context.channel}:{self.context.chat_id}x{args['times']}")

    registry = ToolRegistry()
    echo = registry.register(Echo())
    assert echo.tier is Tier.SAFE
    bad = await registry.execute("echo_chat", '{"times": "two"}')
    assert bad.is_error and "times: 'two' is not of type 'integer'" in bad.for_llm


async def test_contextual_tool_under_concurrency() -> None:
    """100 conversations using one ContextualTool instance at once never see each other."""
    barrier = asyncio.Barrier(100)

    class WhereAmI(ContextualTool):
        name = "where_am_i"
        description = "Report the current chat."
        parameters = {"type": "object", "properties": {}}

        async def execute(self, args: dict[str, Any]) -> ToolResult:
            before = (self.context.channel, self.context.chat_id)
            await barrier.wait()  # every call has had its set_context before any continues
            after = (self.context.channel, self.context.chat_id)
            return ToolResult.ok(f"{before}|{after}")

    registry = ToolRegistry()
    registry.register(WhereAmI())
    contexts = [
        ToolContext("telegram" if i % 2 else "discord", f"chat{i}", f"u{i}") for i in range(100)
    ]
    results = await asyncio.gather(*(registry.execute("where_am_i", "{}", c) for c in contexts))
    for c, r in zip(contexts, results, strict=True):
        expected = str((c.channel, c.chat_id))
        assert r.for_llm == f"{expected}|{expected}"


async def test_decorated_context_under_concurrency() -> None:
    barrier = asyncio.Barrier(100)

    @tool
    async def whoami(ctx: ToolContext) -> str:
        await barrier.wait()
        return f"{ctx.chat_id}/{ctx.user_id}"

    registry = ToolRegistry()
    registry.register(whoami)
    results = await asyncio.gather(
        *(registry.execute("whoami", "", ToolContext("t", f"c{i}", f"u{i}")) for i in range(100))
    )
    assert [r.for_llm for r in results] == [f"c{i}/u{i}" for i in range(100)]


def test_docstrings_in_every_common_style() -> None:
    @tool
    def google(city: str, days: int = 1) -> str:
        """Forecast for a city.

        Mentions rain when there is any.

        Args:
            city: The city, e.g. 'Oslo'.
            days (int): How many days
                ahead, 1 to 7.

        Returns:
            The forecast.
        """
        return city

    @tool
    def rest(city: str, days: int = 1) -> str:
        """Forecast for a city.

        :param city: The city, e.g. 'Oslo'.
        :param days: How many days ahead, 1 to 7.
        :returns: the forecast
        """
        return city

    @tool
    def numpy(city: str, days: int = 1) -> str:
        """Forecast for a city.

        Parameters
        ----------
        city : str
            The city, e.g. 'Oslo'.
        days : int
            How many days ahead, 1 to 7.
        """
        return city

    assert google.description == "Forecast for a city.\n\nMentions rain when there is any."
    for fn in (google, rest, numpy):
        props = fn.parameters["properties"]
        assert props["city"]["description"] == "The city, e.g. 'Oslo'.", fn.name
        assert props["days"]["description"] == "How many days ahead, 1 to 7.", fn.name
        assert "Returns" not in fn.description and ":param" not in fn.description


def test_confirmation_summaries_read_as_sentences() -> None:
    @tool(destructive=True)
    def delete_item(name: str, everywhere: bool = False, tags: list[str] | None = None) -> str:
        """Delete an item from the shopping list. Use it when the user asks."""
        return name

    @tool(destructive=True)
    def wipe(name: str) -> str:
        return name

    @tool(destructive=True, summary="Cancel order {order_id} ({reason})")
    def cancel(order_id: str, reason: str = "no reason given") -> str:
        """Cancel an order."""
        return order_id

    @tool(destructive=True, summary="Refund {amount} to {customer}")
    def refund(amount: int) -> str:
        """Refund a payment."""
        return str(amount)

    args = {"name": "milk", "everywhere": True, "tags": ["dairy", "cold"]}
    assert delete_item.describe_call(args) == (
        "Delete an item from the shopping list (name: milk, everywhere: yes, tags: dairy, cold)"
    )
    assert wipe.describe_call({"name": "foo"}) == "Wipe (name: foo)"
    assert cancel.describe_call({"order_id": "10234"}) == "Cancel order 10234 (no reason given)"
    assert refund.describe_call({"amount": 5}) == "Refund a payment (amount: 5)"  # a bad template
    long = delete_item.describe_call({"name": "x" * 500})
    assert len(long) <= 300 and long.endswith("…)")


def test_definitions_are_the_one_description_every_provider_maps() -> None:
    @tool(destructive=True)
    async def wipe(scope: str = "all") -> str:
        """Wipe the cache."""
        return scope

    registry = ToolRegistry()
    registry.register(place_order)
    registry.register(wipe)
    order, wiped = registry.definitions()
    assert (order.name, order.description, order.tier) == (
        "place_order",
        "Place an order for the user.",
        Tier.SAFE,
    )
    assert order.parameters == place_order.parameters
    assert order.strict and order.strict_parameters == place_order.strict_parameters()
    assert "ctx" not in order.parameters["properties"]  # injected, never shown to the model
    assert (wiped.name, wiped.tier) == ("wipe", Tier.DESTRUCTIVE)
    with pytest.raises(AttributeError):
        wiped.name = "other"  # type: ignore[misc]  # frozen: a provider cannot change it
    assert registry.definitions(["wipe", "missing"]) == [wiped]  # only those, unknown skipped
    assert registry.definitions()[1] is wiped  # made once per tool
    wipe.tier = Tier.SAFE  # e.g. a policy changed it: the definition follows
    assert registry.definitions(["wipe"])[0].tier is Tier.SAFE


def test_a_schema_strict_mode_cannot_express_is_offered_plainly() -> None:
    class Odd(ContextualTool):
        name = "odd"
        description = "A tool whose schema strict mode cannot express."
        parameters: dict[str, Any] = {"type": "object", "properties": {"x": {"type": "integer"}}}

        def strict_parameters(self) -> dict[str, Any]:
            raise ValueError("no strict form")

        async def execute(self, args: dict[str, Any]) -> ToolResult:
            return ToolResult.ok(args)

    registry = ToolRegistry()
    registry.register(Odd())
    [odd] = registry.definitions()
    assert not odd.strict and odd.strict_parameters is None
    assert odd.parameters["properties"] == {"x": {"type": "integer"}}


def test_the_package_is_the_plugin_authors_surface_and_cheap() -> None:
    import subprocess
    import sys

    import tools

    assert sorted(tools.__all__) == sorted(
        [
            *("tool", "Tool", "ContextualTool", "AsyncTool", "ToolContext", "ToolResult"),
            *("File", "ToolRetry", "Tier", "ToolDefinitionError", "BackgroundJob"),
        ]
    )
    heavy = ("httpx", "httpx2", "selectolax", "mcp", "jsonschema", "anyio", "tools.builtins")
    probe = (
        "import sys; from tools import tool; "
        f"print(sorted(m for m in sys.modules if m.startswith({heavy!r})))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
