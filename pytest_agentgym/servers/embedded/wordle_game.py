"""LMRL-Gym Wordle as AgentGym's lmrlgym server plays it (no HTTP here).

Facts from the protocol sheet, section 14.2:

* the vocabulary is LMRL-Gym's ``tweet_words.txt``: 40 lowercase words, and their
  file order matters (``wordle_vocab.txt`` beside this module holds them);
* there is no fixed hidden word: ``reset(seed)`` seeds ``random.Random(seed)``,
  and every *valid* guess draws a fresh target with ``rng.choice`` from the
  words, in file order, still consistent with all earlier feedback;
* feedback is ``g`` (same letter here), ``y`` (letter anywhere in the target) or
  ``b``, with no letter counting, written ``"b y g g b\\n"``;
* a guess is cleaned by stripping it and deleting every space; it is valid iff
  the result is one of the vocabulary words. Invalid guesses answer
  ``invalid word`` with the float ``0.0``, draw nothing and still count;
* served rewards are ``0`` (valid, unsolved), ``1`` (solved) and ``0.0``
  (invalid); the game ends when solved or on the 6th action.

Python's ``random.Random`` is CPython's MT19937, so seeds draw the same words as
the original server did.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources

MAX_GUESSES = 6
INVALID_WORD = "invalid word"
RESET_OBSERVATION = "Let's start Wordle!"


@lru_cache(maxsize=1)
def vocabulary() -> tuple[str, ...]:
    """The 40 words in file order (lines stripped, only 5-character lines kept)."""
    text = (resources.files(__package__) / "wordle_vocab.txt").read_text(encoding="utf-8")
    return tuple(line.strip() for line in text.splitlines() if len(line.strip()) == 5)


def feedback(guess: str, target: str) -> str:
    """Letters g/y/b for ``guess`` against ``target``, joined by spaces (no newline).

    Each position is judged on its own: a repeated letter is yellow at every
    position where it is not green, as long as the target contains it once.
    """
    return " ".join(
        "g" if g == t else ("y" if g in target else "b") for g, t in zip(guess, target)
    )


def clean_guess(action: str) -> str:
    """What the server compares with the vocabulary: stripped, U+0020 spaces removed."""
    return action.strip().replace(" ", "")


@dataclass
class WordleStep:
    observation: str
    reward: int | float  # int 0 / 1, or float 0.0 for an invalid word, exactly as served
    done: bool


@dataclass
class WordleGame:
    """One game: the RNG, the words still consistent, and the actions taken so far."""

    rng: random.Random = field(default_factory=random.Random)
    candidates: list[str] = field(default_factory=lambda: list(vocabulary()))
    actions_taken: int = 0
    done: bool = False

    @classmethod
    def seeded(cls, seed: int) -> "WordleGame":
        return cls(rng=random.Random(seed))

    def step(self, action: str) -> WordleStep:
        if self.done:
            raise RuntimeError("step on a finished Wordle game; reset it first")
        self.actions_taken += 1
        last_action = self.actions_taken >= MAX_GUESSES
        guess = clean_guess(action)
        if guess not in vocabulary():
            self.done = last_action
            return WordleStep(INVALID_WORD, 0.0, self.done)
        target = self.rng.choice(self.candidates)
        pattern = feedback(guess, target)
        self.candidates = [w for w in self.candidates if feedback(guess, w) == pattern]
        solved = guess == target
        self.done = solved or last_action
        return WordleStep(pattern + "\n", 1 if solved else 0, self.done)
