"""``inert_markdown``: text shown as written, nothing in it run, by a CommonMark renderer."""

from __future__ import annotations

from markdown_it import MarkdownIt

from ollm_cli.pipeline.markdown_text import (
    code_span,
    fenced,
    inert_inline,
    inert_markdown,
    names_a_dangerous_scheme,
)


def _rendered(markdown: str) -> str:
    return MarkdownIt("commonmark").render(markdown)


def test_prose_is_escaped_and_code_kept_as_written() -> None:
    text = "Use <b>bold</b> & `<i>` here:\n\n```html\n<p>kept</p>\n```\nAT&T &amp; more"
    shown = inert_markdown(text)
    assert "&lt;b>bold&lt;/b>" in shown and "`<i>`" in shown
    assert "```html\n<p>kept</p>\n```" in shown
    assert "AT&T &amp;amp; more" in shown
    page = _rendered(shown)
    assert "<b>" not in page and "&lt;b&gt;bold" in page
    assert "<code>&lt;i&gt;</code>" in page and "&lt;p&gt;kept" in page
    assert "&amp;amp; more" in page  # the reference written is shown, not decoded


def test_a_fence_left_open_is_closed_so_it_cannot_swallow_what_follows() -> None:
    shown = inert_markdown("look:\n~~~~\n<x>")
    assert shown.endswith("~~~~\n<x>\n~~~~\n")
    after = _rendered(shown + "\n## Next")
    assert "<h2>Next</h2>" in after


def test_links_to_script_schemes_cannot_form_but_others_can() -> None:
    for attack in ("[go](javascript:alert(1))", "[go](JAVA\tSCRIPT:x)", "![i](data:text/html,x)"):
        assert names_a_dangerous_scheme(attack)
        page = _rendered(inert_markdown(attack))
        assert "href" not in page and "src" not in page, attack
        assert "go" in page or "i" in page
    assert not names_a_dangerous_scheme("the metadata: [a](https://example.org)")
    assert 'href="https://example.org"' in _rendered(inert_markdown("[a](https://example.org)"))


def test_where_a_renderer_reads_code_otherwise_the_whole_text_is_fenced() -> None:
    # a fence inside a list item ends with the item: the lines after it are live
    for live in ("<b>", "[x](javascript:alert(1))"):
        text = f"1. x\n   ```\n   a\n{live}\n   ```"
        shown = inert_markdown(text)
        assert shown == fenced(text, "text"), live
    # a code span wins over an HTML tag it opened before: nothing live, kept as written
    span = '`<a href="`">`'
    assert inert_markdown(span) == span and inert_inline(span) == span
    assert "<a " not in _rendered(span)


def test_code_spans_and_fences_outgrow_the_backticks_inside() -> None:
    assert code_span("a ``b`` c") == "```a ``b`` c```"
    assert code_span("`x`") == "`` `x` ``"
    assert _rendered(code_span("`x`")).strip() == "<p><code>`x`</code></p>"
    assert fenced("````\nx").startswith("`````\n")
    assert fenced("a``\x07``b") == "`````\na````b\n`````\n"  # no control joins a run
