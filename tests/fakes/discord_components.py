"""Discord's rules for message components, as the fake Discord applies them to a create or edit.

Components v2 (Discord's "display components", 2025): a message whose ``flags`` carry
IS_COMPONENTS_V2 (1 << 15) is its components: its ``content`` (and ``embeds``) must be empty,
its top-level components are any of action row (1), section (9), text display (10), media
gallery (12), file (13), separator (14) and container (17), at most 40 components in all
(nested ones counted) and 4,000 characters of text displays in all. The flag cannot be taken
off a message that has it. A message without the flag takes only action rows at the top level.
Refusals are 400 with code 50035 (Invalid Form Body), as Discord answers them.

:func:`check` returns the refusal's message, or None when Discord would take the message as it
is after the request (the stored message merged with the request's fields).
"""

from __future__ import annotations

from typing import Any

IS_COMPONENTS_V2 = 1 << 15
COMPONENTS_MAX = 40
TEXT_MAX = 4000
_TOP_V2 = frozenset({1, 9, 10, 12, 13, 14, 17})
_IN_CONTAINER = frozenset({1, 9, 10, 12, 13, 14})
_TEXT_DISPLAY, _CONTAINER, _SECTION, _SEPARATOR = 10, 17, 9, 14


def check(message: dict[str, Any], *, was_v2: bool = False) -> str | None:
    """Why Discord refuses `message` (content, flags, components as they would be), or None."""
    v2 = bool((message.get("flags") or 0) & IS_COMPONENTS_V2)
    components = message.get("components") or []
    if was_v2 and not v2:
        return "Invalid Form Body (flags: IS_COMPONENTS_V2 cannot be removed)"
    if not v2:
        if any(c.get("type") != 1 for c in components):
            return "Invalid Form Body (components: these need the IS_COMPONENTS_V2 flag)"
        return None
    if message.get("content") or message.get("embeds"):
        return "Invalid Form Body (content: cannot be used with IS_COMPONENTS_V2)"
    if not components:
        return "Invalid Form Body (components: must not be empty with IS_COMPONENTS_V2)"
    counts = {"components": 0, "text": 0}
    for component in components:
        if (refused := _component(component, _TOP_V2, counts)) is not None:
            return refused
    if counts["components"] > COMPONENTS_MAX:
        return f"Invalid Form Body (components: at most {COMPONENTS_MAX} in all)"
    if counts["text"] > TEXT_MAX:
        return f"Invalid Form Body (components: text displays hold {TEXT_MAX} characters in all)"
    return None


def _component(
    component: dict[str, Any], allowed: frozenset[int], counts: dict[str, int]
) -> str | None:
    kind = component.get("type")
    counts["components"] += 1
    if kind not in allowed:
        return f"Invalid Form Body (components: type {kind} not allowed here)"
    if kind == _TEXT_DISPLAY:
        content = component.get("content")
        if not isinstance(content, str) or not content:
            return "Invalid Form Body (text display: content must be 1 or more characters)"
        counts["text"] += len(content)
    elif kind == _SEPARATOR and component.get("spacing", 1) not in (1, 2):
        return "Invalid Form Body (separator: spacing must be 1 or 2)"
    elif kind == _CONTAINER:
        inner = component.get("components") or []
        if not inner:
            return "Invalid Form Body (container: components must not be empty)"
        for child in inner:
            if (refused := _component(child, _IN_CONTAINER, counts)) is not None:
                return refused
    elif kind == _SECTION:
        for child in component.get("components") or []:
            if (refused := _component(child, frozenset({_TEXT_DISPLAY}), counts)) is not None:
                return refused
    return None
