"""A scripted, deterministic EMS judge behind the real OpenAI-compatible test server.

    with ScriptedJudgeServer() as server:
        judge = f"openai:{server.base_url}#scripted"

It answers every kind of request the EMS pass sends, recognised by the shape of the last user
turn (never by the wording of the guidelines, so it answers older prompt versions too), by
fixed rules built on the offline EMS code:

* summary removal ("Numbered units of the answer:"): leading units that frame the answer
  (they end with a colon or open with "Here is", "Below", ...) and trailing units that sum it
  up ("Overall", "In summary", ...);
* extraction ("Answer:"): :func:`lm_eval_fin.ems.offline.extract_points`;
* matching ("Reference point:" + "Answer points:"): :func:`lm_eval_fin.ems.offline.match_points`;
* scoring ("Reference point:" + "Answer point:"): ROUGE-L F1 of the pair x 10, rounded;
* claim checking ("Text:" + "Claims:"): entailment when the claim matches a point of the text
  by the offline matcher, else neutral.

A user turn that contains ``[[garble]]`` is answered with prose no parser reads; the test
server's own faults (``[[status:500]]`` and the others of ``openai_server``) work as there.

It measures the mechanics of a judged run (rounds, requests, failures), not the quality of
the prompts: a real judge reads the guidelines, this one does not.
"""

from __future__ import annotations

import json
import re
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from openai_server import ServerThread, _handler, _QuietServer, _State  # noqa: E402

from lm_eval_fin.ems import offline  # noqa: E402
from lm_eval_fin.measures import textsim  # noqa: E402

_ITEM = re.compile(r"^\[(\d+)\] (.*)$", re.MULTILINE)
_FRAMING = re.compile(r"^(here(?:'s| is| are)|below\b|the following\b|sure\b|let me\b)", re.IGNORECASE)
_SUMMING = re.compile(
    r"^(overall|in (?:summary|conclusion|short|sum)|to (?:summari[sz]e|conclude)|all in all|taken together)\b",
    re.IGNORECASE,
)


def _items(block: str) -> list[str]:
    return [text for _, text in _ITEM.findall(block)]


def summary_bounds(units: list[str]) -> tuple[int, int]:
    opening = 0
    while opening < len(units) - 1 and (units[opening].rstrip().endswith(":") or _FRAMING.match(units[opening])):
        opening += 1
    closing = 0
    while opening + closing < len(units) - 1 and _SUMMING.match(units[len(units) - 1 - closing]):
        closing += 1
    return opening, closing


def reply(messages: list[dict]) -> str:
    """The scripted answer to a chat request (see the module docstring)."""
    user = next(m["content"] for m in reversed(messages) if m.get("role") == "user")
    if "[[garble]]" in user:
        return "Let me think about that for a moment."
    if user.startswith("Numbered units of the answer:\n"):
        opening, closing = summary_bounds(_items(user))
        return json.dumps({"opening": opening, "closing": closing})
    if user.startswith("Answer:\n"):
        return json.dumps({"points": offline.extract_points(user.removeprefix("Answer:\n"))})
    if user.startswith("Reference point:\n") and "\n\nAnswer points:\n" in user:
        reference, listing = user.removeprefix("Reference point:\n").split("\n\nAnswer points:\n", 1)
        (index,) = offline.match_points([reference], _items(listing))
        return json.dumps({"match": index + 1 if index >= 0 else -1})
    if user.startswith("Reference point:\n") and "\n\nAnswer point:\n" in user:
        reference, answer = user.removeprefix("Reference point:\n").split("\n\nAnswer point:\n", 1)
        ((_, _, f1),) = textsim.rouge_l([answer], [reference])
        return json.dumps({"score": int(f1 * 10 + 0.5)})
    if user.startswith("Text:\n") and "\n\nClaims:\n" in user:
        premise, listing = user.removeprefix("Text:\n").rsplit("\n\nClaims:\n", 1)
        premise_points = offline.extract_points(premise)
        verdicts = [
            "entailment" if index >= 0 else "neutral"
            for index in offline.match_points(_items(listing), premise_points)
        ]
        return json.dumps({"verdicts": verdicts})
    return "I do not know this kind of request."


def _generate(messages: list[dict], max_tokens: int) -> tuple[str, int, int]:
    text = reply(messages)
    prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in messages)
    return text, prompt_tokens, len(text.split())


class ScriptedJudgeServer(ServerThread):
    """The test server, in a thread of this process, answering by :func:`reply`."""

    def __init__(self):
        self.state = _State(None, None)
        self.state.generate = _generate
        self.server = _QuietServer(("127.0.0.1", 0), _handler(self.state))
        self.port = self.server.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def spec(self) -> str:
        return f"openai:{self.base_url}#scripted"


def main() -> None:
    """Serve until killed; prints ``SPEC <judge spec>`` once listening."""
    server = ScriptedJudgeServer()
    print(f"SPEC {server.spec}", flush=True)
    server.thread.join()


if __name__ == "__main__":
    main()
