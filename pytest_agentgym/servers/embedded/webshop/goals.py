"""WebShop's synthetic goals, by the original's rule, in the original's order.

AgentGym's WebShop runs ``WebAgentTextEnv`` with synthetic goals (``human_goals`` unset),
so its task list is ``engine.goal.get_synthetic_goals`` shuffled by ``SimServer``:

* one goal per product that has an instruction, times each combination of its option
  values (option names in sorted order; a product without options gives one goal);
* the instruction text is the product's instruction, then `` with <name>: <value>, and
  <name>: <value>`` for the combination, then ``, and price lower than <X>.00 dollars``;
  the bound X is the larger of two of the (up to) four multiples of 10 above the product's
  price, drawn with ``random.sample`` from a generator seeded with 233 once, in product
  order; with fewer than two such multiples (a price of $980 or more) the bound is 1,000,000
  and there is no price text;
* ``weight`` is the mean over the goal's attributes of 1 / (goals that carry the attribute);
* the list is shuffled with ``random.seed(233)``; a session's task index picks from it.

The draws use ``random.Random`` instances seeded exactly as the original seeds the global
generator, so a given list of products and prices gives the original's goals, in its
order, every time (the original's prices of ranged products are not reproducible: see
:mod:`.catalogue`).
"""

from __future__ import annotations

import itertools
import random
from collections import defaultdict

#: the price bounds goals are drawn from: 10, 20, ..., 990 dollars
PRICE_RANGE = [10.0 * i for i in range(1, 100)]
#: no price bound (the original's)
NO_PRICE_BOUND = 1000000
#: the original's seed for price bounds and for the shuffle
GOAL_SEED = 233


def price_bound(rng: random.Random, price: float) -> tuple[float, str]:
    """The goal's price_upper and the text that says it (``''`` when there is no bound)."""
    above = [p for p in PRICE_RANGE if p > price][:4]
    if len(above) < 2:
        return NO_PRICE_BOUND, ""
    _, upper = sorted(rng.sample(above, 2))
    return upper, f", and price lower than {upper:.2f} dollars"


def synthetic_goals(products: list[dict], prices: dict[str, float] | None) -> list[dict]:
    """The original's ``get_synthetic_goals``, unshuffled."""
    rng = random.Random(GOAL_SEED)
    goals: list[dict] = []
    goals_with: dict[str, int] = defaultdict(int)
    for product in products:
        if product.get("instruction_text") is None:
            continue
        asin = product["asin"]
        attributes = product["instruction_attributes"]
        if not attributes:
            raise ValueError(f"product {asin} has an instruction but no instruction_attributes; "
                             "the original requires at least one (goal weights divide by their number)")
        if prices is not None:
            upper, price_text = price_bound(rng, prices[asin])
        else:
            upper, price_text = NO_PRICE_BOUND, ""
        options = product["options"]
        names = sorted(options)
        for combination in itertools.product(*(options[name] for name in names)):
            goal_options = dict(zip(names, combination))
            option_text = ", and ".join(f"{k}: {v}" for k, v in goal_options.items())
            option_text = f" with {option_text}" if option_text else ""
            goals.append({
                "asin": asin,
                "category": product["category"],
                "query": product["query"],
                "name": product["Title"],
                "product_category": product["product_category"],
                "instruction_text": f"{product['instruction_text']}{option_text}{price_text}",
                "attributes": attributes,
                "price_upper": upper,
                "goal_options": goal_options,
            })
            for attribute in attributes:
                goals_with[attribute] += 1
    for goal in goals:
        goal["weight"] = sum(1.0 / goals_with[a] for a in goal["attributes"]) / len(goal["attributes"])
    return goals


def shuffle_goals(goals: list[dict]) -> list[dict]:
    """The goals in SimServer's order (``random.seed(233); random.shuffle(goals)``), as a new list."""
    shuffled = list(goals)
    random.Random(GOAL_SEED).shuffle(shuffled)
    return shuffled


def build_goals(products: list[dict], prices: dict[str, float] | None) -> list[dict]:
    """The task list of a shop: synthetic goals, shuffled as the original does."""
    return shuffle_goals(synthetic_goals(products, prices))
