"""The model's Markdown as Telegram HTML, on a corpus of the output models really write.

Every part must be accepted by the fake Bot API's HTML check (which applies Telegram's tag and
nesting rules), stay within the limit, and together show every word of the source: nothing
formatted away, nothing lost at a cut, whether the cut falls in prose or inside a code block.
"""

from __future__ import annotations

import random
import re

import pytest

from channels.telegram._format import render, utf16_len
from channels.telegram._markdown import markdown_to_html
from tests.fakes.telegram_server import ApiError, parse_html

NESTED = """This is ***very*** important: **bold with *italic* inside**, *italic with **bold**
inside*, ~~old~~ and **~~both~~**. Keep `x < y && y > z` as it is; 2 * 3 * 4 = 24 and
snake_case_names stay, as do a<b, c>d & e."""

STEPS = """Here's how to set it up:

1. Install the package:
   ```bash
   pip install "relaybot[dev]>=0.1" && echo ok
   ```
2. Edit `config.toml`:
   - set `[llm] model`
   - set **token_env** for *each* channel
     - nested once more
3. Run `make run` & check the logs.

That's it!"""

REPORT = """## Summary

> **Note:** the API returns `<null>` when the key is missing.
> See [the docs](https://docs.example.com/api?a=1&b=2) for details.

### Next steps
- [ ] write the tests
- [x] ship it

---

Setext heading
==============

Line one with a hard break\\
line two, and an image: ![the diagram](https://example.com/d.png), and <https://example.org>."""

TABLE = """| Command | What it does | Default |
|:--------|:------------:|--------:|
| `run` | starts the **daemon** | — |
| `chat` | talks in the *terminal* | yes |
| `doctor` | checks a<b & c>d | no |"""

CODE = '''```python
def clamp(value: int, low: int = 0, high: int = 10) -> int:
    """Keep value in [low, high] (a < b & c > d)."""
    if value < low:
        return low
    return high if value > high else value
```

And in JavaScript:
```js
const ok = a && b ? "<b>" : '&amp;';
```'''

QUOTES = """> Top level quote with a [`api` link](https://example.com/api)
> > and a nested quote
>
> ```sh
> rm -rf "$DIR" <dangerous>
> ```

<div>raw html</div> stays visible, as does <b>this</b>."""

UNCLOSED = "The stream ended mid-block:\n\n```python\nprint('a < b')\nfor i in range(3):"

EMOJI = "Status: ✅ done, 🚀 shipped, 👍🏽 approved. " * 3 + "Ünïcödé and 中文 too."

CORPUS = [NESTED, STEPS, REPORT, TABLE, CODE, QUOTES, UNCLOSED, EMOJI]

_FENCE_INFO = re.compile(r"^((?:[ \t]*>)*[ \t]*(?:\d+\.[ \t]+)?)(`{3,}|~{3,})[^\n`]*$", re.M)
_LINK_TARGET = re.compile(r"\]\([^)\s]*\)")


def words(text: str) -> list[str]:
    return re.findall(r"[^\W_]+", text)


def source_words(markdown: str) -> list[str]:
    """The words a reader should see: link targets and code fence languages are not shown."""
    return words(_LINK_TARGET.sub("]", _FENCE_INFO.sub(r"\1\2", markdown)))


def visible(parts: list[str]) -> str:
    return "\n".join(parse_html(p) for p in parts)  # raises ApiError if Telegram would refuse


@pytest.mark.parametrize("markdown", CORPUS, ids=lambda m: m.split()[0][:12])
def test_the_corpus_renders_as_html_telegram_accepts_with_every_word(markdown: str) -> None:
    parts = render(markdown)
    assert len(parts) == 1
    assert words(visible(parts)) == source_words(markdown)


@pytest.mark.parametrize("limit", [200, 700, 4096])
def test_a_long_answer_splits_inside_and_outside_code_blocks(limit: int) -> None:
    code = "\n".join(f"    if x_{i} < {i} and y & {i}: print('<{i}>')" for i in range(300))
    closed = [m for m in CORPUS if m is not UNCLOSED]  # it would swallow what follows
    long = "\n\n".join([*closed, "```python\ndef big():\n" + code + "\n```", *closed, UNCLOSED])
    parts = render(long, limit)
    assert len(parts) > 1
    shown = [parse_html(p) for p in parts]
    assert all(0 < utf16_len(s) <= limit for s in shown)
    assert words("\n".join(shown)) == source_words(long)
    inside = [p for p in parts if p.startswith('<pre><code class="language-python">')]
    assert len(inside) >= (2 if limit < 4096 else 1)  # a cut inside the block reopens it


def test_nesting_follows_the_tree() -> None:
    assert markdown_to_html("***both***") == "<i><b>both</b></i>"
    assert markdown_to_html("**a *b* c**") == "<b>a <i>b</i> c</b>"
    assert markdown_to_html("*a **b** c*") == "<i>a <b>b</b> c</i>"
    assert markdown_to_html("**~~x~~**") == "<b><s>x</s></b>"


def test_code_keeps_its_language_and_escapes_everything() -> None:
    html = markdown_to_html(CODE)
    assert '<pre><code class="language-python">def clamp' in html
    assert "(a &lt; b &amp; c &gt; d)" in html
    assert "<code>x &lt; y &amp;&amp; y &gt; z</code>" in markdown_to_html(NESTED)


def test_telegrams_nesting_rules_are_kept() -> None:
    html = markdown_to_html(QUOTES)
    assert html.count("<blockquote>") == 1  # the nested quote is flattened into it
    assert "<pre>" not in html.split("</blockquote>")[0]  # no code block inside a quote
    assert '<a href="https://example.com/api">api link</a>' in html  # no code inside a link
    assert "&lt;div&gt;raw html&lt;/div&gt;" in html


def test_lists_tables_and_headings_read_as_text() -> None:
    steps = parse_html(markdown_to_html(STEPS))
    assert "1. Install the package:" in steps and "3. Run make run & check the logs." in steps
    assert "  • set [llm] model" in steps and "    • nested once more" in steps
    table = parse_html(markdown_to_html(TABLE)).splitlines()
    assert table[0].split(" | ")[0].strip() == "Command" and set(table[1]) <= {"-", "+"}
    assert len({len(line.rstrip()) for line in table[2:]}) >= 1
    assert markdown_to_html("## Summary") == "<b>Summary</b>"


def test_the_fake_applies_telegrams_nesting_rules() -> None:
    for bad in (
        "<code><b>x</b></code>",
        "<pre><b>x</b></pre>",
        "<blockquote>a<blockquote>b</blockquote></blockquote>",
        "<blockquote><pre>x</pre></blockquote>",
        '<a href="https://x.org"><code>x</code></a>',
    ):
        with pytest.raises(ApiError, match="can't parse entities"):
            parse_html(bad)
    parse_html('<pre><code class="language-py">x</code></pre><b><i>y</i></b>')


def test_plain_text_skips_the_parser_and_comes_out_as_the_parser_makes_it() -> None:
    """Text with nothing the parser would change is escaped directly (most short answers): for
    20,000 random texts, what that gives is what the parser gives."""
    from channels._tables import markdown_tree
    from channels.telegram._markdown import _MARKUP, _blocks, _Where

    def parsed(text: str) -> str:
        return _blocks(markdown_tree(text).children, _Where(), "\n\n")

    rng = random.Random(7)
    pieces = [*"abc XYZ 019.,;:?!'\"()/@%=+-\n", "é", "😀", "  ", "\n\n", "1. ", "2)", "- ", "+ "]
    pieces += ["==", "--", " \n", "http://x.y/z", "&amp;", "*", "_", "`", "<b>", "\\", "# "]
    direct = 0
    for _ in range(20_000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 25)))
        if _MARKUP.search(text) is None:
            direct += 1
            assert markdown_to_html(text) == parsed(text), repr(text)
    assert direct > 1000  # the direct way was taken often enough to mean something
    assert markdown_to_html("Sure, 3 apples & 2 pears.") == "Sure, 3 apples &amp; 2 pears."
