"""The WebShop search engine (search.py) against the original's pyserini LuceneSearcher.

The expected terms, norm bytes and rankings below were recorded once from pyserini 0.17.0
(Anserini 0.14.3, Lucene 8.11) on Java 17: its ``Analyzer(get_lucene_analyzer())``,
Lucene's ``SmallFloat`` through pyjnius, and ``LuceneSearcher.search(q, k=50)`` over the
golden products indexed as the original's ``run_indexing.sh`` does
(``benchmarks/servers/webshop_search.py`` writes the same collection and measures the whole shop).
"""

from __future__ import annotations

import math
import random
import struct

import pytest

pytest.importorskip("regex", reason="the optional extra 'webshop' is not installed: pip install -e '.[webshop]'")
pytest.importorskip("nltk", reason="the optional extra 'webshop' is not installed: pip install -e '.[webshop]'")

from pytest_agentgym.servers.embedded import webshop  # noqa: E402
from pytest_agentgym.servers.embedded.webshop import search  # noqa: E402
from pytest_agentgym.servers.embedded.webshop.search import (  # noqa: E402
    SearchIndex,
    analyze,
    decode_length,
    document_text,
    encode_length,
)


def filler(count: int) -> str:
    return " ".join(f"filler{n}" for n in range(count))


def golden_products() -> list[dict]:
    rows = [
        # 2 + 40 and 2 + 41 terms: one norm byte (42), so a tie that the ASIN breaks
        ("B0000000Z1", "Argan Shampoo", filler(40), "", {}),
        ("B0000000A1", "Argan Shampoo", filler(41), "", {}),
        # identical texts, listed out of ASIN order
        ("B0000000C3", "Olive Soap Bar", "", "olive oil", {}),
        ("B0000000B4", "Olive Soap Bar", "", "olive oil", {}),
        ("B0000000R1", "Red Shirt", "a shirt in red", "cotton", {"size": ["small", "large"]}),
        ("B0000000D1", "Blue Dress", "a dress", "cotton", {"color": ["blue", "navy"]}),
        ("B0000000D2", "Summer Dress, Red", "", "", {"color": ["red", "white"], "size": ["m"]}),
        ("B0000000M1", "Men's Running Shoes", "Lightweight runners for the gym.", "x-large; 10.5 wide",
         {"size": ["10.5 wide", "11"]}),
        ("B0000000M2", "Women's Trail Shoe", "A shoe that is waterproof.", "", {}),
        ("B0000000T1", "USB-C Charger, 3.5mm Jack", "Brand\u2122 wi-fi adapter", "", {}),
    ]
    return [{"asin": asin, "Title": title, "Description": description, "BulletPoints": [bullet],
             "options": options} for asin, title, description, bullet, options in rows]


#: LuceneSearcher.search(query, k=50) over golden_products(), as recorded
GOLDEN = {
    "argan shampoo": ["B0000000A1", "B0000000Z1"],
    "olive soap bar": ["B0000000B4", "B0000000C3"],
    "red red dress": ["B0000000D2", "B0000000R1", "B0000000D1"],
    "red dress": ["B0000000D2", "B0000000D1", "B0000000R1"],
    "men's running shoes": ["B0000000M1", "B0000000M2"],
    "man run shoe": ["B0000000M1", "B0000000M2"],
    "shoes": ["B0000000M2", "B0000000M1"],
    "x-large 10.5": ["B0000000M1", "B0000000R1"],
    "usb-c charger wi-fi": ["B0000000T1"],
    "brand\u2122": ["B0000000T1"],
    "the and of": [],
    "cotton": ["B0000000D1", "B0000000R1"],
    "navy blue": ["B0000000D1"],
    "filler3 filler40": ["B0000000A1", "B0000000Z1"],
    "shampoo filler0 filler0": ["B0000000A1", "B0000000Z1"],
}


@pytest.fixture(scope="module")
def golden() -> SearchIndex:
    return SearchIndex.build(golden_products())


# the analyzer ----------------------------------------------------------------------------

@pytest.mark.parametrize("text, terms", [
    ("Men's Running Shoes, 3.5 inch", ["men", "run", "shoe", "3.5", "inch"]),
    ("x-large wi-fi USB-C 10oz $100", ["x", "larg", "wi", "fi", "usb", "c", "10oz", "100"]),
    ("e.g. don't color:black 1/4 \u00bd", ["e.g", "don't", "color:black", "1", "4"]),
    ("the assembly of us and them", ["assembl", "us", "them"]),          # Porter's C code, not Snowball's
    ("JOHN\u2019S JAMES' it's", ["john", "jame"]),                        # possessive 's only; "it" a stop word
    ("Brand\u2122 caf\u00e9 \u00ae", ["brand", "\u2122", "caf\u00e9", "\u00ae"]),  # emoji-class symbols are tokens
    # Java lower-cases a code point at a time: a plain "i" for "\u0130", no final sigma
    ("\u0130stanbul \u03a3\u038a\u03a3\u03a5\u03a6\u039f\u03a3",
     ["istanbul", "\u03c3\u03af\u03c3\u03c5\u03c6\u03bf\u03c3"]),
    ("technology analogies trekking incredibly", ["technolog", "analog", "trek", "incred"]),
])
def test_the_analyzer_gives_lucenes_terms(text, terms):
    assert analyze(text) == terms


def test_a_word_longer_than_255_characters_is_cut_as_lucene_cuts_it():
    assert [len(term) for term in analyze("a" * 300 + " b")] == [255, 45, 1]


# Lucene's one-byte document length -------------------------------------------------------

@pytest.mark.parametrize("length, code, decoded", [
    (0, 0, 0), (1, 1, 1), (23, 23, 23), (24, 24, 24), (39, 39, 39), (40, 40, 40), (41, 40, 40),
    (42, 41, 42), (43, 41, 42), (100, 57, 96), (277, 71, 264), (1000, 87, 984), (100000, 140, 98328),
])
def test_the_length_norm_is_lucenes_smallfloat(length, code, decoded):
    assert encode_length(length) == code
    assert decode_length(code) == decoded


# rankings --------------------------------------------------------------------------------

@pytest.mark.parametrize("query", list(GOLDEN))
def test_rankings_are_pyserinis(golden, query):
    assert golden.search(query) == GOLDEN[query]


def f32(value: float) -> float:
    return struct.unpack("f", struct.pack("f", value))[0]


def test_a_score_is_lucenes_bm25_in_float32(golden):
    # "navy": one document of 10 holds it, once, in 7 terms
    # ("blue dress a dress cotton color: blue, navy" less the stop word "a")
    lengths = golden.lengths
    assert lengths[5] == 7
    avgdl = f32(sum(lengths) / len(lengths))
    idf = f32(math.log(1 + (10 - 1 + 0.5) / (1 + 0.5)))
    inverse = f32(1 / f32(f32(0.9) * f32(f32(1 - f32(0.4)) + f32(f32(f32(0.4) * 7) / avgdl))))
    expected = f32(idf - f32(idf / f32(1 + inverse)))
    assert golden.scored("navy") == [("B0000000D1", expected)]


def test_equal_scores_are_ordered_by_asin_whatever_the_input_order():
    products = [{"asin": f"B{n:09d}", "Title": "Bamboo Toothbrush", "Description": "", "BulletPoints": [""],
                 "options": {}} for n in range(30)]
    expected = sorted(p["asin"] for p in products)
    for seed in range(5):
        shuffled = products[:]
        random.Random(seed).shuffle(shuffled)
        index = SearchIndex.build(shuffled)
        hits = index.scored("bamboo toothbrush")
        assert [asin for asin, _ in hits] == expected
        assert len({score for _, score in hits}) == 1


def test_k_keeps_the_best_hits_and_a_query_with_no_term_finds_nothing(golden):
    assert golden.search("red dress", k=1) == ["B0000000D2"]
    assert golden.search("red dress", k=0) == []
    assert golden.search("") == []
    assert golden.search("... !!! --") == []
    assert golden.search("unheardof") == []


def test_50_hits_by_default():
    products = [{"asin": f"B{n:09d}", "Title": f"Soap {n}", "Description": "", "BulletPoints": ["soap"],
                 "options": {}} for n in range(80)]
    assert len(SearchIndex.build(products).search("soap")) == 50


# the shop ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def shop():
    from pytest_agentgym.servers.embedded.webshop.catalogue import load_shop

    return load_shop()


@pytest.fixture(scope="module")
def shop_index(shop) -> SearchIndex:
    return SearchIndex.build(shop.products)


def test_every_product_is_found_by_its_title(shop, shop_index):
    missing = [p["asin"] for p in shop.products if p["asin"] not in shop_index.search(p["Title"].lower())]
    assert missing == []


def test_a_distinct_title_finds_its_product_first(shop):
    products = shop.products[:200] + [{"asin": "B0ZZZZZZZZ", "Title": "Quokka Marmalade Teapot",
                                       "Description": "", "BulletPoints": ["porcelain"], "options": {}}]
    assert SearchIndex.build(products).search("quokka marmalade teapot")[0] == "B0ZZZZZZZZ"


def test_building_twice_gives_the_same_rankings(shop, shop_index):
    again = SearchIndex.build(shop.products)
    for goal in shop.goals[:100]:
        query = goal["instruction_text"].lower()
        assert again.scored(query) == shop_index.scored(query)


# the document and bad input ---------------------------------------------------------------

def test_the_document_is_the_converters_text():
    product = {"asin": "B1", "Title": "Soap Bar", "Description": "Olive OIL.", "BulletPoints": ["Gentle", "x"],
               "options": {"size": ["s", "m"], "scent": ["rose"]}}
    assert document_text(product) == "soap bar olive oil. gentle size: s, m, and scent: rose"
    assert document_text({"asin": "B2", "Title": "T", "BulletPoints": []}) == "t   "


def test_bad_products_are_refused_with_what_was_wrong():
    with pytest.raises(ValueError, match="repeated: \\['B1'\\]"):
        SearchIndex.build([{"asin": "B1", "Title": "a"}, {"asin": "B1", "Title": "b"}])
    with pytest.raises(ValueError, match="product 1 has no 'asin'"):
        SearchIndex.build([{"asin": "B1", "Title": "a"}, {"Title": "b"}])


def test_a_missing_package_is_named_with_the_install_command(monkeypatch):
    assert webshop.missing_requirements() is None
    monkeypatch.setattr(webshop, "REQUIRED_MODULES", ("regex", "no_such_module_xyz"))
    assert webshop.missing_requirements() == (
        "the embedded WebShop server needs 'no_such_module_xyz': pip install 'pytest-agentgym[webshop]'")
