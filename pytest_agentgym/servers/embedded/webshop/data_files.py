"""The original's WebShop data directory: its files and the loader of them.

WebShop (AgentGym ``agentenv-webshop``, ``num_products=1000``) reads two files from its
``data/`` directory::

    items_shuffle_1000.json   a list of scraped products: asin, name, full_description,
                              small_description (features), pricing ("$12.99" or a "$lo - $hi"
                              range), customization_options ({name: [{value, image}]}),
                              images, category, query, product_category, and keys it drops
    items_ins_v2_1000.json    {asin: {attributes, instruction, instruction_attributes}}

:func:`load_products` turns them into the products the original's ``engine.load_products``
makes (first 1,000 rows, bad and repeated ASINs skipped; Title, Description, BulletPoints,
pricing as floats and the ``Price`` tag, options lower-cased with ``/`` read as `` | ``,
option_to_image, Attributes (``['DUMMY_ATTR']`` when none), instruction_text,
instruction_attributes, MainImage, query lower-cased). The project catalogue
(:mod:`.project_catalogue`) is written in the same files and read by the same loader.

Deliberate differences from the original, all invisible to a client's wire format:

* a ``reviews.json`` beside the two files (``[{asin, reviews: [{title, stars, review}],
  average_rating}]``, the shape the original's commented-out review loading reads) fills
  Reviews and Rating; the original never loads reviews, and its released data has no such
  file, so a real data directory gives ``Reviews == []`` and ``Rating == 'N.A.'`` as there.
  The project catalogue ships reviews;
* an ASIN missing from items_ins_v2 is a :class:`WebShopDataError` naming it, where the
  original fails with a bare ``KeyError``; ``items_human_ins.json`` is not needed (the
  original opens it even for synthetic goals and then ignores it).
"""

from __future__ import annotations

import json
import re
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

#: environment variable naming a directory with the original's data files (AgentGym's name)
DATA_ENV = "AGENTENV_WEBSHOP_DATA"
PRODUCTS_FILE = "items_shuffle_1000.json"
ATTRIBUTES_FILE = "items_ins_v2_1000.json"
REVIEWS_FILE = "reviews.json"
#: the original's num_products: rows of the products file that are read
NUM_PRODUCTS = 1000
#: keys the original's clean_product_keys drops from each raw product
DROPPED_KEYS = (
    "product_information", "brand", "brand_url", "list_price", "availability_quantity",
    "availability_status", "total_reviews", "total_answered_questions", "seller_id",
    "seller_name", "fulfilled_by_amazon", "fast_track_message", "aplus_present",
    "small_description_old",
)
#: price of a product without pricing, and its tag (the original's)
DEFAULT_PRICE = 100.0


class WebShopDataError(Exception):
    """A WebShop data directory or file that cannot be used; the message names it and the fix."""


def _read_json(path: Path, what: str) -> Any:
    if not path.is_file():
        raise WebShopDataError(
            f"{path} is missing: a WebShop data directory holds {PRODUCTS_FILE} and {ATTRIBUTES_FILE} "
            f"({what}); point {DATA_ENV} at such a directory, or unset it to use the project catalogue")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise WebShopDataError(f"{path} is not readable JSON ({what}): {exc}") from exc


def load_products(data_dir: str | Path) -> list[dict]:
    """The products of a data directory, as the original's ``load_products`` leaves them
    (``num_products=1000``, synthetic goals)."""
    directory = Path(data_dir)
    raw = _read_json(directory / PRODUCTS_FILE, "the products")
    attributes = _read_json(directory / ATTRIBUTES_FILE, "attributes and instructions per ASIN")
    if not isinstance(raw, list) or not isinstance(attributes, dict):
        raise WebShopDataError(f"{directory}: {PRODUCTS_FILE} must hold a JSON list and "
                               f"{ATTRIBUTES_FILE} a JSON object keyed by ASIN")
    reviews_path = directory / REVIEWS_FILE
    reviews = _read_json(reviews_path, "reviews") if reviews_path.is_file() else []
    all_reviews = {r["asin"]: r.get("reviews", []) for r in reviews}
    all_ratings = {r["asin"]: r.get("average_rating", "N.A.") for r in reviews}

    products, seen = [], set()
    for index, product in enumerate(raw[:NUM_PRODUCTS]):
        try:
            asin = product["asin"]
            if asin == "nan" or len(asin) > 10 or asin in seen:
                continue
            seen.add(asin)
            if asin not in attributes:
                raise WebShopDataError(
                    f"{directory / ATTRIBUTES_FILE} has no entry for {asin} (row {index} of {PRODUCTS_FILE}); "
                    "every product needs one, at least {\"attributes\": []}")
            products.append(_post_load(product, attributes[asin], all_reviews.get(asin, []),
                                       all_ratings.get(asin, "N.A.")))
        except (KeyError, TypeError, AttributeError, ValueError, IndexError, InvalidOperation) as exc:
            raise WebShopDataError(
                f"{directory / PRODUCTS_FILE}: row {index} is not a WebShop product ({type(exc).__name__}: {exc}); "
                "each needs asin, name, full_description, small_description, customization_options, "
                "images, category, query and product_category") from exc
    return products


def _post_load(product: dict, attrs: dict, reviews: list[dict], rating: Any) -> dict:
    """One raw product in the form the original's loader gives it (the same keys, in the same order)."""
    for key in DROPPED_KEYS:
        product.pop(key, None)
    product["Title"] = product["name"]
    product["Description"] = product["full_description"]
    product["Reviews"] = [_review(r) for r in reviews]
    product["Rating"] = rating
    features = product["small_description"]
    product["BulletPoints"] = features if isinstance(features, list) else [features]
    product["pricing"], product["Price"] = parse_pricing(product.get("pricing"))
    product["options"], product["option_to_image"] = parse_options(product["customization_options"])
    product["Attributes"] = attrs["attributes"] if "attributes" in attrs else ["DUMMY_ATTR"]
    product["instruction_text"] = attrs.get("instruction")
    product["instruction_attributes"] = attrs.get("instruction_attributes")
    product["MainImage"] = product["images"][0]
    product["query"] = product["query"].lower().strip()
    return product


def _review(review: dict) -> dict:
    review = dict(review)
    if "score" not in review:
        review["score"] = review.pop("stars")
    review["body"] = review.pop("review") if "review" in review else ""
    return review


def parse_pricing(pricing: str | None) -> tuple[list[float], str]:
    """The original's reading of a pricing string: the numbers after each ``$`` (at most
    two kept), and the tag shown on the item page (``$12.99`` or ``$12.99 to $15.99``)."""
    if not pricing:
        return [DEFAULT_PRICE], f"${DEFAULT_PRICE}"
    values = [float(Decimal(re.sub(r"[^\d.]", "", part))) for part in pricing.split("$")[1:]]
    if len(values) == 1:
        return values, f"${values[0]}"
    return values[:2], f"${values[0]} to ${values[1]}"


def parse_options(customization: dict | None) -> tuple[dict[str, list[str]], dict[str, str | None]]:
    """Option name -> its values (lower case, ``/`` shown as `` | ``) and value -> image."""
    options: dict[str, list[str]] = {}
    images: dict[str, str | None] = {}
    for name, contents in (customization or {}).items():
        if contents is None:
            continue
        values = []
        for content in contents:
            value = content["value"].strip().replace("/", " | ").lower()
            values.append(value)
            images[value] = content.get("image", None)
        options[name.lower()] = values
    return options, images

