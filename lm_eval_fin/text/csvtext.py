"""Text in the CSV files the package writes (the report's ``leaderboard.csv``, the annotators'
label template), escaped for the spreadsheet that opens them.

A spreadsheet reads a cell that starts with ``=``, ``+``, ``-`` or ``@`` (or a tab or carriage
return before one) as a formula: a model's answer ``=HYPERLINK("http://x", "click")`` would
become a live link, others fetch data or run commands. :func:`spreadsheet_safe` puts a ``'``
before such a text, so the spreadsheet shows it as text. A text that already starts with
``'`` before one of those characters gets one more, so the escape is reversible:
:func:`spreadsheet_unescaped` gives back the text a file we wrote carried (for ids read back
from a filled-in template).

    >>> spreadsheet_safe('=HYPERLINK("http://x")'), spreadsheet_safe("-3"), spreadsheet_safe("plain")
    ('\\'=HYPERLINK("http://x")', "'-3", 'plain')
    >>> [spreadsheet_unescaped(spreadsheet_safe(t)) for t in ("=1", "'=1", "''@a", "'quoted")]
    ['=1', "'=1", "''@a", "'quoted"]
"""

from __future__ import annotations

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(text: str) -> str:
    """``text`` as a spreadsheet shows it and never runs it (see the module docstring)."""
    return "'" + text if text.lstrip("'")[:1] in FORMULA_STARTS else text


def spreadsheet_unescaped(text: str) -> str:
    """The text :func:`spreadsheet_safe` was given (a text it did not change is itself)."""
    return text[1:] if text[:1] == "'" and text.lstrip("'")[:1] in FORMULA_STARTS else text
