"""Units of an answer for the summary-removal round, and its body once the judge has spoken.

The judge sees the answer as numbered units (each sentence of each non-empty line, so a list
item is a unit and a lead-in sentence before a list is one too) and says how many leading
units introduce it and how many trailing units conclude it
(:func:`lm_eval_fin.ems.prompts.summary_request`). The body is the original text from the
first kept unit to the last, verbatim, so the extractor sees the answer's own layout.
"""

from __future__ import annotations

from lm_eval_fin.ems.offline import split_sentences


def unit_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) offsets in ``text`` of its units, in order.

    >>> text = "Here is the overview:\\n- Revenue rose 6%. Margins held.\\nOverall, good."
    >>> [text[a:b] for a, b in unit_spans(text)]
    ['Here is the overview:', '- Revenue rose 6%.', 'Margins held.', 'Overall, good.']
    """
    spans: list[tuple[int, int]] = []
    offset = 0
    for line in text.splitlines(keepends=True):
        cursor = 0
        for sentence in split_sentences(line):
            start = line.find(sentence, cursor)
            if start < 0:  # split_sentences only strips, so this never happens; keep the line whole
                spans.append((offset + len(line) - len(line.lstrip()), offset + len(line.rstrip())))
                break
            spans.append((offset + start, offset + start + len(sentence)))
            cursor = start + len(sentence)
        offset += len(line)
    return spans


def units(text: str) -> list[str]:
    return [text[start:end] for start, end in unit_spans(text)]


def body(text: str, opening: int, closing: int) -> str:
    """``text`` without its first ``opening`` and last ``closing`` units (at least one unit
    stays: bounds that would leave none keep the text whole).

    >>> body("Here is the overview:\\n- Revenue rose 6%.\\n- Margins held.\\nOverall, good.", 1, 1)
    '- Revenue rose 6%.\\n- Margins held.'
    """
    spans = unit_spans(text)
    if opening < 0 or closing < 0 or opening + closing >= len(spans):
        return text.strip()
    return text[spans[opening][0] : spans[len(spans) - 1 - closing][1]]
