"""Markdown → Telegram HTML, splitting, and the [telegram] config model (no network)."""

from __future__ import annotations

import random
import re

import pytest
from pydantic import ValidationError

from channels.telegram import TelegramConfig
from channels.telegram._format import (
    html_to_plain,
    plain_parts,
    render,
    split_html,
    utf16_len,
)
from channels.telegram._markdown import markdown_to_html
from tests.fakes.telegram_server import ApiError, parse_html
from tools.errors import ConfigError


@pytest.mark.parametrize(
    ("markdown", "expected"),
    [
        ("a<b & c>d", "a&lt;b &amp; c&gt;d"),
        ("**bold** and *it* and _it_", "<b>bold</b> and <i>it</i> and <i>it</i>"),
        ("~~gone~~ __strong__", "<s>gone</s> <b>strong</b>"),
        ("snake_case_name, 2 * 3 * 4", "snake_case_name, 2 * 3 * 4"),
        (r"\*literal\* stars", "*literal* stars"),
        ("`a <b> **c**`", "<code>a &lt;b&gt; **c**</code>"),
        ("# Title", "<b>Title</b>"),
        ("- one\n  * two", "• one\n  • two"),
        ("> quoted *x*\n> more", "<blockquote>quoted <i>x</i>\nmore</blockquote>"),
        (
            "[the **docs**](https://ex.com/a_(b)?q=1&r=2)",
            '<a href="https://ex.com/a_(b)?q=1&amp;r=2">the <b>docs</b></a>',
        ),
        ("[click](javascript:alert(1))", "[click](javascript:alert(1))"),  # not a link
        ("[mail](ftp://x.org/f)", "mail (ftp://x.org/f)"),  # a scheme Telegram may not open
        ("| a | b |\n|---|---|\n| 1 | 2 |", "<pre>a | b\n--+--\n1 | 2</pre>"),
        ("***both***", "<i><b>both</b></i>"),
    ],
)
def test_markdown_to_html(markdown: str, expected: str) -> None:
    assert markdown_to_html(markdown) == expected
    parse_html(expected)  # Telegram would accept it


def test_code_blocks_are_escaped_and_keep_their_language() -> None:
    html = markdown_to_html("```python\nif a < b and c & d:\n    pass\n```\nafter **x**")
    assert html == (
        '<pre><code class="language-python">if a &lt; b and c &amp; d:\n    pass</code></pre>'
        "\n\nafter <b>x</b>"
    )
    assert markdown_to_html("```\n**not bold**") == "<pre>**not bold**</pre>"  # unclosed: to end


def test_short_text_is_one_part_and_blank_text_none() -> None:
    assert render("hello") == ["hello"]
    assert render("  \n ") == []
    assert plain_parts("") == []


def test_split_closes_and_reopens_tags() -> None:
    html = "<b>" + "word " * 30 + "</b>"
    parts = split_html(html, 40)
    assert len(parts) > 1
    assert all(p.startswith("<b>") and p.endswith("</b>") for p in parts)
    for p in parts:
        assert utf16_len(parse_html(p)) <= 40


def test_split_reopens_a_code_block_with_its_language() -> None:
    code = "\n".join(f"line_{i} = {i} < {i + 1}" for i in range(1000))
    parts = render(f"Intro paragraph.\n\n```python\n{code}\n```\nOutro.")
    assert len(parts) >= 3
    for p in parts[1:-1]:
        assert p.startswith('<pre><code class="language-python">')
        assert p.endswith("</code></pre>")
    joined = "".join(parse_html(p) for p in parts)
    assert re.sub(r"\s+", "", joined) == re.sub(r"\s+", "", f"Intro paragraph.{code}Outro.")


def test_split_prefers_paragraphs_then_lines_then_words() -> None:
    text = "a" * 30 + "\n\n" + "b " * 20 + "\n" + "c" * 10
    assert split_html(text, 60) == ["a" * 30, "b " * 19 + "b \n" + "c" * 10]
    assert split_html("word " * 30, 40) == ["word " * 7 + "word"] * 3 + ["word " * 5 + "word"]


def test_split_counts_utf16_units_like_telegram() -> None:
    parts = plain_parts("😀" * 3000)  # 6000 UTF-16 units, no boundaries to cut at
    assert [utf16_len(p) for p in parts] == [4096, 1904]
    assert "".join(parts) == "😀" * 3000


def test_entities_count_as_one_character() -> None:
    assert split_html("&lt;" * 4096, 4096) == ["&lt;" * 4096]


@pytest.mark.parametrize("seed", range(20))
def test_random_markdown_splits_into_valid_parts(seed: int) -> None:
    rnd = random.Random(seed)
    pieces = [
        "hello",
        "**bold text**",
        "*it*",
        "a<b",
        "x&y",
        "😀",
        "`code <x>`",
        "\n",
        "\n\n",
        "[l](https://e.com/?a=1&b=2)",
        "\n```py\nfor i in x:\n    print(i<2)\n```\n",
        "> quote\n",
        "- bullet\n",
        "~~s~~",
        "_u_",
        "|pipe|",
    ]
    markdown = " ".join(rnd.choice(pieces) for _ in range(rnd.randint(1, 2500)))
    limit = rnd.choice([40, 300, 4096])
    parts = render(markdown, limit)
    visible = [parse_html(p) for p in parts]  # raises ApiError if Telegram would refuse one
    assert all(utf16_len(v) <= limit and v.strip() for v in visible)
    whole = parse_html(markdown_to_html(markdown))
    assert re.sub(r"\s+", "", "".join(visible)) == re.sub(r"\s+", "", whole)


def test_fake_rejects_what_telegram_rejects() -> None:
    for bad in ("<b>x", "<b>x</i>", "a < b", "<h1>x</h1>", "a & b"):
        with pytest.raises(ApiError):
            parse_html(bad)


# -- config --------------------------------------------------------------------------------------


def test_config_defaults_and_derived_file_url() -> None:
    cfg = TelegramConfig()
    assert not cfg.enabled and cfg.group_mode == "mentions"
    assert cfg.api_file_url == "https://api.telegram.org/file/bot"
    local = TelegramConfig(api_base_url="http://127.0.0.1:8081/bot")
    assert local.api_file_url == "http://127.0.0.1:8081/file/bot"


def test_config_needs_a_token_when_enabled() -> None:
    with pytest.raises(ValidationError, match="token"):
        TelegramConfig(enabled=True)


def test_config_rejects_unknown_keys_and_bad_values() -> None:
    with pytest.raises(ValidationError):
        TelegramConfig(tokn="x")
    with pytest.raises(ValidationError):
        TelegramConfig(group_mode="sometimes")
    with pytest.raises(ValidationError):
        TelegramConfig(api_base_url="http://localhost:8081/api")


def test_config_token_from_env_and_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RB_TEST_TOKEN", "123:abc")
    cfg = TelegramConfig(enabled=True, token_env="RB_TEST_TOKEN", allowed_users=[42, "*"])
    assert cfg.resolve_token() == "123:abc"
    assert cfg.allowed_users == ["42", "*"]
    secret = TelegramConfig(enabled=True, token="456:def")
    assert "456:def" not in repr(secret) and secret.resolve_token() == "456:def"
    monkeypatch.delenv("RB_TEST_TOKEN")
    with pytest.raises(ConfigError, match="RB_TEST_TOKEN"):
        cfg.resolve_token()


def test_html_to_plain_is_the_visible_text() -> None:
    assert html_to_plain('<b>a</b> <a href="https://x.org">&lt;b&gt; &amp;</a>') == "a <b> &"
