"""The keyword forms of a WebShop search (the original's ``get_top_n_product_from_keywords``)
with the real BM25 index over the shop the server serves: ``<r>`` 50 random products,
``<c> CATEGORY`` and ``<q> QUERY`` every product of that category or query in catalogue
order, ``<a>`` refused as the original's text env fails on it, and anything else the
index's 50 best, the words joined with single spaces."""

from __future__ import annotations

import random

import pytest

pytest.importorskip("regex", reason="the optional extra 'webshop' is not installed: pip install -e '.[webshop]'")
pytest.importorskip("nltk", reason="the optional extra 'webshop' is not installed: pip install -e '.[webshop]'")

from pytest_agentgym.servers.embedded.webshop.catalogue import load_shop  # noqa: E402
from pytest_agentgym.servers.embedded.webshop.reward import get_reward  # noqa: E402
from pytest_agentgym.servers.embedded.webshop.search import SearchIndex  # noqa: E402
from pytest_agentgym.servers.embedded.webshop.session import Catalogue, SessionError  # noqa: E402


@pytest.fixture(scope="module")
def catalogue() -> Catalogue:
    shop = load_shop()
    return Catalogue(shop, SearchIndex.build(shop.products), get_reward)


def asins(products: list[dict]) -> list[str]:
    return [p["asin"] for p in products]


def test_plain_keywords_list_the_indexs_50_best(catalogue):
    keywords = "caffeine free green tea with mint".split(" ")
    listed = catalogue.search(keywords, random.Random(0))
    assert asins(listed) == catalogue.index.search("caffeine free green tea with mint", k=50)
    assert len(listed) == 50
    assert listed[0]["Title"].lower().count("green tea") == 1


def test_r_lists_50_products_drawn_with_the_sessions_random(catalogue):
    products = catalogue.shop.products
    listed = catalogue.search(["<r>"], random.Random(3))
    assert asins(listed) == asins(random.Random(3).sample(products, k=50))
    assert len(set(asins(listed))) == 50


def test_c_lists_every_product_of_the_category_in_catalogue_order(catalogue):
    products = catalogue.shop.products
    listed = catalogue.search(["<c>", "beauty", "ignored"], random.Random(0))
    assert asins(listed) == [p["asin"] for p in products if p["category"] == "beauty"]
    assert len(listed) > 50  # not cut to 50, as in the original


def test_q_lists_every_product_of_the_query(catalogue):
    products = catalogue.shop.products
    query = products[0]["query"]
    listed = catalogue.search(["<q>", *query.split(" ")], random.Random(0))
    assert listed and asins(listed) == [p["asin"] for p in products if p["query"] == query]


def test_a_is_refused_as_the_original_fails_on_it(catalogue):
    with pytest.raises(SessionError, match="<a>"):
        catalogue.search(["<a>", "sulfate", "free"], random.Random(0))


def test_the_forms_are_only_forms_in_first_place(catalogue):
    # "<c>" later in the keywords is a plain word: it analyses to "c"
    listed = catalogue.search(["usb", "<c>"], random.Random(0))
    assert asins(listed) == catalogue.index.search("usb <c>", k=50)
    assert asins(listed) == catalogue.index.search("usb c", k=50)
