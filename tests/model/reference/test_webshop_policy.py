"""The reference agent's WebShop policy (pytest_agentgym/model/reference/webshop.py).

Page by page on pages the embedded server's own page builders make (pages.py), from
hand-written products: what it searches, which result it opens, which options it
clicks and when it buys or goes back. Then whole episodes against the real embedded
server (the project catalogue, its BM25 engine and the original's reward) in a real
uvicorn process on loopback, the conversation built as the WebShop adapter builds it.
"""

from __future__ import annotations

import random
from pathlib import Path

import httpx
import pytest

from pytest_agentgym.envs.webshop import WebShopAdapter
from pytest_agentgym.model.reference import webshop
from pytest_agentgym.model.reference.server import load_policies
from pytest_agentgym.model.reference.webshop import POLICY, read_instruction
from pytest_agentgym.servers.embedded.webshop import missing_requirements, pages

INSTRUCTION = ("Find me waterproof, hands free portable bluetooth speakers with color: red, and "
               "size: large, and price lower than 120.00 dollars")


def item(asin: str, title: str, price: str, options: dict[str, list[str]] | None = None) -> dict:
    return {"asin": asin, "Title": title, "Price": price, "Rating": "N.A.", "options": options or {}}


SPEAKERS = [
    item("B0RK70D9GR", "Pixelon Hands Free Bluetooth Speaker, IPX7", "$130.95"),
    item("B0YX7DRJV1", "Brightek Waterproof Wireless Speaker", "$85.0",
         {"color": ["black", "red"], "size": ["small", "large"]}),
    item("B0TZ2CWVS3", "Voltix Waterproof Portable Speaker", "$102.0", {"color": ["blue"]}),
]


def results(products: list[dict], page_number: int = 1, total: int | None = None) -> str:
    total = len(products) if total is None else total
    return pages.results_page(INSTRUCTION, products, page_number, total, lambda asin: f"/item/{asin}").observation


def item_page(product: dict) -> str:
    return pages.item_page(INSTRUCTION, product).observation


def conversation(*turns: str) -> list[dict[str, str]]:
    """The adapter's opening on the search page, then (reply, observation) pairs: each
    turn after the first is an action whose observation follows it."""
    messages = list(WebShopAdapter().conversation(pages.search_page(INSTRUCTION).observation))
    for action, observation in zip(turns[0::2], turns[1::2]):
        messages += [{"role": "assistant", "content": f"Thought:\nx\n\nAction:\n{action}"},
                     {"role": "user", "content": observation}]
    return messages


def action(messages: list[dict[str, str]]) -> str:
    reply = POLICY.reply(messages, random.Random(0))
    assert reply.startswith("Thought:\n")
    return WebShopAdapter().parse_action(reply).action  # type: ignore[return-value]


# -- reading the instruction ------------------------------------------------------------


def test_an_instruction_is_split_into_product_options_and_price():
    found = read_instruction(INSTRUCTION)
    assert found.product == "Find me waterproof, hands free portable bluetooth speakers"
    assert found.keywords == "waterproof, hands free portable bluetooth speakers"
    assert found.options == {"color": "red", "size": "large"}
    assert found.price_upper == 120.0


def test_a_with_inside_the_product_sentence_stays_in_it():
    found = read_instruction("Find me men's t-shirts with short sleeve, polyester spandex with size: "
                             "xx-large, and price lower than 50.00 dollars")
    assert found.product == "Find me men's t-shirts with short sleeve, polyester spandex"
    assert found.options == {"size": "xx-large"}
    found = read_instruction("Find me green tea with mint for digestion, iced tea with flavor name: "
                             "jasmine, and size: 100 count, and price lower than 40.00 dollars")
    assert found.product == "Find me green tea with mint for digestion, iced tea"
    assert found.options == {"flavor name": "jasmine", "size": "100 count"}


def test_an_instruction_without_options_or_price_keeps_its_sentence():
    found = read_instruction("i need a long clip-in hair extension which is natural looking, "
                             "and price lower than 40.00 dollars")
    assert (found.options, found.price_upper) == ({}, 40.0)
    assert found.keywords == "long clip-in hair extension which is natural looking"
    found = read_instruction("i want an olive soap bar with color: green")
    assert (found.product, found.options, found.price_upper) == ("i want an olive soap bar", {"color": "green"}, None)


# -- page by page -----------------------------------------------------------------------


def test_on_the_search_page_it_searches_the_product_sentence():
    assert action(conversation()) == "search[waterproof, hands free portable bluetooth speakers]"


def test_on_a_results_page_it_opens_the_first_product_within_the_price():
    messages = conversation("search[speakers]", results(SPEAKERS))
    assert action(messages) == "click[b0yx7drjv1]"  # the first one costs $130.95, over the bound


def test_with_nothing_within_the_price_it_turns_the_page_while_rounds_allow():
    dear = [SPEAKERS[0]]
    assert action(conversation("search[speakers]", results(dear, total=25))) == "click[next >]"
    # with the rounds nearly spent it takes the first result anyway
    late = conversation(*["click[x]", results(dear, total=25)] * 7)
    assert action(late) == "click[b0rk70d9gr]"


def test_on_the_item_page_it_clicks_each_named_option_once_then_buys():
    page = item_page(SPEAKERS[1])
    steps = ["search[speakers]", results(SPEAKERS), "click[b0yx7drjv1]", page]
    assert action(conversation(*steps)) == "click[red]"
    steps += ["click[red]", page]
    assert action(conversation(*steps)) == "click[large]"
    steps += ["click[large]", page]
    assert action(conversation(*steps)) == "click[buy now]"


def test_a_product_without_the_named_option_is_left_for_the_next_result():
    page = item_page(SPEAKERS[2])
    steps = ["search[speakers]", results(SPEAKERS[1:][::-1]), "click[b0tz2cwvs3]", page]
    assert action(conversation(*steps)) == "click[< prev]"
    steps += ["click[< prev]", results(SPEAKERS[1:][::-1])]
    assert action(conversation(*steps)) == "click[b0yx7drjv1]"  # the one it opened is skipped


def test_out_of_rounds_it_buys_what_it_has_open():
    page = item_page(SPEAKERS[2])
    steps = ["search[speakers]", results(SPEAKERS)] + ["click[x]", results(SPEAKERS)] * 6
    steps += ["click[b0tz2cwvs3]", page]
    assert action(conversation(*steps)) == "click[buy now]"


def test_a_value_written_differently_is_matched_by_its_words():
    product = item("B0YX7DRJV1", "Speaker", "$85.0", {"color": ["bright red", "black"], "size": ["large"]})
    steps = ["search[speakers]", results([product]), "click[b0yx7drjv1]", item_page(product)]
    assert action(conversation(*steps)) == "click[bright red]"


def test_on_a_sub_page_it_goes_back_to_the_product():
    sub = pages.sub_page("Description", INSTRUCTION, {"Description": "A speaker."}).observation
    steps = ["search[speakers]", results(SPEAKERS), "click[b0yx7drjv1]", item_page(SPEAKERS[1]),
             "click[description]", sub]
    assert action(conversation(*steps)) == "click[< prev]"


def test_the_random_policy_answers_search_or_click_actions():
    for messages in (conversation(), conversation("search[speakers]", results(SPEAKERS))):
        for seed in range(20):
            found = WebShopAdapter().parse_action(POLICY.random_reply(messages, random.Random(seed))).action
            assert found.startswith(("search[", "click[")) and found.endswith("]"), found


def test_only_webshop_conversations_are_recognised_and_the_server_asks_it_for_them():
    assert POLICY.recognizes(conversation())
    babyai = [{"role": "user", "content": "Your goal: go to the red ball\nIn front of you you see a wall"}]
    sqlgym = [{"role": "user", "content": "db contains tables such as a. Table a has columns such as x.\n\nHow?"}]
    assert not POLICY.recognizes(babyai) and not POLICY.recognizes(sqlgym)
    loaded = load_policies("")
    assert [p.name for p in loaded.policies if p.recognizes(conversation())] == ["WebShop"]


# -- against the real server ------------------------------------------------------------

needs_server = pytest.mark.skipif(missing_requirements() is not None, reason=str(missing_requirements()))


@pytest.fixture(scope="module")
def shop_server(tmp_path_factory):
    from pytest_agentgym.process.managed import ManagedServer

    logs: Path = tmp_path_factory.mktemp("webshop-logs")
    command = ("{python}", "-m", "uvicorn", "--factory",
               "pytest_agentgym.servers.embedded.webshop.server:create_app",
               "--host", "{host}", "--port", "{port}", "--log-level", "warning")
    server = ManagedServer("WebShop", command=command, startup_timeout=120, log_path=logs / "webshop.log").start()
    yield server
    server.stop()


def play(http: httpx.Client, env_idx: int, session_id: int, reply) -> float:
    """One episode of at most 10 rounds, as the harness plays it; the reward paid."""
    adapter = WebShopAdapter()
    http.post("/reset", json={"env_idx": env_idx, "session_id": session_id}).raise_for_status()
    messages = list(adapter.conversation(http.get("/observation", params={"env_idx": env_idx}).json()))
    for turn in range(webshop.MAX_ROUNDS):
        text = reply(messages, random.Random(f"{session_id}/{turn}"))
        step = http.post("/step", json={"env_idx": env_idx, "action": adapter.parse_action(text).action})
        step.raise_for_status()
        body = step.json()
        if body["done"]:
            return body["reward"]
        messages += [{"role": "assistant", "content": text}, {"role": "user", "content": body["state"]}]
    return 0.0


@needs_server
def test_on_the_real_server_it_buys_well_and_the_random_policy_does_not(shop_server):
    with httpx.Client(base_url=shop_server.url, timeout=120) as http:
        env_idx = http.post("/create").json()
        if http.get("/embedded/envs").json().get("source") != "project catalogue":
            pytest.skip("AGENTENV_WEBSHOP_DATA is set: the figures below are for the project catalogue")
        reference = [play(http, env_idx, n, POLICY.reply) for n in range(10)]
        chance = [play(http, env_idx, n, POLICY.random_reply) for n in range(10)]
    # on sessions 0-9 the policy buys every time and solves 9 (0.78 of sessions 0-199)
    assert sum(r > 0 for r in reference) >= 9, reference
    assert sum(r == 1 for r in reference) >= 6, reference
    assert not any(r == 1 for r in chance), chance
