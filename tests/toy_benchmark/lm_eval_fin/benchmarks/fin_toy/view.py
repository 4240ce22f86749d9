"""fin_toy in the report: the question with its reference, the answer with the judge's verdict."""

from __future__ import annotations

from lm_eval_fin.outputs.runfiles import Sample
from lm_eval_fin.report import blocks as ui


def question(sample: Sample) -> list[ui.Block]:
    return [ui.text_block("Question", str(sample.doc.get("question", ""))),
            ui.text_block("Reference answer", str(sample.doc.get("reference", "")))]


def answer(sample: Sample) -> list[ui.Block]:
    logged = sample.record.get("judge")
    judge = logged if isinstance(logged, dict) else {}
    return [ui.answer_block(sample), ui.facts_block("Judge", [("judge", judge.get("spec")),
                                                             ("verdict", judge.get("correct"))])]


VIEW = ui.View(question=question, answer=answer)
