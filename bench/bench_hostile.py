"""Hostile answers cost bounded time and memory (issue: "bad input never costs a run").

Each case runs in a fresh child process, which reports its wall time and the growth of its
peak RSS over its own baseline (imports included in neither). The peer of each row is the
same computation on a normal answer (a few hundred words), measured the same way in the same
run: the ratio says how much a hostile answer costs over an ordinary one.
"""

from __future__ import annotations

import json
import subprocess
import sys

CASES = {
    # name: (code building `text` from `n`, the work on it, hostile n, normal n)
    "ROUGE-L, distinct tokens on both sides": (
        "words = [f'w{i}' for i in range(n)]; text = ' '.join(words); other = ' '.join(reversed(words))",
        "textsim.rouge_l([text], [other])", 300_000, 300,
    ),
    "FinLFQA answer parser, evidence list": (
        "text = '1. Revenue rose.\\nEvidence: ' + ', '.join(f'CWT [{i}]' for i in range(n))",
        "attribution.parse_answer(text, ['CWT', 'AWK'])", 2_000_000, 30,
    ),
    "FinLFQA per-document scores, repeated clauses": (
        "text = '1. CWT interest rose 25% to $125 million.\\nEvidence: CWT [1]\\nCode: none\\nKnowledge: [0]\\n' * n",
        "score.score_document(doc, text)", 150_000, 5,
    ),
    "ranking parser, blank lines with labels": (
        "text = '\\n' * n + '1. 10-K'",
        "ranking.parse_ranking(text, list(range(5)), labels={1: '10-K', 2: '10-Q'})", 1_000_000, 50,
    ),
    "number reader, figures": (
        "text = ' '.join(f'{i}.5% of $1.2 billion' for i in range(n))",
        "numbers.extract_numbers(text)", 500_000, 50,
    ),
    "answer with surrogates, NUL and escapes": (
        "text = ('\\ud800 \\x00 \\x1b[31m revenue 5% ' * n)",
        "attribution.parse_answer(text, ['CWT']); json.dumps(cleantext.read_answer(text)[0]).encode('utf-8')",
        500_000, 50,
    ),
}

CHILD = """
import json, resource, sys, time
from lm_eval_fin import attribution
from lm_eval_fin.text import cleantext
from lm_eval_fin.measures import numbers, ranking, textsim
from lm_eval_fin.benchmarks.fin_lfqa import data, score
sys.path.insert(0, {tests!r})
from tests.finlfqa_fixtures import hub_record
doc = data.to_document(hub_record())
n = {n}
{build}
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.perf_counter()
{work}
print(json.dumps([time.perf_counter() - start, (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) / 1024]))
"""


def measure(build: str, work: str, n: int) -> tuple[float, float]:
    from pathlib import Path

    tests = str(Path(__file__).resolve().parent.parent)
    code = CHILD.format(tests=tests, n=n, build=build, work=work)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    seconds, megabytes = json.loads(done.stdout.strip().splitlines()[-1])
    return seconds, megabytes


def run() -> list[dict]:
    rows = []
    for name, (build, work, hostile, normal) in CASES.items():
        seconds, megabytes = measure(build, work, hostile)
        peer_seconds, peer_megabytes = measure(build, work, normal)
        rows.append({
            "figure": f"{name}: time (s)", "ours": seconds, "peer": peer_seconds,
            "ratio": seconds / max(peer_seconds, 1e-4), "unit": "s",
            "note": f"hostile n={hostile:,} vs normal n={normal:,}; peak RSS growth {megabytes:.0f} MB "
                    f"(normal {peer_megabytes:.0f} MB)",
        })
    return rows


if __name__ == "__main__":
    for row in run():
        print(row)
