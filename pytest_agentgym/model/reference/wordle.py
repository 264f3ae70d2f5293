"""Reference policy for Wordle: keep the words consistent with all feedback, guess the
one that splits them best.

Everything comes from the conversation:

* the vocabulary is the fenced block of 5-letter words in a user turn (our
  rules prompt has one); without it the policy falls back to the 40 words of
  LMRL-Gym's list;
* each earlier guess is read from an assistant turn the way the Wordle client
  reads it (text after the first ``Action:``, spaces removed) and paired with
  the next user turn, the server's ``b y g g b`` feedback (``invalid word``
  teaches nothing).

Feedback follows the server's rule (protocol sheet 14.2.5): ``g`` for the same
letter at that position, else ``y`` when the letter occurs anywhere in the
target, else ``b``; no letter counting. The server re-draws the target from the
consistent words at every valid guess, so any consistent guess can win; among
them the policy picks the one whose feedback partitions the candidates into
the smallest groups (least expected number of words left), ties by list order.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from functools import lru_cache
from importlib import resources
from typing import Sequence

from pytest_agentgym.model.reference.base import Message, react

_FENCED = re.compile(r"```[^\n]*\n(.*?)```", re.DOTALL)
_WORD = re.compile(r"[a-z]{5}")
_FEEDBACK = re.compile(r"[byg]( [byg]){4}")
_MIN_VOCABULARY = 5  # a fenced block with fewer words is an example, not the list


@lru_cache(maxsize=1)
def fallback_vocabulary() -> tuple[str, ...]:
    """LMRL-Gym's 40-word list, as shipped with the embedded server."""
    text = (
        resources.files("pytest_agentgym.servers.embedded") / "wordle_vocab.txt"
    ).read_text(encoding="utf-8")
    return tuple(w for w in (line.strip() for line in text.splitlines()) if len(w) == 5)


def feedback(guess: str, target: str) -> str:
    """The server's feedback for ``guess`` if the hidden word were ``target``."""
    return " ".join(
        "g" if g == t else ("y" if g in target else "b") for g, t in zip(guess, target)
    )


def vocabulary_in(messages: Sequence[Message]) -> tuple[str, ...] | None:
    """The word list from the first fenced block of 5-letter words in a user turn."""
    for message in messages:
        if message.get("role") != "user":
            continue
        for block in _FENCED.findall(message.get("content") or ""):
            lines = [line.strip() for line in block.splitlines() if line.strip()]
            if len(lines) >= _MIN_VOCABULARY and all(_WORD.fullmatch(w) for w in lines):
                return tuple(lines)
    return None


def guesses_and_feedback(messages: Sequence[Message]) -> list[tuple[str, str | None]]:
    """Each assistant guess (cleaned like the server) with the feedback that answered it;
    None when the answer was not feedback (``invalid word``, or not answered yet)."""
    # Imported here: envs.base brings jinja2 and httpx, which the reference agent's
    # start-up (every run that uses it waits for it) has no other use for.
    from pytest_agentgym.envs.base import extract_first_split

    history: list[tuple[str, str | None]] = []
    for i, message in enumerate(messages):
        if message.get("role") != "assistant":
            continue
        guess = extract_first_split(message.get("content") or "").replace(" ", "")
        answer = None
        if i + 1 < len(messages) and messages[i + 1].get("role") == "user":
            text = (messages[i + 1].get("content") or "").strip()
            if _FEEDBACK.fullmatch(text):
                answer = text
        history.append((guess, answer))
    return history


def consistent(words: Sequence[str], history: Sequence[tuple[str, str | None]]) -> list[str]:
    return [
        word
        for word in words
        if all(answer is None or feedback(guess, word) == answer for guess, answer in history)
    ]


def best_split(candidates: Sequence[str]) -> str:
    """The candidate whose feedback leaves the fewest words on average (sum of squared
    group sizes); the first in list order on ties."""

    def spread(guess: str) -> int:
        groups = Counter(feedback(guess, target) for target in candidates)
        return sum(size * size for size in groups.values())

    return min(candidates, key=spread)


def spaced(word: str) -> str:
    return " ".join(word)


class WordlePolicy:
    name = "Wordle"

    def recognizes(self, messages: Sequence[Message]) -> bool:
        for message in messages:
            if message.get("role") != "user":
                continue
            text = (message.get("content") or "").strip()
            if "wordle" in text.lower() or _FEEDBACK.fullmatch(text) or text == "invalid word":
                return True
        return vocabulary_in(messages) is not None

    def reply(self, messages: Sequence[Message], rng: random.Random) -> str:
        words = vocabulary_in(messages) or fallback_vocabulary()
        history = guesses_and_feedback(messages)
        candidates = consistent(words, history)
        if not candidates:
            # The feedback contradicts every word we know: guess something untried.
            tried = {guess for guess, _ in history}
            untried = [w for w in words if w not in tried] or list(words)
            guess = rng.choice(untried)
            return react(
                "No word in the list fits all the feedback; I will try an untried word.",
                spaced(guess),
            )
        guess = best_split(candidates)
        if len(candidates) == 1:
            thought = f"Only '{guess}' fits all the feedback so far."
        else:
            thought = (
                f"{len(candidates)} words still fit the feedback. '{guess}' is one of them "
                "and its feedback would narrow the rest down the most."
            )
        return react(thought, spaced(guess))

    def random_reply(self, messages: Sequence[Message], rng: random.Random) -> str:
        words = vocabulary_in(messages) or fallback_vocabulary()
        guess = rng.choice(words)
        return react(f"I will guess '{guess}'.", spaced(guess))


POLICY = WordlePolicy()
