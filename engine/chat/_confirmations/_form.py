"""A form as MCP elicitation describes one (a flat JSON Schema object of strings, numbers,
yes/no and lists to choose from), shown to a user and read back from a reply.

Kept apart from the questions (chat/_questions.py), which decide how it is shown and who may
answer: this is the pure part, what a field accepts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engine.i18n import translator

Gettext = Callable[[str], str]

YES = ("yes", "y", "true", "1", "ja", "oui", "sí", "si", "да", "是")
NO = ("no", "n", "false", "0", "nein", "non", "нет", "否")


@dataclass(frozen=True, slots=True)
class Field:
    name: str
    kind: str  # "string", "integer", "number", "boolean", "choice", "choices"
    title: str
    required: bool
    options: tuple[tuple[str, str], ...] = ()  # (value, label) of a choice
    default: Any = None

    def read(self, text: str, _: Gettext) -> Any:
        """The value `text` gives this field; ValueError saying why it does not fit."""
        text = text.strip()
        if self.kind == "boolean":
            if text.lower() in YES:
                return True
            if text.lower() in NO:
                return False
            raise ValueError(_("{field} takes yes or no").format(field=self.name))
        if self.kind in ("integer", "number"):
            try:
                return int(text) if self.kind == "integer" else float(text)
            except ValueError:
                raise ValueError(_("{field} takes a number").format(field=self.name)) from None
        if self.kind in ("choice", "choices"):
            picked = [self._option(t, _) for t in text.split(",")] if text else []
            if self.kind == "choice":
                if len(picked) != 1:
                    raise ValueError(_("{field} takes one of its choices").format(field=self.name))
                return picked[0]
            return picked
        return text

    def _option(self, text: str, _: Gettext) -> str:
        said = text.strip().lower()
        for value, label in self.options:
            if said in (value.lower(), label.lower()):
                return value
        wrong = _("“{answer}” is not one of the choices of {field}")
        raise ValueError(wrong.format(answer=text.strip(), field=self.name))


@dataclass(frozen=True, slots=True)
class Form:
    fields: tuple[Field, ...]

    @classmethod
    def of(cls, schema: dict[str, Any]) -> Form:
        """The form `schema` describes; ValueError for one that is not a flat object."""
        props = schema.get("properties") or {}
        if schema.get("type", "object") != "object" or not isinstance(props, dict):
            raise ValueError("a form is a JSON Schema object")
        required = set(schema.get("required") or ())
        return cls(tuple(_field(n, p, n in required) for n, p in props.items()))

    def choices(self, language: str | None) -> list[tuple[str, dict[str, Any]]] | None:
        """The answers as buttons (label, content) when one press can answer; else None."""
        _ = translator(language).gettext
        if not self.fields:
            return [(_("Go on"), {})]
        if len(self.fields) != 1:
            return None
        only = self.fields[0]
        if only.kind == "boolean":
            return [(_("Yes"), {only.name: True}), (_("No"), {only.name: False})]
        if only.kind == "choice":
            return [(label, {only.name: value}) for value, label in only.options]
        return None

    def describe(self, language: str | None) -> str:
        """One line per field: its name, what it takes, and its title."""
        _ = translator(language).gettext
        lines = []
        for f in self.fields:
            takes = " | ".join(label for _v, label in f.options)
            if f.kind == "choices":
                takes = _("one or more of: {choices}").format(choices=takes)
            elif f.kind == "boolean":
                takes = _("yes or no")
            elif f.kind in ("integer", "number"):
                takes = _("a number")
            elif f.kind == "string":
                takes = _("text")
            optional = "" if f.required else f" ({_('optional')})"
            lines.append(f"{f.name}: {takes} — {f.title}{optional}")
        return "\n".join(lines)

    def read(self, text: str, language: str | None) -> dict[str, Any]:
        """The answer a reply of "field: value" lines gives; ValueError saying what is wrong."""
        _ = translator(language).gettext
        by_name = {f.name.lower(): f for f in self.fields}
        answer: dict[str, Any] = {}
        for line in text.splitlines():
            name, sep, value = line.partition(":")
            if not line.strip():
                continue
            found = by_name.get(name.strip().lower())
            if not sep or found is None:
                raise ValueError(_("“{line}” names no field of the form").format(line=line.strip()))
            answer[found.name] = found.read(value, _)
        for f in self.fields:
            if f.name not in answer:
                if f.required:
                    raise ValueError(_("{field} is required").format(field=f.name))
                if f.default is not None:
                    answer[f.name] = f.default
        return answer


def _field(name: str, prop: dict[str, Any], required: bool) -> Field:
    title = str(prop.get("title") or prop.get("description") or name)
    if prop.get("description") and prop.get("title"):
        title = str(prop["description"])
    kind = str(prop.get("type", "string"))
    options = _options(prop)
    items = prop.get("items") if isinstance(prop.get("items"), dict) else None
    if kind == "array" and items is not None:
        options, kind = _options(items), "choices"
    elif options:
        kind = "choice"
    if kind not in ("string", "integer", "number", "boolean", "choice", "choices"):
        raise ValueError(f"the field {name} is of a kind a form cannot take ({kind})")
    return Field(name, kind, title, required, options, prop.get("default"))


def _options(prop: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    if "enum" in prop:
        values = [str(v) for v in prop["enum"]]
        labels = prop.get("enumNames") or values
        return tuple(zip(values, map(str, labels), strict=False))
    one = prop.get("oneOf") or prop.get("anyOf") or ()
    return tuple((str(o["const"]), str(o.get("title", o["const"]))) for o in one if "const" in o)
