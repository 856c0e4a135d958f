"""JSON Schema shaping: the clean schema we send, and the OpenAI strict-mode variant."""

from __future__ import annotations

import copy
from typing import Any

_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SUBSCHEMA_KEYS = ("items", "not", "additionalProperties")


def _children(schema: dict[str, Any]):
    for key in _SUBSCHEMA_LISTS:
        yield from (s for s in schema.get(key, ()) if isinstance(s, dict))
    for key in _SUBSCHEMA_KEYS:
        if isinstance(schema.get(key), dict):
            yield schema[key]
    for mapping in ("properties", "$defs"):
        yield from (s for s in schema.get(mapping, {}).values() if isinstance(s, dict))


def clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Strip titles and close every object (`additionalProperties: false`); keeps `$defs`."""
    schema = copy.deepcopy(schema)
    _clean(schema)
    return schema


def _clean(schema: dict[str, Any]) -> None:
    if isinstance(schema.get("title"), str):
        del schema["title"]
    if schema.get("type") == "object" and "additionalProperties" not in schema:
        schema["additionalProperties"] = False
    for child in _children(schema):
        _clean(child)


def strict_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """OpenAI strict mode: every property required; optional ones nullable, defaults dropped.

    The meaning is kept: a null sent for an optional property is mapped back to "omitted"
    by :func:`drop_strict_nulls`, so its default applies.
    """
    schema = copy.deepcopy(schema)
    _strict(schema)
    return schema


def _strict(schema: dict[str, Any]) -> None:
    props = schema.get("properties")
    if isinstance(props, dict):
        required = set(schema.get("required", ()))
        for name, sub in props.items():
            sub.pop("default", None)
            if name not in required and not _allows_null(sub):
                props[name] = _nullable(sub)
        schema["required"] = list(props)
        schema["additionalProperties"] = False
    for child in _children(schema):
        _strict(child)


def _allows_null(schema: dict[str, Any]) -> bool:
    t = schema.get("type")
    if t == "null" or (isinstance(t, list) and "null" in t):
        return True
    return any(s.get("type") == "null" for s in schema.get("anyOf", ()) if isinstance(s, dict))


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    if "$ref" in schema or "anyOf" in schema or "type" not in schema:
        extra = {k: schema.pop(k) for k in ("description",) if k in schema}
        return {"anyOf": [schema, {"type": "null"}], **extra}
    t = schema["type"]
    schema["type"] = [*t, "null"] if isinstance(t, list) else [t, "null"]
    if "enum" in schema:
        schema["enum"] = [*schema["enum"], None]
    return schema


def drop_strict_nulls(args: Any, schema: dict[str, Any], root: dict[str, Any] | None = None) -> Any:
    """Remove nulls the strict variant forced on optional properties that never allowed null."""
    root = root or schema
    schema = _resolve(schema, root)
    if isinstance(args, dict) and isinstance(schema.get("properties"), dict):
        required = set(schema.get("required", ()))
        out = {}
        for key, value in args.items():
            sub = schema["properties"].get(key)
            if sub is None:
                out[key] = value
                continue
            if value is None and key not in required and not _allows_null(_resolve(sub, root)):
                continue
            out[key] = drop_strict_nulls(value, sub, root)
        return out
    if isinstance(args, list) and isinstance(schema.get("items"), dict):
        return [drop_strict_nulls(v, schema["items"], root) for v in args]
    if args is not None:
        for alt in schema.get("anyOf", ()):
            if isinstance(alt, dict) and alt.get("type") != "null":
                return drop_strict_nulls(args, alt, root)
    return args


def _resolve(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return root.get("$defs", {}).get(ref.removeprefix("#/$defs/"), schema)
    return schema
