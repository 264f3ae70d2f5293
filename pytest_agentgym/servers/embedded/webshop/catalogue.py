"""The WebShop shop: everything a server needs that does not change while it runs.

:func:`load_shop` reads the products of a data directory in the original's format
(:mod:`.data_files`), or, when there is none, of the project catalogue
(:mod:`.project_catalogue`, generated and cached at first use); adds one fixed price per
product (:func:`fixed_prices`) and the shuffled synthetic goals (:mod:`.goals`).

A deliberate difference from the original, invisible to a client's wire format: a product
priced as a range gets a fixed price, a uniform draw from the range seeded by its ASIN (the
original draws with Python's unseeded ``random`` in every process, so its goals' price bounds
change between runs); the project catalogue has one price per product.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from pytest_agentgym.servers.embedded.webshop.data_files import DATA_ENV, DEFAULT_PRICE, load_products
from pytest_agentgym.servers.embedded.webshop.project_catalogue import project_catalogue_dir
from pytest_agentgym.process import variables

#: ``Shop.source`` of the project catalogue
PROJECT_SOURCE = "project catalogue"


@dataclass(frozen=True)
class Shop:
    """Everything a WebShop server needs that does not change while it runs."""

    products: list[dict]          # engine.load_products' post-load form, in file order
    by_asin: dict[str, dict]      # asin -> product
    prices: dict[str, float]      # asin -> the fixed price
    goals: list[dict]             # the synthetic goals, shuffled with seed 233 as SimServer does
    source: str                   # PROJECT_SOURCE or the data directory's path
    comparable: bool              # whether scores compare with runs of the original's data


def load_shop(data_dir: str | Path | None = None) -> Shop:
    """The shop of ``data_dir``; ``None``: of ``$AGENTENV_WEBSHOP_DATA``, else the project
    catalogue (generated and cached at first use)."""
    from pytest_agentgym.servers.embedded.webshop.goals import build_goals

    if data_dir is None:
        data_dir = variables.value(DATA_ENV)
    if data_dir is None:
        directory, source, comparable = project_catalogue_dir(), PROJECT_SOURCE, False
    else:
        directory = Path(data_dir).expanduser()
        source, comparable = str(directory), True
    products = load_products(directory)
    prices = fixed_prices(products)
    return Shop(
        products=products,
        by_asin={p["asin"]: p for p in products},
        prices=prices,
        goals=build_goals(products, prices),
        source=source,
        comparable=comparable,
    )


def fixed_prices(products: list[dict]) -> dict[str, float]:
    """asin -> price: the single price, or a draw from a range seeded by the ASIN."""
    prices = {}
    for product in products:
        pricing = product["pricing"]
        if not pricing:
            price = DEFAULT_PRICE
        elif len(pricing) == 1:
            price = pricing[0]
        else:
            price = random.Random(f"webshop-price:{product['asin']}").uniform(*pricing[:2])
        prices[product["asin"]] = price
    return prices

