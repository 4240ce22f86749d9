"""Rules and small parsers over a chunk's text: the card fields FinCARDS derives without a judge.

Section 3.2 of the paper derives a card's auxiliary fields (scope descriptors, table
signatures, a boilerplate flag) "via lightweight rules or parsers" over the chunk, and links
every field to the text with evidence spans. These are those rules, plus the checks on what
the judge copied (a numeric span must occur in the chunk verbatim) and the cues a card falls
back on when the judge could not write one. Every function is pure and reads the text only.

* :func:`numeric_spans`: the figures of a text as written ("$1,240.5 million", "8.2%");
* :func:`verbatim`: whether a span occurs in the text (runs of whitespace compare equal);
* :func:`locate`: where a field value occurs in the text (the evidence span), case-insensitive;
* :func:`periods`: fiscal years and quarters named, normalised ("FY2025", "Q3 FY2025");
* :func:`table_signature`: whether the chunk is or holds a table, and its period columns,
  change column and total row;
* :func:`scope`: consolidated, segment or subsidiary wording, and regions named;
* :func:`boilerplate`, :func:`defines_metric`, :func:`heading`: flags;
* :func:`section`: the section an ``Item N.`` heading or a standard title names;
* :func:`metrics`: financial metrics named, from a short lexicon (fallback cards only).
"""

from __future__ import annotations

import re

# A figure as written: optional currency, digits with separators and decimals, then an
# optional percent sign or scale word. Years alone (1900-2099 with nothing around them) are
# periods, not figures.
_FIGURE = re.compile(
    r"(?<![\w.])(?:US\$|[$€£¥])?\s?\(?\d{1,3}(?:,\d{3})+(?:\.\d+)?\)?(?:\s?(?:%|percent|million|billion|thousand))?"
    r"|(?<![\w.])(?:US\$|[$€£¥])\s?\d+(?:\.\d+)?(?:\s?(?:million|billion|thousand))?"
    r"|(?<![\w.])\d+(?:\.\d+)?\s?(?:%|percent|million|billion|thousand|bps|basis points)"
    r"|(?<![\w.])\d+\.\d+(?![\w.])",
    re.IGNORECASE,
)
_BARE_YEAR = re.compile(r"^(?:19|20)\d{2}$")
_SPACES = re.compile(r"\s+")


def numeric_spans(text: str, limit: int = 8) -> list[str]:
    """The first ``limit`` distinct figures of ``text``, as written.

    >>> numeric_spans("Revenue was $1,240.5 million, up 8.2% from $1,146.5 million in 2024; EPS $2.41.")
    ['$1,240.5 million', '8.2%', '$1,146.5 million', '$2.41']
    """
    spans: list[str] = []
    for match in _FIGURE.finditer(text):
        span = match.group(0).strip()
        if _BARE_YEAR.match(span) or span in spans:
            continue
        spans.append(span)
        if len(spans) >= limit:
            break
    return spans


def squash(text: str) -> str:
    return _SPACES.sub(" ", text).strip()


def verbatim(span: str, text: str) -> bool:
    """Whether ``span`` occurs in ``text`` as written (only runs of whitespace may differ).

    >>> verbatim("$1,240.5  million", "revenue of $1,240.5 million"), verbatim("$1,240 million", "$1,240.5 million")
    (True, False)
    """
    span = squash(span)
    return bool(span) and span in squash(text)


def has_digit(text: str) -> bool:
    return any(ch.isdigit() for ch in text)


def locate(value: str, text: str) -> tuple[int, int] | None:
    """(start, end) of the first occurrence of ``value`` in ``text``, ignoring case; None when
    it does not occur. Whitespace inside ``value`` matches any run of whitespace.

    >>> locate("net income", "Net  income rose"), locate("EBITDA", "revenue")
    ((0, 11), None)
    """
    words = value.split()
    if not words:
        return None
    pattern = r"\s+".join(re.escape(w) for w in words)
    match = re.search(pattern, text, re.IGNORECASE)
    return (match.start(), match.end()) if match else None


# ---------------------------------------------------------------------------------------------
# Periods

_FISCAL_YEAR = re.compile(r"\b(?:fiscal(?:\s+year)?\s+|FY\s?'?)((?:19|20)?\d{2})\b", re.IGNORECASE)
_YEAR = re.compile(r"(?<![\w$.,])((?:19|20)\d{2})(?![\w%]|,\d|\.\d)")
_ORDINAL = {"first": 1, "second": 2, "third": 3, "fourth": 4, "1st": 1, "2nd": 2, "3rd": 3, "4th": 4}
_QUARTER = re.compile(
    r"\b(?:Q([1-4])|(first|second|third|fourth|1st|2nd|3rd|4th)\s+(?:fiscal\s+)?quarter)"
    r"(?:\s+(?:of\s+)?(?:fiscal\s+(?:year\s+)?|FY\s?)?((?:19|20)\d{2}))?",
    re.IGNORECASE,
)


def _four_digits(year: str) -> str:
    return year if len(year) == 4 else f"20{year}"


def periods(text: str, limit: int = 8) -> list[str]:
    """Fiscal years and quarters named in ``text``, normalised, in order of first mention.

    >>> periods("Revenue for fiscal 2025 rose from FY24; third quarter of 2025 and Q1 were weak.")
    ['FY2025', 'FY2024', 'Q3 FY2025', 'Q1']
    """
    found: list[tuple[int, str]] = []
    quarter_years: set[int] = set()
    for match in _QUARTER.finditer(text):
        number = match.group(1) or str(_ORDINAL[match.group(2).lower()])
        year = match.group(3)
        found.append((match.start(), f"Q{number} FY{year}" if year else f"Q{number}"))
        if year:
            quarter_years.add(match.start(3))
    for match in _FISCAL_YEAR.finditer(text):
        found.append((match.start(), f"FY{_four_digits(match.group(1))}"))
    fiscal_starts = {m.start(1) for m in _FISCAL_YEAR.finditer(text)}
    for match in _YEAR.finditer(text):
        if match.start(1) not in fiscal_starts and match.start(1) not in quarter_years:
            found.append((match.start(), f"FY{match.group(1)}"))
    ordered = list(dict.fromkeys(label for _, label in sorted(found)))
    return ordered[:limit]


def years(texts: list[str] | tuple[str, ...]) -> set[str]:
    """Four-digit years named in any of ``texts`` (also inside "FY2025" or "FY25")."""
    found: set[str] = set()
    for text in texts:
        found.update(re.findall(r"(?:19|20)\d{2}", text))
        found.update(f"20{y}" for y in re.findall(r"\bFY\s?'?(\d{2})\b", text, re.IGNORECASE))
    return found


# ---------------------------------------------------------------------------------------------
# Tables

_CHANGE = re.compile(r"\b(?:change|variance|increase\s*\(decrease\)|%\s*chg|y/y|yoy)\b|%\s*change", re.IGNORECASE)
_TOTAL = re.compile(r"^\s*\|?\s*total\b", re.IGNORECASE | re.MULTILINE)


def _table_lines(text: str) -> list[str]:
    """Lines that look like table rows: cells split by ``|`` or tabs, or three or more
    figures in a line of few words."""
    rows = []
    for line in text.splitlines():
        cells = [c for c in re.split(r"\||\t", line) if c.strip()]
        figures = re.findall(r"\(?\$?\d[\d,]*(?:\.\d+)?\)?%?", line)
        words = re.findall(r"[A-Za-z]{2,}", line)
        if len(cells) >= 3 or (len(figures) >= 3 and len(words) <= 2 * len(figures)):
            rows.append(line)
    return rows


def table_signature(text: str) -> dict:
    """Whether the chunk holds a table (at least two table-like rows), the periods its rows
    name (period columns), and whether it has a change column and a total row.

    >>> table_signature("Segment | 2025 | 2024 | Change\\nPumps | 820.1 | 760.3 | 7.9%\\nTotal | 1,240 | 1,146 | 8.2%")
    {'present': True, 'rows': 3, 'periods': ['FY2025', 'FY2024'], 'change_column': True, 'total_row': True}
    >>> table_signature("Revenue rose 8% in 2025.")["present"]
    False
    """
    rows = _table_lines(text)
    present = len(rows) >= 2
    table_text = "\n".join(rows)
    return {
        "present": present,
        "rows": len(rows),
        "periods": periods(table_text) if present else [],
        "change_column": bool(present and _CHANGE.search(table_text)),
        "total_row": bool(present and _TOTAL.search(table_text)),
    }


# ---------------------------------------------------------------------------------------------
# Scope, boilerplate, definitions, headings, sections

_SEGMENT = re.compile(r"\b(?:segments?|division|business unit|reportable)\b", re.IGNORECASE)
_SUBSIDIARY = re.compile(r"\b(?:subsidiar(?:y|ies)|joint venture)\b", re.IGNORECASE)
_CONSOLIDATED = re.compile(r"\b(?:consolidated|company-wide|total company)\b", re.IGNORECASE)
REGIONS = (
    "United States", "U.S.", "North America", "Latin America", "South America", "Europe", "EMEA", "Asia",
    "Asia Pacific", "APAC", "China", "Japan", "India", "Germany", "United Kingdom", "Canada", "Mexico",
    "Brazil", "France", "Poland", "Middle East", "Africa", "international", "domestic",
)
_REGION = re.compile(r"(?<!\w)(" + "|".join(re.escape(r) for r in sorted(REGIONS, key=len, reverse=True)) + r")(?!\w)")


def scope(text: str) -> dict:
    """The scope a chunk speaks for (segment, subsidiary, consolidated or unknown, first
    match in that order) and the regions it names.

    >>> scope("Pumps segment sales in Europe and North America grew.")
    {'level': 'segment', 'regions': ['Europe', 'North America']}
    """
    if _SEGMENT.search(text):
        level = "segment"
    elif _SUBSIDIARY.search(text):
        level = "subsidiary"
    elif _CONSOLIDATED.search(text):
        level = "consolidated"
    else:
        level = "unknown"
    regions = list(dict.fromkeys(m.group(1) for m in _REGION.finditer(text)))[:6]
    return {"level": level, "regions": regions}


_BOILERPLATE = re.compile(
    r"forward-looking statements?|safe harbor|private securities litigation reform act|"
    r"incorporated (?:herein )?by reference|not applicable|none\.?$|table of contents|"
    r"actual results (?:could|may) differ|undue reliance|routine litigation|"
    r"pursuant to the requirements of|signature[s]?$|exhibit \d",
    re.IGNORECASE | re.MULTILINE,
)


def boilerplate(text: str) -> bool:
    """Standard legal, cautionary or navigational wording (forward-looking statements, safe
    harbor, incorporated by reference, table of contents, routine litigation, ...).

    >>> boilerplate("Forward-looking statements involve risks."), boilerplate("Revenue rose 8%.")
    (True, False)
    """
    return bool(_BOILERPLATE.search(text))


_DEFINES = re.compile(
    r"\b(?:is|are) defined as\b|\bwe define\b|\bdefined as\b|\brefers? to\b|\bmeans\b|"
    r"\b(?:is|are) calculated as\b|\bwe calculate\b|\bis measured as\b|\bwe recogni[sz]e revenue\b|"
    r"\baccounting polic(?:y|ies)\b",
    re.IGNORECASE,
)


def defines_metric(text: str) -> bool:
    """Whether the chunk defines a metric or states how something is measured or accounted for.

    >>> defines_metric("Adjusted EBITDA is defined as net income before interest."), defines_metric("EBITDA rose.")
    (True, False)
    """
    return bool(_DEFINES.search(text))


def heading(text: str) -> bool:
    """A title or header with no content: at most 12 words, no figure, and an ``Item N``
    heading or no sentence end.

    >>> heading("Item 7. Management's Discussion and Analysis"), heading("Revenue rose 8% in 2025.")
    (True, False)
    """
    stripped = text.strip()
    words = stripped.split()
    if not 0 < len(words) <= 12 or numeric_spans(stripped):
        return False
    return bool(_ITEM.match(stripped)) or not stripped.endswith((".", ";", ":", "?", "!"))


SECTIONS = (
    "Business", "Risk Factors", "Legal Proceedings", "Market for Equity", "MD&A", "Market Risk",
    "Financial Statements", "Notes", "Controls and Procedures", "Governance", "Executive Compensation",
    "Exhibits", "Cover", "Other",
)
_ITEM = re.compile(r"^\s*item\s+(\d{1,2}[ab]?)\b[.:\s]", re.IGNORECASE)
# Item numbers of the 10-K (Part I-IV); a 10-Q numbers its items per part, so only the titles
# below identify its sections.
_ITEMS_10K = {
    "1": "Business", "1a": "Risk Factors", "3": "Legal Proceedings", "5": "Market for Equity", "7": "MD&A",
    "7a": "Market Risk", "8": "Financial Statements", "9a": "Controls and Procedures", "10": "Governance",
    "11": "Executive Compensation", "15": "Exhibits",
}
_TITLES = (
    (re.compile(r"management'?s discussion and analysis", re.I), "MD&A"),
    (re.compile(r"\brisk factors\b", re.I), "Risk Factors"),
    (re.compile(r"quantitative and qualitative disclosures? about market risk", re.I), "Market Risk"),
    (re.compile(r"\blegal proceedings\b", re.I), "Legal Proceedings"),
    (re.compile(r"notes to (?:the )?(?:condensed )?(?:consolidated )?financial statements", re.I), "Notes"),
    (re.compile(r"consolidated (?:balance sheets?|statements? of)", re.I), "Financial Statements"),
    (re.compile(r"controls and procedures", re.I), "Controls and Procedures"),
    (re.compile(r"executive compensation", re.I), "Executive Compensation"),
    (re.compile(r"securities and exchange commission|commission file number", re.I), "Cover"),
)


def section(text: str) -> str | None:
    """The section a chunk's own heading names: an ``Item N.`` heading of the 10-K item list,
    or a standard section title in its first line; None when it names none.

    >>> section("Item 1A. Risk Factors\\nWe depend on suppliers."), section("Legal proceedings: routine."), section("Revenue rose.")
    ('Risk Factors', 'Legal Proceedings', None)
    """
    first = text.strip().splitlines()[0] if text.strip() else ""
    item = _ITEM.match(first)
    if item and item.group(1).lower() in _ITEMS_10K:
        return _ITEMS_10K[item.group(1).lower()]
    for pattern, name in _TITLES:
        if pattern.search(first[:160]):
            return name
    return None


# Common financial metrics, for fallback cards only (a judge-written card names its own).
METRICS = (
    "revenue", "net sales", "cost of revenue", "gross margin", "gross profit", "operating income",
    "operating margin", "operating expenses", "net income", "net loss", "earnings per share", "EPS",
    "EBITDA", "adjusted EBITDA", "free cash flow", "operating cash flow", "cash provided by operating activities",
    "capital expenditures", "research and development", "SG&A", "selling, general and administrative",
    "long-term debt", "dividend", "share repurchase", "backlog", "effective tax rate", "inventory", "goodwill",
)
_METRIC = re.compile(r"(?<!\w)(" + "|".join(re.escape(m) for m in sorted(METRICS, key=len, reverse=True)) + r")(?!\w)",
                     re.IGNORECASE)


def metrics(text: str, limit: int = 6) -> list[str]:
    """Lexicon metrics named in ``text``, lowercased (acronyms kept), in order of mention.

    >>> metrics("Net income and revenue rose; adjusted EBITDA was flat.")
    ['net income', 'revenue', 'adjusted EBITDA']
    """
    canonical = {m.lower(): m for m in METRICS}
    found = [canonical[m.group(1).lower()] for m in _METRIC.finditer(text)]
    return list(dict.fromkeys(found))[:limit]
