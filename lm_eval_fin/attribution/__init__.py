"""Attributed answers (FinLFQA): parse a model's answer into clauses with their evidence, code
and knowledge attributions, and score the attributions (paper section 4.3).

The format the FinLFQA prompt asks for (``tasks/fin_lfqa/README.md`` shows it to users)::

    1. <clause: one claim, in prose>
    Evidence: CWT [3, 16]; AWK [2]
    Code:
    ```python
    def cwt_interest_growth():
        return (125 - 100) / 100 * 100
    ```
    Knowledge: [4]
    2. <next clause>
    Evidence: inferred from clause 1
    Code: none
    Knowledge: []

:func:`parse_answer` also reads what models drift into: markdown headings, bullets and bold
labels (``**Evidence:**``), ``Clause 1:`` headers, attributes on the clause's own line,
``Evidence: CWT: [16], AWK: []``, ``paragraph 16 of CWT``, multi-line evidence lists, code
with or without fences (fences nested in an outer fence, or left unclosed), ``inferred from
clause 2`` (no evidence), and JSON answers (``{"clauses": [{"text": ..., "evidence": {...},
"code": ..., "knowledge": [...]}]}``, optionally in a ```json fence). An answer with no
attribution at all (no Evidence / Code / Knowledge label, and no JSON clause with an
evidence, code or knowledge key: a JSON list of bare claims is no more attributed than
"1. A claim.\n2. Another.") is a parse failure: it keeps its text for the text metrics but
has no clauses and no attributions. Snippets are dedented, so code indented under a list
item runs. Nothing here raises on any input.

Scores, per example (the task averages them over examples):

* evidence precision / recall / F1 over the sets of (company, paragraph index) pairs cited
  in all clauses; companies compare case-insensitively; a citation without a company
  (``Evidence: [3]``) keeps company ``""`` and so never matches a reference pair;
* knowledge recall over the sets of knowledge indices; undefined (None) when the reference
  cites none, so that averages leave those examples out (the paper defines no knowledge
  precision);
* evidence's empty cases follow the numeric metric's convention: both sides empty scores 1,
  exactly one side empty scores 0.
"""

from lm_eval_fin.attribution.answer import Clause, ParsedAnswer, clause_from_json, parse_answer
from lm_eval_fin.attribution.scores import evidence_prf, knowledge_recall
from lm_eval_fin.attribution.values import (
    Evidence,
    code_from_json,
    evidence_from_json,
    inferred_clauses,
    inline_code,
    knowledge_from_json,
    parse_evidence,
    parse_indices,
)

__all__ = [
    "Clause",
    "Evidence",
    "ParsedAnswer",
    "clause_from_json",
    "code_from_json",
    "evidence_from_json",
    "evidence_prf",
    "inferred_clauses",
    "inline_code",
    "knowledge_from_json",
    "knowledge_recall",
    "parse_answer",
    "parse_evidence",
    "parse_indices",
]
