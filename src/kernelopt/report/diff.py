"""A replaced kernel's source against Inductor's, as escaped HTML lines.

A unified diff (``difflib``, three lines of context) because that is what a
reviewer of a kernel change reads every day; each line becomes its own span so
the page can colour additions and removals. The text is untrusted (an LLM may
have written it) and is escaped line by line.
"""

from __future__ import annotations

import difflib

from kernelopt.report.page import esc

_KIND = {"+": "add", "-": "del", "@": "hunk", " ": "same"}


def diff_lines(before: str, after: str, name: str) -> list[tuple[str, str]]:
    """``(kind, line)`` pairs of the unified diff of ``before`` → ``after``; kind is add, del, hunk or same."""
    lines = difflib.unified_diff(
        before.splitlines(), after.splitlines(), f"Inductor: {name}", f"kernelopt: {name}", lineterm="", n=3
    )
    out: list[tuple[str, str]] = []
    for line in lines:
        if line.startswith(("--- ", "+++ ")):
            out.append(("hunk", line))
        else:
            out.append((_KIND.get(line[:1], "same"), line))
    return out


def diff_html(before: str, after: str, name: str) -> str:
    """The diff as a ``<pre>`` block, one span per line; a note instead when the sources are the same."""
    lines = diff_lines(before, after, name)
    if not lines:
        return '<p class="note">The replacement has the same source as Inductor\'s kernel.</p>'
    spans = "".join(f'<span class="{kind}">{esc(line) or " "}</span>' for kind, line in lines)
    return f'<pre class="diff">{spans}</pre>'
