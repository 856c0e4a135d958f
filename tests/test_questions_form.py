"""The short form an MCP server's question becomes (engine/chat/_confirmations/_form.py): what
each kind of field takes from a reply, what it says when a line does not fit, and when buttons
can answer."""

from __future__ import annotations

import pytest

from engine.chat._confirmations._form import Form

SIGN_UP = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Name"},
        "age": {"type": "integer", "title": "Age", "default": 42},
        "agree": {"type": "boolean", "title": "Agree"},
        "hero": {"type": "string", "oneOf": [{"const": "h1", "title": "Superman"}]},
        "pet": {"type": "string", "enum": ["p1", "p2"], "enumNames": ["Cats", "Dogs"]},
        "fish": {"type": "array", "items": {"anyOf": [{"const": "f1", "title": "Tuna"}]}},
    },
    "required": ["name"],
}


def test_a_reply_is_read_field_by_field_with_defaults_for_what_is_left_out() -> None:
    form = Form.of(SIGN_UP)
    said = "Name: Ada\nagree: yes\nhero: superman\npet: Dogs\nfish: Tuna, f1\n"
    answer = form.read(said, None)
    assert answer == {
        "name": "Ada",
        "agree": True,
        "hero": "h1",
        "pet": "p2",
        "fish": ["f1", "f1"],
        "age": 42,  # left out: its default
    }
    assert form.choices(None) is None  # several fields: no buttons
    assert "pet: Cats | Dogs — pet (optional)" in form.describe(None)


@pytest.mark.parametrize(
    ("said", "why"),
    [
        ("agree: yes", "name is required"),
        ("name: Ada\nage: old", "age takes a number"),
        ("name: Ada\nagree: maybe", "agree takes yes or no"),
        ("name: Ada\npet: Fish", "“Fish” is not one of the choices of pet"),
        ("name: Ada\ncolour: red", "“colour: red” names no field of the form"),
    ],
)
def test_what_does_not_fit_says_why(said: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        Form.of(SIGN_UP).read(said, None)


def test_one_choice_or_yes_no_or_nothing_is_answered_with_buttons_in_the_users_language() -> None:
    tea = {"type": "object", "properties": {"tea": {"type": "string", "enum": ["green", "black"]}}}
    assert Form.of(tea).choices(None) == [("green", {"tea": "green"}), ("black", {"tea": "black"})]
    ok = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
    assert Form.of(ok).choices("de") == [("Ja", {"ok": True}), ("Nein", {"ok": False})]
    assert Form.of({"type": "object", "properties": {}}).choices("fr") == [("Continuer", {})]


def test_a_schema_that_is_not_a_flat_form_is_refused() -> None:
    with pytest.raises(ValueError, match="a form cannot take"):
        Form.of({"type": "object", "properties": {"where": {"type": "object"}}})
