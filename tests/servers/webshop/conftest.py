"""Fixtures over the stand-in shop of tests/helpers/webshop_shop.py: the shop, its
catalogue with the real reward, and one env on it."""

from __future__ import annotations

import random

import pytest

from helpers.webshop_shop import StandinIndex, StandinShop, make_shop


@pytest.fixture
def shop() -> StandinShop:
    return make_shop()


@pytest.fixture
def catalogue(shop):
    from pytest_agentgym.servers.embedded.webshop.reward import get_reward
    from pytest_agentgym.servers.embedded.webshop.session import Catalogue

    return Catalogue(shop, StandinIndex(shop.products), get_reward)


@pytest.fixture
def env(catalogue):
    from pytest_agentgym.servers.embedded.webshop.session import WebShopSession

    return WebShopSession(catalogue, random.Random(1))
