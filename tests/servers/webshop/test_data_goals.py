"""WebShop's synthetic goals: the original's rule (one goal per product x option
combination, price bound from the price, weights) and SimServer's seed-233 shuffle, on
the fixture shop, with the expected values worked out here from the rule."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from pytest_agentgym.servers.embedded.webshop.catalogue import load_shop
from pytest_agentgym.servers.embedded.webshop.data_files import DATA_ENV
from pytest_agentgym.servers.embedded.webshop.goals import (
    NO_PRICE_BOUND,
    build_goals,
    shuffle_goals,
    synthetic_goals,
)

FIXTURE = Path(__file__).parent / "fixtures" / "data"


@pytest.fixture(scope="module")
def shop():
    return load_shop(FIXTURE)


def _bound(rng: random.Random, price: float) -> float:
    """The rule, written out: the larger of two of the first four multiples of 10 above the price."""
    above = [10.0 * i for i in range(1, 100) if 10.0 * i > price][:4]
    return max(rng.sample(above, 2))


def test_one_goal_per_option_combination(shop):
    goals = synthetic_goals(shop.products, shop.prices)
    # wash: scent (2) x size (2) = 4; coffee: flavor name (3); cable: no options, 1;
    # table: color (2); jacket: no instruction, none
    assert [g["asin"] for g in goals] == ["B0FIX00001"] * 4 + ["B0FIX00002"] * 3 + ["B0FIX00003"] + ["B0FIX00004"] * 2
    # option names sorted, values in the product's order, the last name varying fastest
    assert [g["goal_options"] for g in goals[:4]] == [
        {"scent": "lavender", "size": "16 fl oz"}, {"scent": "lavender", "size": "32 fl oz"},
        {"scent": "eucalyptus | mint", "size": "16 fl oz"}, {"scent": "eucalyptus | mint", "size": "32 fl oz"}]
    assert goals[7]["goal_options"] == {}


def test_price_bounds_and_instruction_texts(shop):
    goals = synthetic_goals(shop.products, shop.prices)
    # one generator seeded with 233 draws, in product order, for wash ($9.99), coffee, cable ($100);
    # the table ($985) has one multiple of 10 above its price (990), so no draw and no bound
    rng = random.Random(233)
    wash_bound = _bound(rng, 9.99)
    coffee_bound = _bound(rng, shop.prices["B0FIX00002"])
    cable_bound = _bound(rng, 100.0)
    assert wash_bound in (20.0, 30.0, 40.0) and cable_bound in (120.0, 130.0, 140.0)
    assert goals[1]["instruction_text"] == (
        "Find me natural ingredients body washes for easy use with scent: lavender, and size: 32 fl oz, "
        f"and price lower than {wash_bound:.2f} dollars")
    assert goals[4]["price_upper"] == coffee_bound
    assert goals[7]["instruction_text"] == f"Find me easy use usb cables, and price lower than {cable_bound:.2f} dollars"
    assert goals[8]["price_upper"] == NO_PRICE_BOUND
    assert goals[8]["instruction_text"] == "Find me end tables with solid wood with color: walnut"


def test_goal_fields_and_weights(shop):
    goals = synthetic_goals(shop.products, shop.prices)
    wash = goals[0]
    assert list(wash) == ["asin", "category", "query", "name", "product_category", "instruction_text",
                          "attributes", "price_upper", "goal_options", "weight"]
    assert wash["name"] == "Mossgrove Lavender Body Wash for Dry Skin, 16 Fl Oz" and wash["query"] == "body wash"
    assert wash["attributes"] == ["natural ingredients", "easy use"]
    # goals carrying each attribute: natural ingredients 4 (wash), easy use 4 + 1 (wash, cable),
    # organic 3, dark roast 3, solid wood 2; weight = mean of 1/count over the goal's attributes
    assert wash["weight"] == pytest.approx((1 / 4 + 1 / 5) / 2)     # 0.225
    assert goals[4]["weight"] == pytest.approx((1 / 3 + 1 / 3) / 2)
    assert goals[7]["weight"] == pytest.approx(1 / 5)
    assert goals[8]["weight"] == pytest.approx(1 / 2)


def test_no_prices_means_no_bounds(shop):
    goals = synthetic_goals(shop.products, None)
    assert all(g["price_upper"] == NO_PRICE_BOUND and "price lower" not in g["instruction_text"] for g in goals)


def test_shuffle_is_simservers_seed_233(shop):
    plain = synthetic_goals(shop.products, shop.prices)
    expected = list(plain)
    random.seed(233)              # what SimServer does to the global generator
    random.shuffle(expected)
    random.seed()
    shuffled = build_goals(shop.products, shop.prices)
    assert shuffled == expected
    assert shuffled != plain and sorted(map(str, shuffled)) == sorted(map(str, plain))
    assert shuffle_goals(plain) == expected and plain == synthetic_goals(shop.products, shop.prices)


def test_goals_leave_the_global_generator_alone(shop):
    random.seed(7)
    expected = random.random()
    random.seed(7)
    build_goals(shop.products, shop.prices)
    assert random.random() == expected


def test_project_catalogue_goals_are_deterministic(tmp_path, monkeypatch):
    monkeypatch.delenv(DATA_ENV, raising=False)
    monkeypatch.setenv("AGENTGYM_WEBSHOP_CACHE", str(tmp_path))
    first, second = load_shop(), load_shop()
    assert first.goals == second.goals
    for goal in first.goals[:200]:
        product = first.by_asin[goal["asin"]]
        assert goal["instruction_text"].startswith(product["instruction_text"])
        assert all(product["options"][k] and v in product["options"][k] for k, v in goal["goal_options"].items())
        assert (goal["price_upper"] == NO_PRICE_BOUND) == (first.prices[goal["asin"]] >= 980)
