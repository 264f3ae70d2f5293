"""The rule-based noun tagger (the fallback of WebShop's r_type when no spaCy model is
installed): what it counts as a noun in product names and in lower-case text. Its
distance from spaCy is measured by benchmarks/servers/webshop_nouns.py, not here."""

from __future__ import annotations

import pytest

from pytest_agentgym.servers.embedded.webshop.nouns import RuleTagger, tokens

TAGGER = RuleTagger()


def test_tokens_split_as_spacy_does_where_it_matters():
    assert tokens("Women's X-Large (Navy/Grey) 3.4 Oz. D.O.N. shoes.") == [
        "Women", "'s", "X", "-", "Large", "(", "Navy", "/", "Grey", ")", "3.4", "Oz", ".", "D.O.N.", "shoes", "."]


@pytest.mark.parametrize("text, expected", [
    # Title Case: every word that starts with a letter, except closed-class words and adverbs
    ("Verdana Argan Hair Oil for Dry Damaged Hair, 4 Fl Oz",
     ["verdana", "argan", "hair", "oil", "dry", "damaged", "hair", "fl", "oz"]),
    ("Nutwise Peanut Butter, Individually Wrapped Snack Packs with the 24H Seal",
     ["nutwise", "peanut", "butter", "wrapped", "snack", "packs", "seal"]),
    ("Men's Classic Fit T-Shirt - Japanese Cotton", ["men", "classic", "fit", "t", "shirt", "cotton"]),
    # lower case: adjectives, adjective endings and participles are not nouns; "Find me": a verb
    ("Find me gluten free, machine washable women's shirts with long sleeve for daily wear",
     ["gluten", "machine", "women", "shirts", "sleeve", "wear"]),
    ("heavy duty tempered glass screen protector", ["duty", "glass", "screen", "protector"]),
])
def test_nouns(text, expected):
    assert TAGGER(text) == expected


def test_no_nouns():
    assert TAGGER("for the 2 of us") == []
    assert TAGGER("") == []
