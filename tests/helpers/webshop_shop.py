"""A small shop for the WebShop site and wire tests: hand-written products in the form
the original's ``load_products`` leaves them, goals and prices from the real
``goals``/``catalogue`` code, the real reward, and a stand-in search index (word
overlap, ties in catalogue order) so that the tests know which products a search lists.

``standin_app`` is also a uvicorn factory: the wire tests run it in a real server
process (``uvicorn --factory --app-dir tests helpers.webshop_shop:standin_app``). It
lives here, not in a conftest, so that test modules import it by a name of its own
(``from conftest import ...`` finds whichever conftest pytest imported last).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass


def product(asin: str, title: str, *, price: str = "$10.0", pricing: list[float] | None = None,
            options: dict[str, list[str]] | None = None, description: str = "",
            bullets: list[str] | None = None, instruction: str | None = None,
            attributes: list[str] | None = None, category: str = "beauty", query: str = "shampoo") -> dict:
    """One product as ``engine.load_products`` leaves it (options already lower-cased)."""
    return {
        "asin": asin, "category": category, "query": query, "name": title,
        "product_category": "Beauty & Personal Care › Hair Care", "Title": title,
        "Description": description, "Reviews": [], "Rating": "N.A.",
        "BulletPoints": bullets if bullets is not None else [],
        "pricing": pricing if pricing is not None else [10.0], "Price": price,
        "options": options or {}, "option_to_image": {},
        "Attributes": attributes or ["DUMMY_ATTR"],
        "instruction_text": instruction,
        "instruction_attributes": attributes if instruction else None,
        "MainImage": f"https://images.example/{asin}.jpg",
    }


def standin_products() -> list[dict]:
    """14 products: 12 shampoos (two results pages for "shampoo"), a soap, a towel."""
    products = [
        product("B000SHAMP1", "Argan Oil Shampoo for Dry Hair", price="$12.99 to $15.0", pricing=[12.99, 15.0],
                options={"size": ["8 fl oz (pack of 1)", "16 fl oz (pack of 1)"], "scent": ["argan", "lavender"]},
                description="A gentle shampoo.\nSulfate free.", bullets=["sulfate free", "for dry hair"],
                instruction="i need a sulfate free shampoo for dry hair", attributes=["sulfate free", "dry hair"]),
    ]
    for n in range(2, 13):
        products.append(product(f"B000SHAM{n:02d}", f"Daily Shampoo number {n}", price=f"${n}.5",
                                pricing=[n + 0.5]))
    products.append(product("B000SOAP01", "Olive Soap Bar", price="$4.0", pricing=[4.0],
                            options={"color": ["green", "white"]}, bullets=["olive oil", ""],
                            instruction="i want an olive soap bar", attributes=["olive oil"],
                            category="soap", query="soap bar"))
    products.append(product("B000TOWEL1", "Cotton Bath Towel", price="$100.0", pricing=[],
                            category="home", query="towel"))
    return products


class StandinIndex:
    """Ranks by how many of the query's words a title holds (then catalogue order)."""

    def __init__(self, products: list[dict]) -> None:
        self.titles = [(p["asin"], set(re.findall(r"\w+", p["Title"].lower()))) for p in products]

    def search(self, query: str, k: int = 50) -> list[str]:
        words = set(re.findall(r"\w+", query.lower()))
        scored = [(-len(words & title), i, asin) for i, (asin, title) in enumerate(self.titles)]
        return [asin for score, _, asin in sorted(scored) if score < 0][:k]


@dataclass(frozen=True)
class StandinShop:
    products: list[dict]
    by_asin: dict[str, dict]
    prices: dict[str, float]
    goals: list[dict]
    source: str = "stand-in shop (tests/helpers/webshop_shop.py)"
    comparable: bool = False


def make_shop() -> StandinShop:
    from pytest_agentgym.servers.embedded.webshop.catalogue import fixed_prices
    from pytest_agentgym.servers.embedded.webshop.goals import build_goals

    products = standin_products()
    prices = fixed_prices(products)
    return StandinShop(products, {p["asin"]: p for p in products}, prices, build_goals(products, prices))


def standin_app():
    """uvicorn factory: the real app over the stand-in shop."""
    from pytest_agentgym.servers.embedded.webshop.reward import get_reward
    from pytest_agentgym.servers.embedded.webshop.server import create_app

    shop = make_shop()
    return create_app(shop, StandinIndex(shop.products), reward=get_reward, rng=random.Random(7))


def standin_fast_app():
    """uvicorn factory: the same behind the embedded servers' fast path (as ``serve`` runs it)."""
    from pytest_agentgym.servers.embedded.fastpath import FastPath

    return FastPath(standin_app())
