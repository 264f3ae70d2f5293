"""One WebShop env's state machine (session.py) on the stand-in shop of tests/helpers/webshop_shop.py.

The rules are read from the original's web_agent_text_env.py (WebAgentTextEnv.step,
SimServer.receive, SimBrowser); they were also checked once, action by action,
against the original code on the same kinds of products (observation, clickables, url,
instruction heading, errors).
"""

from __future__ import annotations

import random

import pytest

from pytest_agentgym.servers.embedded.webshop import pages
from pytest_agentgym.servers.embedded.webshop.reward import get_reward
from pytest_agentgym.servers.embedded.webshop.session import (
    Catalogue,
    SessionError,
    WebShopSession,
    page_name,
)

BASE = "http://127.0.0.1:3000"


def goal_index(shop, asin: str) -> int:
    return next(i for i, goal in enumerate(shop.goals) if goal["asin"] == asin)


def test_reset_plays_goal_n_of_the_shuffled_list(env, shop):
    for n in (0, 3, len(shop.goals) - 1, -1):
        observation, info = env.reset(n)
        instruction = shop.goals[n]["instruction_text"]
        assert (observation, info) == (f"WebShop [SEP] Instruction: [SEP] {instruction} [SEP] Search", None)
        assert env.goal is shop.goals[n]
        assert env.url == f"{BASE}/{n}"
        # /state keeps the heading read from the search page at reset
        assert env.state()["instruction_text"] == f"Instruction: {instruction}"


def test_a_session_id_past_the_goals_fails_and_none_draws_a_goal(env, shop):
    with pytest.raises(SessionError, match=f"session_id {len(shop.goals)} is out of range"):
        env.reset(len(shop.goals))
    observation, _ = env.reset(None)
    assert env.goal in shop.goals
    assert len(env.session_id) == 10 and env.session_id.isalpha() and env.session_id.islower()
    assert env.url == f"{BASE}/{env.session_id}"


def test_goals_are_drawn_by_weight_one_place_late_as_in_the_original(catalogue):
    # random_idx: pos uniform in [0, total weight], idx = bisect(cum_weights, pos) where
    # cum_weights[i] is the weight of the goals before i: the interval of goal i gives i + 1
    # (the original's off-by-one, kept). Only goal 2 has weight: goal 3 is drawn.
    goals = catalogue.shop.goals
    for goal in goals:
        goal["weight"] = 0.0
    goals[2]["weight"] = 1.0
    env = WebShopSession(Catalogue(catalogue.shop, catalogue.index, catalogue.reward), random.Random(5))
    for _ in range(20):
        env.reset(None)
        assert env.goal is goals[3]


def test_search_lists_ten_a_page_and_pages_both_ways(env):
    env.reset(0)
    state, reward, done, info = env.step("search[Shampoo]")  # the argument is lower-cased
    assert (reward, done, info) == (0.0, False, None)
    assert env.url == f"{BASE}/search_results/0/shampoo/1"
    assert "Page 1 (Total results: 12) [SEP] Next > [SEP] B000SHAMP1 [SEP] Argan Oil Shampoo for Dry Hair" in state
    assert env.available_actions()["clickables"][:3] == ["back to search", "next >", "b000shamp1"]
    assert len(env.available_actions()["clickables"]) == 2 + 10
    state, *_ = env.step("click[next >]")
    assert env.url == f"{BASE}/search_results/0/shampoo/2"
    assert state.endswith("Page 2 (Total results: 12) [SEP] < Prev [SEP] Next > [SEP] B000SHAM11 [SEP] "
                          "Daily Shampoo number 11 [SEP] $11.5 [SEP] B000SHAM12 [SEP] Daily Shampoo number 12 "
                          "[SEP] $12.5")
    env.step("click[next >]")
    assert env.observation.endswith("Page 3 (Total results: 12) [SEP] < Prev [SEP] Next >")
    env.step("click[< prev]")
    env.step("click[< prev]")
    assert env.url == f"{BASE}/search_results/0/shampoo/1"


def test_keywords_are_split_on_single_spaces(env):
    env.reset(0)
    env.step("search[ olive  soap]")
    assert env.url == f"{BASE}/search_results/0/+olive++soap/1"
    assert "B000SOAP01" in env.observation


@pytest.mark.parametrize("action", [
    "click[nothing here]", "Search[soap]", "search[]", "click[search]", "click[buy now]",
    " search[soap]", "soap", "click[Next >]x[",
])
def test_an_invalid_action_changes_nothing(env, action):
    env.reset(0)
    before = (env.observation, env.url)
    assert env.step(action) == (before[0], 0.0, False, None)
    assert (env.observation, env.url) == before


def test_item_options_sub_pages_and_navigation(env):
    env.reset(0)
    env.step("search[shampoo]")
    env.step("click[next >]")
    env.step("click[< prev]")
    state, *_ = env.step("click[B000SHAMP1]")  # lower-cased: the clickable b000shamp1
    assert env.url == f"{BASE}/item_page/0/B000SHAMP1/shampoo/1/{{}}"
    assert " [SEP] size [SEP] 8 fl oz (pack of 1) [SEP] 16 fl oz (pack of 1) [SEP] scent [SEP] argan " in state
    env.step("click[16 fl oz (pack of 1)]")
    env.step("click[argan]")
    env.step("click[lavender]")  # a second value of the same option replaces the first
    assert env.options == {"size": "16 fl oz (pack of 1)", "scent": "lavender"}
    assert env.url == f'{BASE}/item_page/0/B000SHAMP1/shampoo/1/{{"size": "16 fl oz (pack of 1)", "scent": "lavender"}}'
    state, *_ = env.step("click[Features]")
    assert state.endswith("Back to Search [SEP] < Prev [SEP] sulfate free [SEP] for dry hair")
    # the sub page's url shows the options as a Python dict, the item page's as JSON
    assert env.url == (f"{BASE}/item_sub_page/0/B000SHAMP1/shampoo/1/Features/"
                       "{'size': '16 fl oz (pack of 1)', 'scent': 'lavender'}")
    env.step("click[< prev]")
    assert page_name(env.url) == "item_page" and env.options["scent"] == "lavender"
    env.step("click[description]")
    assert env.observation.endswith("< Prev [SEP] A gentle shampoo.\nSulfate free.")
    env.step("click[< prev]")
    state, *_ = env.step("click[< prev]")  # item page -> its results page, options dropped
    assert env.url == f"{BASE}/search_results/0/shampoo/1" and env.options == {} and env.asin is None
    env.step("click[back to search]")
    assert env.observation == pages.search_page(env.instruction).observation
    assert env.url == f"{BASE}/0" and env.keywords is None


def test_prev_on_an_item_whose_keywords_say_search_results_pages_back_to_page_0(env):
    # the original tells pages apart by substrings of the url, which holds the keywords
    env.reset(0)
    env.step("search[search_results shampoo]")
    env.step("click[b000shamp1]")
    state, *_ = env.step("click[< prev]")
    assert env.url == f"{BASE}/search_results/0/search_results+shampoo/0"
    assert state.endswith("Page 0 (Total results: 12) [SEP] Next >")


def test_the_listing_searches(env):
    env.reset(0)
    env.step("search[<c> soap]")
    assert "(Total results: 1) [SEP] Next > [SEP] B000SOAP01" in env.observation
    env.step("search[<q> towel]")
    assert "(Total results: 1) [SEP] Next > [SEP] B000TOWEL1" in env.observation
    with pytest.raises(SessionError, match="<a>"):
        env.step("search[<a> olive oil]")


def test_instruction_heading_per_page(env):
    env.reset(0)
    text = env.goal["instruction_text"]
    assert env.instruction_heading() == f"Instruction: {text}"
    env.step("search[soap]")
    assert env.instruction_heading() == f"Instruction:{text}"
    env.step("click[b000soap01]")
    env.step("click[buy now]")
    with pytest.raises(SessionError, match="done page has no instruction"):
        env.instruction_heading()
    assert env.state()["instruction_text"] == f"Instruction: {text}"


def test_a_scripted_episode_is_paid_the_reward_of_its_purchase(env, shop):
    """reset -> search -> click a result -> choose options -> buy: the step's reward is
    reward.get_reward of that purchase, at the shop's fixed price."""
    n = goal_index(shop, "B000SHAMP1")
    goal = shop.goals[n]
    env.reset(n)
    env.step("search[argan shampoo]")
    env.step("click[b000shamp1]")
    for value in goal["goal_options"].values():
        env.step(f"click[{value}]")
    assert env.options == {name: value for name, value in goal["goal_options"].items()}
    state, reward, done, info = env.step("click[Buy Now]")
    bought = shop.by_asin["B000SHAMP1"]
    expected = get_reward(bought, goal, shop.prices["B000SHAMP1"], dict(goal["goal_options"]))
    assert (reward, done, info) == (expected, True, None)
    assert reward > 0.5
    assert state == pages.done_page("B000SHAMP1", goal["goal_options"], expected).observation
    assert env.url == f"{BASE}/done/{n}/B000SHAMP1/{env.options}"
    assert env.available_actions() == {"has_search_bar": False, "clickables": []}
    # as in the original, the env goes on: a search from the done page works
    env.step("search[soap]")
    assert page_name(env.url) == "search_results"


def test_a_wrong_purchase_is_paid_less(env, shop):
    n = goal_index(shop, "B000SHAMP1")
    env.reset(n)
    env.step("search[towel]")
    env.step("click[b000towel1]")
    _, reward, done, _ = env.step("click[buy now]")
    goal = shop.goals[n]
    assert done and reward == get_reward(shop.by_asin["B000TOWEL1"], goal, 100.0, {})
    assert reward < 0.5
