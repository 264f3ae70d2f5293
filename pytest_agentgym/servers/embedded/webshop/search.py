"""WebShop's search engine: the original's Lucene BM25 ranking, rebuilt on ``regex`` and ``nltk``.

The original searches with pyserini 0.17's ``LuceneSearcher`` (Anserini 0.14.3 on Lucene
8.11) over an index that ``search_engine/convert_product_file_format.py`` and
``run_indexing.sh`` build (JsonCollection, DefaultLuceneDocumentGenerator), and keeps the
first 50 hits (``SEARCH_RETURN_N``). This module gives the same ranking without a JVM:

* **document**: per product, ``Title``, ``Description``, ``BulletPoints[0]`` and the options
  written as ``"name: v1, v2"`` (joined with ``", and "``), joined with spaces and
  lower-cased (:func:`document_text`);
* **analyzer** (Anserini's ``DefaultEnglishAnalyzer``): Unicode word segmentation
  (UAX #29, what Lucene's ``StandardTokenizer`` implements: the ``regex`` package's
  word boundaries), keeping the segments with a letter, a decimal digit, an emoji or a
  South-East-Asian letter, at most 255 characters each; a trailing ``'s`` dropped
  (``EnglishPossessiveFilter``); lower-cased a character at a time, as Java does;
  Lucene's 33 English stop words removed; the Porter stemmer of Martin Porter's reference
  code (``nltk``'s ``PorterStemmer`` in ``MARTIN_EXTENSIONS`` mode: Lucene's
  ``PorterStemFilter`` ports the same code; the Snowball "porter" differs on words like
  "assembly" and "us");
* **query**: analysed the same way; each distinct term is a clause whose weight is the
  number of times it occurs (Anserini's ``BagOfWordsQueryGenerator``); a query with no
  term left (only stop words or punctuation) finds nothing;
* **score** (Lucene 8's ``BM25Similarity``, k1=0.9, b=0.4 as ``LuceneSearcher`` sets them):
  per clause ``w - w / (1 + tf / (k1 * (1 - b + b * dl / avgdl)))`` with
  ``w = count * log(1 + (N - df + 0.5) / (df + 0.5))``, summed over the clauses. As in
  Lucene, the document length ``dl`` is the one its one-byte norm keeps
  (``SmallFloat.intToByte4``: exact up to 40 terms, then 4 significant bits), ``avgdl``
  is exact, and every step is rounded to 32-bit floats as Java's ``float`` is, so equal
  scores are equal here too;
* **order**: score descending, then ASIN ascending (Anserini sorts by score and then by
  the ``id`` field), the first ``k``.

On the same documents this gives the same 50 ASINs in the same order as pyserini for every
query measured: ``benchmarks/servers/webshop_search.py`` (figures in docs/envs/webshop-search.md).
Where it can still differ: Lucene 8.11's older Unicode tables (letters added to Unicode
later are words here, not there), runs of Thai or Lao letters (one token in Lucene, one per
character here) and a lone emoji modifier; none occurs in product text in English.

``regex`` and ``nltk`` come with the extra ``webshop``: ``pip install 'pytest-agentgym[webshop]'``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from functools import lru_cache
from typing import Any, Callable

import numpy as np

from pytest_agentgym.servers.embedded.webshop import missing_requirements

#: BM25 parameters of pyserini's LuceneSearcher (its defaults, which the original keeps)
K1 = 0.9
B = 0.4
#: hits the original keeps (engine.SEARCH_RETURN_N)
DEFAULT_K = 50
#: Lucene's EnglishAnalyzer.ENGLISH_STOP_WORDS_SET, which DefaultEnglishAnalyzer uses
STOP_WORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their "
    "then there these they this to was will with".split()
)
#: StandardTokenizer's default maximum token length; longer words are cut into pieces
MAX_TOKEN_CHARS = 255
#: endings EnglishPossessiveFilter removes (apostrophe, right single quote, fullwidth apostrophe)
POSSESSIVE_ENDINGS = ("'s", "\u2019s", "\uff07s")


class SearchSetupError(RuntimeError):
    """The engine cannot run here (a package is missing); the message says what to install."""


# --- the document ---------------------------------------------------------------------------

def _text(value: Any) -> str:
    return "" if value is None else str(value)


def options_text(options: Mapping[str, Iterable[str]] | None) -> str:
    """The options as convert_product_file_format.py writes them: ``"size: s, m, and color: red"``."""
    parts = [f"{name}: {', '.join(values)}" for name, values in (options or {}).items()]
    return ", and ".join(parts)


def document_text(product: Mapping[str, Any]) -> str:
    """The text the original indexes for a product, lower-cased.

    A product without bullet points indexes an empty one there, and a missing field
    indexes as empty (the original's converter would fail on both; its data has neither).
    """
    bullets = product.get("BulletPoints") or [""]
    return " ".join([
        _text(product.get("Title")),
        _text(product.get("Description")),
        _text(bullets[0]),
        options_text(product.get("options")),
    ]).lower()


# --- the analyzer ---------------------------------------------------------------------------

@lru_cache(maxsize=1)
def _analyzer_parts() -> tuple[Any, Any, Callable[[str], str]]:
    """(word-boundary pattern, token test, cached stemmer), imported at first use."""
    problem = missing_requirements()
    if problem:
        raise SearchSetupError(problem)
    import regex
    from nltk.stem.porter import PorterStemmer

    boundary = regex.compile(r"\b", flags=regex.WORD | regex.V1)
    keeps = regex.compile(r"[\p{L}\p{Nd}\p{Extended_Pictographic}\p{Regional_Indicator}\p{lb=SA}]")
    stemmer = PorterStemmer(PorterStemmer.MARTIN_EXTENSIONS)
    return boundary, keeps, lru_cache(maxsize=200_000)(stemmer.stem)


def words(text: str) -> Iterator[str]:
    """StandardTokenizer's tokens: UAX #29 words with a letter, digit or emoji, cut at 255 chars."""
    boundary, keeps, _ = _analyzer_parts()
    for segment in boundary.split(text):
        if segment and keeps.search(segment):
            for start in range(0, len(segment), MAX_TOKEN_CHARS):
                yield segment[start:start + MAX_TOKEN_CHARS]


def _java_lower(word: str) -> str:
    # Java lower-cases code point by code point: no final sigma, and U+0130 becomes a plain "i"
    if word.isascii():
        return word.lower()
    return "".join(char.lower()[:1] for char in word)


def analyze(text: str) -> list[str]:
    """The terms DefaultEnglishAnalyzer makes of ``text``, in order."""
    stem = _analyzer_parts()[2]
    terms = []
    for word in words(text):
        if word[-2:].lower() in POSSESSIVE_ENDINGS:
            word = word[:-2]
        word = _java_lower(word)
        if word and word not in STOP_WORDS:
            terms.append(stem(word))
    return terms


# --- Lucene's one-byte length norm ----------------------------------------------------------

def _long_to_int4(value: int) -> int:
    bits = value.bit_length()
    if bits < 4:
        return value
    shift = bits - 4
    return ((value >> shift) & 0x07) | ((shift + 1) << 3)


def _int4_to_long(code: int) -> int:
    shift = (code >> 3) - 1
    return code & 0x07 if shift == -1 else ((code & 0x07) | 0x08) << shift


#: lengths below this are kept exactly by the norm (SmallFloat's NUM_FREE_VALUES: 24)
_EXACT_LENGTHS = 255 - _long_to_int4(2**31 - 1)


def encode_length(length: int) -> int:
    """``SmallFloat.intToByte4``: the byte (0-255) Lucene stores for a field of ``length`` terms."""
    if length < 0:
        raise ValueError(f"a field length cannot be negative, got {length}")
    if length < _EXACT_LENGTHS:
        return length
    return _EXACT_LENGTHS + _long_to_int4(length - _EXACT_LENGTHS)


def decode_length(code: int) -> int:
    """``SmallFloat.byte4ToInt``: the length a stored norm byte stands for."""
    if code < _EXACT_LENGTHS:
        return code
    return _EXACT_LENGTHS + _int4_to_long(code - _EXACT_LENGTHS)


#: the length each norm byte decodes to (BM25Similarity.LENGTH_TABLE)
LENGTH_TABLE = np.array([decode_length(code) for code in range(256)], dtype=np.float32)


# --- the index ------------------------------------------------------------------------------

class SearchIndex:
    """BM25 over the products' documents, ranked as the original's LuceneSearcher ranks them.

    Build once and share: searching does not change it, so threads may search at once.
    """

    def __init__(self, asins: list[str], postings: dict[str, tuple[np.ndarray, np.ndarray]],
                 lengths: list[int], *, k1: float = K1, b: float = B) -> None:
        if len(set(asins)) != len(asins):
            repeated = sorted(asin for asin, n in Counter(asins).items() if n > 1)
            raise ValueError(f"SearchIndex: ASINs must be unique, repeated: {repeated[:5]}")
        self.asins = asins
        self.postings = postings
        self.lengths = lengths
        self.k1 = k1
        self.b = b
        count = len(asins)
        #: position of each document in ASIN order: the tie-break of equal scores
        self._tie_rank = np.empty(count, dtype=np.int64)
        self._tie_rank[sorted(range(count), key=asins.__getitem__)] = np.arange(count)
        self._norms = np.array([encode_length(n) for n in lengths], dtype=np.int64)
        f32 = np.float32
        avgdl = f32(sum(lengths) / count) if count else f32(1)
        # BM25Similarity's cache: 1 / (k1 * (1 - b + b * dl / avgdl)) per norm byte, in float32
        self._inverse_norm = (f32(1) / (f32(k1) * ((f32(1) - f32(b)) + f32(b) * LENGTH_TABLE / avgdl))
                              ).astype(np.float32)

    @classmethod
    def build(cls, products: list[dict]) -> SearchIndex:
        """Index the products (each needs ``asin``; see :func:`document_text` for the text)."""
        asins: list[str] = []
        lengths: list[int] = []
        docs: dict[str, tuple[list[int], list[int]]] = {}
        for number, product in enumerate(products):
            if "asin" not in product:
                raise ValueError(f"SearchIndex.build: product {number} has no 'asin' "
                                 f"(keys: {sorted(product)[:8]})")
            terms = analyze(document_text(product))
            asins.append(product["asin"])
            lengths.append(len(terms))
            for term, frequency in Counter(terms).items():
                ids, frequencies = docs.setdefault(term, ([], []))
                ids.append(number)
                frequencies.append(frequency)
        postings = {term: (np.array(ids, dtype=np.int64), np.array(frequencies, dtype=np.float32))
                    for term, (ids, frequencies) in docs.items()}
        return cls(asins, postings, lengths)

    def __len__(self) -> int:
        return len(self.asins)

    def scored(self, query: str, k: int = DEFAULT_K) -> list[tuple[str, float]]:
        """(asin, score) of the best ``k`` matches, best first; scores are Lucene's float32."""
        if k <= 0:
            return []
        f32 = np.float32
        count = len(self.asins)
        totals = np.zeros(count, dtype=np.float64)
        matched = np.zeros(count, dtype=bool)
        for term, boost in Counter(analyze(query)).items():
            if term not in self.postings:
                continue
            ids, frequencies = self.postings[term]
            idf = f32(math.log(1 + (count - len(ids) + 0.5) / (len(ids) + 0.5)))
            weight = f32(boost) * idf
            scores = weight - weight / (f32(1) + frequencies * self._inverse_norm[self._norms[ids]])
            # Lucene adds the clauses' float scores in a double and rounds the sum to a float
            totals[ids] += scores.astype(np.float64)
            matched[ids] = True
        hits = np.flatnonzero(matched)
        scores = totals[hits].astype(np.float32)
        best = np.lexsort((self._tie_rank[hits], -scores))[:k]
        return [(self.asins[hits[i]], float(scores[i])) for i in best]

    def search(self, query: str, k: int = DEFAULT_K) -> list[str]:
        """The ASINs of the best ``k`` matches, best first (``LuceneSearcher.search(query, k)``)."""
        return [asin for asin, _ in self.scored(query, k)]
