"""The WebShop shop's data: the loader of the original's files (on the fixture in
``fixtures/data``, written in their format) and the project catalogue (deterministic,
cached, read back by the same loader)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_agentgym.servers.embedded.webshop.catalogue import PROJECT_SOURCE, load_shop
from pytest_agentgym.servers.embedded.webshop.data_files import (
    ATTRIBUTES_FILE,
    DATA_ENV,
    PRODUCTS_FILE,
    REVIEWS_FILE,
    WebShopDataError,
)
from pytest_agentgym.servers.embedded.webshop.project_catalogue import (
    CACHE_ENV,
    catalogue_version,
    generate_project_catalogue,
    write_project_catalogue,
)

FIXTURE = Path(__file__).parent / "fixtures" / "data"
#: the keys engine.load_products leaves on a product (besides the raw ones it keeps)
POST_LOAD_KEYS = {"asin", "category", "query", "name", "product_category", "Title", "Description",
                  "BulletPoints", "Reviews", "Rating", "pricing", "Price", "options", "option_to_image",
                  "Attributes", "instruction_text", "instruction_attributes", "MainImage"}


@pytest.fixture(autouse=True)
def _no_data_env(monkeypatch):
    monkeypatch.delenv(DATA_ENV, raising=False)


@pytest.fixture(scope="module")
def fixture_shop():
    return load_shop(FIXTURE)


def test_fixture_loads_as_the_original_does(fixture_shop):
    shop = fixture_shop
    # the repeated ASIN, "nan" and the 13-character ASIN are skipped; file order kept
    assert [p["asin"] for p in shop.products] == ["B0FIX00001", "B0FIX00002", "B0FIX00003", "B0FIX00004", "B0FIX00005"]
    assert shop.source == str(FIXTURE) and shop.comparable is True
    assert shop.by_asin["B0FIX00003"] is shop.products[2]
    wash = shop.by_asin["B0FIX00001"]
    assert POST_LOAD_KEYS <= set(wash)
    assert not {"brand", "list_price", "seller_name"} & set(wash)          # clean_product_keys
    assert wash["Title"] == wash["name"] == "Mossgrove Lavender Body Wash for Dry Skin, 16 Fl Oz"
    assert wash["Description"] == "A gentle lavender body wash made with natural ingredients."
    assert wash["query"] == "body wash"                                     # lower-cased and stripped
    assert wash["BulletPoints"] == ["Easy use pump bottle", "Soap free formula"]
    assert wash["pricing"] == [9.99] and wash["Price"] == "$9.99"
    # option names and values lower-cased, values stripped, "/" shown as " | "
    assert wash["options"] == {"scent": ["lavender", "eucalyptus | mint"], "size": ["16 fl oz", "32 fl oz"]}
    assert wash["option_to_image"] == {"lavender": "https://images.webshop.invalid/fixture/b1-lav.jpg",
                                       "eucalyptus | mint": None, "16 fl oz": None, "32 fl oz": None}
    assert wash["MainImage"] == "https://images.webshop.invalid/fixture/b1.jpg"
    assert wash["Attributes"] == ["natural ingredients", "easy use", "dry skin"]
    assert wash["instruction_text"] == "Find me natural ingredients body washes for easy use"
    assert wash["instruction_attributes"] == ["natural ingredients", "easy use"]
    assert wash["Reviews"] == [] and wash["Rating"] == "N.A."            # no reviews.json: as the original


def test_pricing_and_the_other_raw_forms(fixture_shop):
    coffee, cable, table, jacket = (fixture_shop.by_asin[f"B0FIX0000{i}"] for i in (2, 3, 4, 5))
    assert coffee["pricing"] == [14.5, 22.0] and coffee["Price"] == "$14.5 to $22.0"
    assert coffee["BulletPoints"] == ["Organic dark roast with notes of cocoa"]   # a string becomes a list
    assert coffee["options"] == {"flavor name": ["dark roast", "espresso", "decaf"]}  # a None option is left out
    assert cable["pricing"] == [100.0] and cable["Price"] == "$100.0"            # empty pricing
    assert cable["options"] == {} and jacket["options"] == {}
    assert table["pricing"] == [985.0]
    assert jacket["Attributes"] == ["DUMMY_ATTR"]                                 # ins_v2 entry without attributes
    assert jacket["instruction_text"] is None and jacket["instruction_attributes"] is None


def test_prices_are_fixed_and_ranges_drawn_inside(fixture_shop):
    prices = fixture_shop.prices
    assert prices["B0FIX00001"] == 9.99 and prices["B0FIX00003"] == 100.0 and prices["B0FIX00004"] == 985.0
    assert 14.5 <= prices["B0FIX00002"] <= 22.0
    assert load_shop(FIXTURE).prices == prices                                    # the same on every load


def test_data_env_points_at_a_data_directory(monkeypatch):
    monkeypatch.setenv(DATA_ENV, str(FIXTURE))
    shop = load_shop()
    assert shop.source == str(FIXTURE) and shop.comparable and len(shop.products) == 5


def test_reviews_file_fills_reviews(tmp_path):
    for name in (PRODUCTS_FILE, ATTRIBUTES_FILE):
        shutil.copy(FIXTURE / name, tmp_path / name)
    (tmp_path / REVIEWS_FILE).write_text(json.dumps([{"asin": "B0FIX00001", "average_rating": 4.5, "reviews": [
        {"title": "Nice", "stars": 5, "review": "Smells good."}, {"title": "Ok", "score": 4}]}]))
    wash = load_shop(tmp_path).by_asin["B0FIX00001"]
    assert wash["Reviews"] == [{"title": "Nice", "score": 5, "body": "Smells good."},
                               {"title": "Ok", "score": 4, "body": ""}]
    assert wash["Rating"] == 4.5


def test_missing_file_says_which_and_how_to_fix(tmp_path):
    shutil.copy(FIXTURE / PRODUCTS_FILE, tmp_path / PRODUCTS_FILE)
    with pytest.raises(WebShopDataError, match=f"{ATTRIBUTES_FILE} is missing.*{DATA_ENV}"):
        load_shop(tmp_path)


def test_product_without_attributes_entry_is_named(tmp_path):
    shutil.copy(FIXTURE / PRODUCTS_FILE, tmp_path / PRODUCTS_FILE)
    entries = json.loads((FIXTURE / ATTRIBUTES_FILE).read_text())
    del entries["B0FIX00003"]
    (tmp_path / ATTRIBUTES_FILE).write_text(json.dumps(entries))
    with pytest.raises(WebShopDataError, match="no entry for B0FIX00003"):
        load_shop(tmp_path)


def test_a_row_that_is_not_a_product_is_named(tmp_path):
    rows = json.loads((FIXTURE / PRODUCTS_FILE).read_text())
    del rows[2]["images"]
    (tmp_path / PRODUCTS_FILE).write_text(json.dumps(rows))
    shutil.copy(FIXTURE / ATTRIBUTES_FILE, tmp_path / ATTRIBUTES_FILE)
    with pytest.raises(WebShopDataError, match="row 2 is not a WebShop product.*images"):
        load_shop(tmp_path)


# --------------------------------------------------------------------------- the project catalogue

def _digest(directory: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir())}


def test_project_catalogue_is_the_same_bytes_every_time(tmp_path):
    started = time.perf_counter()
    first = write_project_catalogue(tmp_path / "a")
    elapsed = time.perf_counter() - started
    second = write_project_catalogue(tmp_path / "b")
    assert _digest(first) == _digest(second)
    assert elapsed < 2.0, f"generating the catalogue took {elapsed:.2f} s"
    assert sum(p.stat().st_size for p in first.iterdir()) < 3_000_000
    # another interpreter with another hash seed writes the same bytes (no set/hash order leaks in)
    code = ("import sys; from pytest_agentgym.servers.embedded.webshop.project_catalogue import write_project_catalogue;"
            "write_project_catalogue(sys.argv[1])")
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    subprocess.run([sys.executable, "-c", code, str(tmp_path / "c")], check=True, env=env)
    assert _digest(tmp_path / "c") == _digest(first)


def test_project_catalogue_is_plausible_shopping_data():
    rows, attributes, reviews = generate_project_catalogue()
    assert len(rows) == 1000 and len({r["asin"] for r in rows}) == 1000
    assert all(len(r["asin"]) == 10 for r in rows)
    assert {r["category"] for r in rows} == {"beauty", "grocery", "fashion", "garden", "electronics"}
    assert set(attributes) == {r["asin"] for r in rows} and len(reviews) == 1000
    with_instruction = [a for a in attributes.values() if "instruction" in a]
    assert 300 <= len(with_instruction) <= 700
    assert all(a["instruction"].startswith("Find me ") and len(a["instruction_attributes"]) >= 2
               for a in with_instruction)
    assert all(set(a["instruction_attributes"]) <= set(a["attributes"]) for a in with_instruction)
    assert all(r["pricing"].startswith("$") and "-" not in r["pricing"] for r in rows)  # one price each


def test_load_shop_without_data_writes_and_reuses_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    shop = load_shop()
    cached = tmp_path / catalogue_version()
    assert sorted(p.name for p in cached.iterdir()) == sorted([PRODUCTS_FILE, ATTRIBUTES_FILE, REVIEWS_FILE])
    assert [p.name for p in tmp_path.iterdir()] == [cached.name]            # no scratch directory left
    assert shop.source == PROJECT_SOURCE and shop.comparable is False
    assert len(shop.products) == 1000 and len(shop.goals) > 1000
    assert sum(1 for p in shop.products if p["Reviews"]) > 500
    stamp = (cached / PRODUCTS_FILE).stat().st_mtime_ns
    again = load_shop()
    assert (cached / PRODUCTS_FILE).stat().st_mtime_ns == stamp             # read, not written again
    assert again.goals == shop.goals and again.prices == shop.prices
