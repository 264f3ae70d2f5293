"""WebShop's reward on constructed purchases, each expected value worked out by hand
from the original's formula:

    reward = r_type * (attributes matched + options matched + [price <= bound]) / (A + O + 1)

The rule-based noun tagger is passed explicitly, so the figures do not depend on whether
spaCy is installed."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_agentgym.servers.embedded.webshop import nouns
from pytest_agentgym.servers.embedded.webshop.catalogue import load_shop
from pytest_agentgym.servers.embedded.webshop.nouns import RuleTagger
from pytest_agentgym.servers.embedded.webshop.reward import (
    get_reward,
    option_matches,
    reward_breakdown,
    type_reward,
)

FIXTURE = Path(__file__).parent / "fixtures" / "data"
TAGGER = RuleTagger()


@pytest.fixture(scope="module")
def shop():
    return load_shop(FIXTURE)


@pytest.fixture()
def wash_goal(shop):
    """A goal for the body wash: 2 attributes, 2 options, bound $20 -> denominator 2 + 2 + 1 = 5."""
    wash = shop.by_asin["B0FIX00001"]
    return {"asin": wash["asin"], "category": "beauty", "query": wash["query"], "name": wash["Title"],
            "product_category": wash["product_category"], "attributes": ["natural ingredients", "easy use"],
            "goal_options": {"scent": "lavender", "size": "16 fl oz"}, "price_upper": 20.0, "weight": 1}


def test_the_names_nouns(shop):
    # what r_type compares below: 8 nouns in the wash's name ("for" and "16" are not nouns)
    assert TAGGER(shop.by_asin["B0FIX00001"]["Title"]) == ["mossgrove", "lavender", "body", "wash", "dry", "skin",
                                                             "fl", "oz"]
    assert TAGGER(shop.by_asin["B0FIX00003"]["Title"]) == ["quillon", "usb", "c", "charging", "cable", "ft", "braided"]


def test_all_matched_is_one(shop, wash_goal):
    # attributes: both are in the wash's Attributes (token_set_ratio 100) -> 2
    # options: "lavender" vs ('scent', 'lavender') read as "scent lavender" -> 100; "16 fl oz" likewise -> 2
    # price: 9.99 <= 20 -> 1;  r_type: same query, title_score 8/8 = 1 -> 1.0
    # reward = 1.0 * (2 + 2 + 1) / 5 = 1.0
    parts = reward_breakdown(shop.by_asin["B0FIX00001"], wash_goal, 9.99, {"scent": "lavender", "size": "16 fl oz"},
                             TAGGER)
    assert parts["reward"] == 1.0
    assert (parts["r_type"], parts["query_match"], parts["category_match"], parts["title_score"]) == (1.0, True, True, 1.0)
    assert (parts["r_att"], parts["r_option"], parts["r_price"]) == (1.0, 1.0, True)
    assert (parts["w_att"], parts["w_option"], parts["w_price"]) == (2 / 5, 2 / 5, 1 / 5)


def test_one_option_wrong(shop, wash_goal):
    # size "32 fl oz" vs ('size', '16 fl oz') -> "32 fl oz" vs "size 16 fl oz": the shared tokens "fl oz"
    # against "fl oz 32" score 2*5/(5+8) = 77, not above 85 -> not matched; scent still matches
    # reward = 1.0 * (2 + 1 + 1) / 5 = 0.8
    parts = reward_breakdown(shop.by_asin["B0FIX00001"], wash_goal, 9.99, {"scent": "lavender", "size": "32 fl oz"},
                             TAGGER)
    assert parts["reward"] == pytest.approx(0.8)
    assert parts["num_option_matches"] == 1 and parts["r_option"] == 0.5


def test_price_over_the_bound(shop, wash_goal):
    # 25 > 20 -> r_price 0; reward = 1.0 * (2 + 2 + 0) / 5 = 0.8
    options = {"scent": "lavender", "size": "16 fl oz"}
    parts = reward_breakdown(shop.by_asin["B0FIX00001"], wash_goal, 25.0, options, TAGGER)
    assert parts["reward"] == pytest.approx(0.8) and parts["r_price"] is False
    assert get_reward(shop.by_asin["B0FIX00001"], wash_goal, 20.0, options, TAGGER) == 1.0   # the bound itself is in


def test_wrong_product_type_is_zero(shop, wash_goal):
    # the cable: query "usb cables" != "body wash"; no category in common; no noun of the wash's name
    # in the cable's -> title_score 0 -> r_type 0. Its own sum would be 1 ("easy use" is among its
    # Attributes) + 0 options + 0 (100 > 20) = 1 of 5, times 0.
    parts = reward_breakdown(shop.by_asin["B0FIX00003"], wash_goal, 100.0, {}, TAGGER)
    assert parts["reward"] == 0.0
    assert (parts["r_type"], parts["query_match"], parts["category_match"], parts["title_score"]) == (0.0, False, False, 0.0)
    assert parts["num_attr_matches"] == 1 and parts["num_option_matches"] == 0


def test_attributes_fuzzy_and_in_text(shop, wash_goal):
    wash = dict(shop.by_asin["B0FIX00001"], Attributes=["essential oil"])
    goal = dict(wash_goal, attributes=["essential oils", "dry skin", "tea tree"], goal_options={})
    # "essential oils" vs "essential oil": 2*13/(13+14) = 96 > 85 -> matched;
    # "dry skin" is in the lower-cased Title -> matched; "tea tree" nowhere -> 2 of 3
    # no goal options -> denominator 3 + 0 + 1 = 4; reward = (2 + 0 + 1) / 4 = 0.75
    parts = reward_breakdown(wash, goal, 9.99, {}, TAGGER)
    assert parts["reward"] == pytest.approx(0.75) and parts["r_att"] == pytest.approx(2 / 3)
    assert "r_option" not in parts and "w_option" not in parts


def _named(name: str, query: str = "lamps", path: str = "Home › Lighting") -> dict:
    return {"name": name, "query": query, "product_category": path}


def test_r_type_steps():
    goal = _named("Oak Desk Lamp Shade Bulb Switch")                       # 6 nouns
    other = _named("Oak Mirror", query="mirrors", path="Home › Decor")     # 1 in common; one category in common
    # 1/6 = 0.167: not above 0.2 and no query or category match -> 0.5
    assert type_reward(other, goal, TAGGER)["r_type"] == 0.5
    # the same query -> 1.0
    assert type_reward(dict(other, query="lamps"), goal, TAGGER)["r_type"] == 1.0
    # 1/11 = 0.09 < 0.1 -> 0.1 even with the query matching
    long_goal = _named("Oak Desk Lamp Shade Bulb Switch Cord Plug Base Stand Clamp")
    assert type_reward(dict(other, query="lamps"), long_goal, TAGGER)["r_type"] == 0.1
    # a goal name without nouns: title_score 0.2, which is not above 0.2 -> 0.5 without other matches
    assert type_reward(other, _named("for the"), TAGGER) == {
        "r_type": 0.5, "query_match": False, "category_match": False, "title_score": 0.2}


def test_option_colours_as_the_original_normalises_them():
    # a bought value becomes the first colour of the list it contains: "light blue" -> "blue";
    # a goal pair only when its value is a colour: ('color', 'navy blue') stays "color navy blue",
    # which "blue" matches (100) -- the original's leniency, kept
    assert option_matches(["light blue"], [("color", "navy blue")]) == 1
    # ('color', 'black') -> "black"; "white" -> "white": 0
    assert option_matches(["white"], [("color", "black")]) == 0
    # "x-large" is read as the tokens "x large", which contain "large": matched, as in the original
    assert option_matches(["large"], [("size", "x-large")]) == 1


def test_default_tagger_without_spacy_is_the_rules(monkeypatch):
    monkeypatch.delenv(nouns.SPACY_MODEL_ENV, raising=False)
    nouns.default_tagger.cache_clear()
    try:
        tagger = nouns.default_tagger()
        if nouns.spacy_tagger() is None:
            assert isinstance(tagger, RuleTagger)
        else:
            assert tagger.name in nouns.SPACY_MODELS
        monkeypatch.setenv(nouns.SPACY_MODEL_ENV, "no_such_spacy_model")
        nouns.default_tagger.cache_clear()
        with pytest.raises(RuntimeError, match="no_such_spacy_model"):
            nouns.default_tagger()
    finally:
        nouns.default_tagger.cache_clear()


def test_goal_options_are_name_value_pairs(shop, wash_goal):
    # the goal's options go in as (name, value) pairs: ('color', 'blackberry') is no colour of
    # the list (a pair is normalised only when its value *is* one), so it is read as
    # "color blackberry", which the bought "black" does not match (48); a bare "blackberry"
    # would have become "black" (it contains it) and matched. Denominator 2 + 1 + 1 = 4;
    # reward = (2 attributes + 0 options + 1 price) / 4 = 0.75
    goal = dict(wash_goal, goal_options={"color": "blackberry"})
    parts = reward_breakdown(shop.by_asin["B0FIX00001"], goal, 9.99, {"color": "black"}, TAGGER)
    assert parts["num_option_matches"] == 0 and parts["reward"] == pytest.approx(0.75)
