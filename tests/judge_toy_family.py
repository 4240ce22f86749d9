"""A task family with judge metrics that exists only for the tests of ``lm-eval-fin score``.

Its judge is the echo server of tests/openai_server.py: the answer to "grade: <text>" is
"echo: grade: <text>", and the toy score of a sample is the length of the text that came
back. A sample whose answer asks the server for another reply gets an unparsable answer.
"""

from lm_eval_fin.harness.benchmark import Benchmark
from lm_eval_fin.judge import JudgeRequest, complete_parsed

PREFIX = "echo: grade: "


def parse_echo(text):
    return len(text) - len(PREFIX) if text.startswith(PREFIX) else None


def rescore(samples, judge):
    answers = [sample["filtered_resps"][0] for sample in samples]
    requests = [JudgeRequest(messages=({"role": "user", "content": f"grade: {answer}"},)) for answer in answers]
    scores = complete_parsed(judge, requests, parse_echo, desc="toy judge", max_attempts=2)
    scored = [s for s in scores if s is not None]
    metrics = {
        "toy_score": sum(scored) / len(scored) if scored else float("nan"),
        "toy_parse_failures": float(len(scores) - len(scored)),
    }
    return metrics, [{"toy_score": s, "parse_failure": s is None} for s in scores]


BENCHMARK = Benchmark(name="fin_toy", tasks=("fin_toy",), rescore=rescore)
