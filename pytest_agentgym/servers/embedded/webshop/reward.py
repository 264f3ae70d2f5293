"""WebShop's reward for a purchase, by the original's formula (``engine/goal.py``).

With A goal attributes, O goal options and one price condition::

    reward = r_type * (attributes matched + options matched + [price <= price_upper]) / (A + O + 1)

* **attributes**: a goal attribute is matched when ``thefuzz.fuzz.token_set_ratio`` with
  one of the product's Attributes is above 85, or else when it is a substring of the
  lower-cased Title, of the lower-cased features (BulletPoints) joined with spaces, or of
  the lower-cased Description;
* **options**: the goal's options are taken as (name, value) pairs and the bought ones as
  values; each side goes through the original's ``normalize_color`` (a bought value that
  contains a colour of its list becomes that colour; a pair becomes a colour only when
  its value *is* one); a goal option is matched when ``token_set_ratio`` with a bought
  option is above 85. thefuzz reads a pair as the text of the Python tuple, so the
  option's name takes part in the match ("color red" against "red" scores 100), as in
  the original;
* **price**: the price paid is at most the goal's price_upper (always counted: a bound of
  0 or less, which no goal has, would make the original fail);
* **r_type**: from the names' noun tags (:mod:`.nouns`): title_score = the share of the
  goal name's nouns found among the bought name's nouns (0.2 if the goal name has none);
  r_type is 1, or 0.5 when neither the query, nor two categories of the product_category
  path, nor a title_score above 0.2 match; then 0.1 when title_score < 0.1, and 0 when it
  is 0.

:func:`reward_breakdown` gives the parts (the original's ``verbose`` info plus the counts)
for tests and docs; :func:`get_reward` the number.
"""

from __future__ import annotations

from typing import Any

from thefuzz import fuzz

from pytest_agentgym.servers.embedded.webshop.nouns import Tagger, default_tagger

#: token_set_ratio above which two texts match (the original's)
MATCH_SCORE = 85

#: the original's normalize.COLOR_SET, in its order (the first colour found wins)
COLOR_SET = (
    "alabaster apricot aqua ash asphalt azure banana beige black blue blush bordeaux bronze "
    "brown burgundy camel camo caramel champagne charcoal cheetah chestnut chocolate christmas "
    "coffee cognac copper coral cranberry cream crystal dark denim eggplant elephant espresso "
    "fuchsia gold granite grape graphite grass gray green grey heather indigo ivory ivy khaki "
    "lavender lemon leopard light lilac lime magenta maroon mauve merlot midnight mint mocha "
    "multicolor mushroom mustard natural navy nude olive orange peach pewter pink plum purple "
    "rainbow red rose royal rust sand sapphire seashell silver skull slate steel stone "
    "stonewash sunflower tan taupe teal tiger turquoise violet walnut wheat white wine yellow"
).split()


def normalize_color(option: Any) -> Any:
    """The first colour of COLOR_SET that is ``in`` the option (a substring of a text, an
    element of a pair), else the option unchanged."""
    for color in COLOR_SET:
        if color in option:
            return color
    return option


def _fuzz_text(option: Any) -> str:
    # thefuzz's token_set_ratio reads anything that is not a string as str() of it
    return option if isinstance(option, str) else str(option)


def type_reward(purchased: dict, goal: dict, tagger: Tagger | None = None) -> dict[str, Any]:
    """r_type and what decided it (query_match, category_match, title_score)."""
    tagger = tagger or default_tagger()
    query_match = purchased["query"] == goal["query"]
    bought_path = {c.strip() for c in purchased["product_category"].split("›")}
    goal_path = {c.strip() for c in goal["product_category"].split("›")}
    category_match = len(bought_path & goal_path) >= 2
    bought_nouns = tagger(purchased["name"])
    goal_nouns = tagger(goal["name"])
    shared = len(set(bought_nouns) & set(goal_nouns))
    title_score = 0.2 if not goal_nouns else shared / len(goal_nouns)
    r_type = 1.0
    if not (query_match or category_match or title_score > 0.2):
        r_type = 0.5
    if title_score < 0.1:
        r_type = 0.1
    if title_score == 0.0:
        r_type = 0.0
    return {"r_type": r_type, "query_match": query_match, "category_match": category_match,
            "title_score": title_score}


def attribute_matches(purchased: dict, goal_attributes: list[str]) -> int:
    """How many goal attributes the product has (fuzzy among Attributes, else as text)."""
    title = purchased["Title"].lower()
    features = " ".join(purchased["BulletPoints"]).lower()
    description = purchased["Description"].lower()
    matched = 0
    for wanted in goal_attributes:
        if any(fuzz.token_set_ratio(have, wanted) > MATCH_SCORE for have in purchased["Attributes"]):
            matched += 1
        elif wanted in title or wanted in features or wanted in description:
            matched += 1
    return matched


def option_matches(bought: list[str], goal_options: list[Any]) -> int:
    """How many goal options one of the bought options matches."""
    have = [_fuzz_text(normalize_color(o)) for o in bought]
    wanted = [_fuzz_text(normalize_color(o)) for o in goal_options]
    return sum(1 for w in wanted if any(fuzz.token_set_ratio(h, w) > MATCH_SCORE for h in have))


def reward_breakdown(purchased: dict, goal: dict, price: float, options: dict[str, str],
                     tagger: Tagger | None = None) -> dict[str, Any]:
    """The reward and its parts: reward, r_type (+ query_match, category_match, title_score),
    r_att, w_att, num_attr_matches, r_option and w_option (only when the goal has options),
    num_option_matches, r_price, w_price."""
    goal_options = goal["goal_options"]
    goal_options = list(goal_options.items()) if isinstance(goal_options, dict) else list(goal_options)
    n_attributes, n_options = len(goal["attributes"]), len(goal_options)
    denominator = n_attributes + n_options + 1
    kind = type_reward(purchased, goal, tagger)
    r_price = price <= goal["price_upper"]
    attributes_hit = attribute_matches(purchased, goal["attributes"])
    options_hit = option_matches(list(options.values()), goal_options)
    reward = (attributes_hit + options_hit + r_price) / denominator * kind["r_type"]
    parts: dict[str, Any] = {"reward": reward, **kind,
                             "r_att": attributes_hit / n_attributes if n_attributes else 0.0,
                             "w_att": n_attributes / denominator, "num_attr_matches": attributes_hit}
    if n_options:
        parts["r_option"] = options_hit / n_options
        parts["w_option"] = n_options / denominator
    parts.update(num_option_matches=options_hit, r_price=r_price, w_price=1 / denominator)
    return parts


def get_reward(purchased: dict, goal: dict, price: float, options: dict[str, str],
               tagger: Tagger | None = None) -> float:
    """The reward of buying ``purchased`` at ``price`` with ``options`` (name -> value) for ``goal``."""
    return reward_breakdown(purchased, goal, price, options, tagger)["reward"]
