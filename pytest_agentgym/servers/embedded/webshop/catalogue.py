"""The WebShop shop's data: a loader of the original's data files, and the project's own
catalogue written in the same files.

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
instruction_attributes, MainImage, query lower-cased). :func:`load_shop` adds the fixed
prices and the shuffled synthetic goals (:mod:`.goals`).

Those files cannot be downloaded here, so unless ``AGENTENV_WEBSHOP_DATA`` names a
directory that holds them, the shop is the **project catalogue**: 1,000 invented products
of 30 product types in the five categories of WebShop's data (beauty, grocery, fashion,
garden, electronics), with names, descriptions, features, options, one price each,
reviews, attributes and (for about half) a "Find me ..." instruction, as the original's
are written. :func:`generate_project_catalogue` makes it from a fixed seed with Python's
seeded ``random.Random`` only (the same bytes on every machine; 1.4 MB, about 0.15 s);
it is written in the original's file format under
``$XDG_CACHE_HOME/pytest-agentgym/webshop/<hash of this module>/`` (``AGENTGYM_WEBSHOP_CACHE``
names another parent) at first use and read back by the same loader. Runs on it are not
comparable with published WebShop numbers (``Shop.comparable`` is False).

Deliberate differences from the original, all invisible to a client's wire format:

* a product priced as a range gets a fixed price: a uniform draw from the range seeded by
  its ASIN (the original draws with Python's unseeded ``random`` in every process, so its
  goals' price bounds change between runs); the project catalogue has one price per product;
* a ``reviews.json`` beside the two files (``[{asin, reviews: [{title, stars, review}],
  average_rating}]``, the shape the original's commented-out review loading reads) fills
  Reviews and Rating; the original never loads reviews, and its released data has no such
  file, so a real data directory gives ``Reviews == []`` and ``Rating == 'N.A.'`` as there.
  The project catalogue ships reviews;
* an ASIN missing from items_ins_v2 is a :class:`WebShopDataError` naming it, where the
  original fails with a bare ``KeyError``; ``items_human_ins.json`` is not needed (the
  original opens it even for synthetic goals and then ignores it).

    python -m pytest_agentgym.servers.embedded.webshop.catalogue DIR   # write the project catalogue into DIR
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

#: environment variable naming a directory with the original's data files (AgentGym's name)
DATA_ENV = "AGENTENV_WEBSHOP_DATA"
#: environment variable naming the parent directory of the project catalogue's cache
CACHE_ENV = "AGENTGYM_WEBSHOP_CACHE"
PRODUCTS_FILE = "items_shuffle_1000.json"
ATTRIBUTES_FILE = "items_ins_v2_1000.json"
REVIEWS_FILE = "reviews.json"
#: the original's num_products: rows of the products file that are read
NUM_PRODUCTS = 1000
PROJECT_SOURCE = "project catalogue"
#: keys the original's clean_product_keys drops from each raw product
DROPPED_KEYS = (
    "product_information", "brand", "brand_url", "list_price", "availability_quantity",
    "availability_status", "total_reviews", "total_answered_questions", "seller_id",
    "seller_name", "fulfilled_by_amazon", "fast_track_message", "aplus_present",
    "small_description_old",
)
#: price of a product without pricing, and its tag (the original's)
DEFAULT_PRICE = 100.0
#: seed of the project catalogue
CATALOGUE_SEED = 20260428


class WebShopDataError(Exception):
    """A WebShop data directory or file that cannot be used; the message names it and the fix."""


@dataclass(frozen=True)
class Shop:
    """Everything a WebShop server needs that does not change while it runs."""

    products: list[dict]          # engine.load_products' post-load form, in file order
    by_asin: dict[str, dict]      # asin -> product
    prices: dict[str, float]      # asin -> the fixed price
    goals: list[dict]             # the synthetic goals, shuffled with seed 233 as SimServer does
    source: str                   # PROJECT_SOURCE or the data directory's path
    comparable: bool              # whether scores compare with runs of the original's data


# --------------------------------------------------------------------------- loading

def load_shop(data_dir: str | Path | None = None) -> Shop:
    """The shop of ``data_dir``; ``None``: of ``$AGENTENV_WEBSHOP_DATA``, else the project
    catalogue (generated and cached at first use)."""
    from pytest_agentgym.servers.embedded.webshop.goals import build_goals

    if data_dir is None and os.environ.get(DATA_ENV):
        data_dir = os.environ[DATA_ENV]
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


# --------------------------------------------------------------------------- the cache

def catalogue_version() -> str:
    """A hash of this module: the project catalogue's cache directory is named after it."""
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]


def _cache_root() -> Path:
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pytest-agentgym" / "webshop"


def _complete(directory: Path) -> bool:
    return all((directory / name).is_file() for name in (PRODUCTS_FILE, ATTRIBUTES_FILE, REVIEWS_FILE))


def project_catalogue_dir(cache_root: str | Path | None = None) -> Path:
    """The project catalogue's data directory, written on first use (into a scratch
    directory beside it, then renamed, so no reader ever sees half of it)."""
    explicit = cache_root is not None or bool(os.environ.get(CACHE_ENV))
    root = Path(cache_root) if cache_root is not None else _cache_root()
    target = root / catalogue_version()
    if _complete(target):
        return target
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        if explicit:
            raise WebShopDataError(f"cannot create the WebShop catalogue cache {root}: {exc}; "
                                   f"set {CACHE_ENV} to a writable directory") from exc
        return project_catalogue_dir(Path(tempfile.gettempdir()) / f"pytest-agentgym-{os.getuid()}" / "webshop")
    scratch = Path(tempfile.mkdtemp(prefix=".webshop-", dir=root))
    try:
        write_project_catalogue(scratch)
        try:
            scratch.rename(target)
        except OSError:  # another process renamed its copy first
            if not _complete(target):
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target


def write_project_catalogue(directory: str | Path) -> Path:
    """Write the project catalogue's three files into ``directory``."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    products, attributes, reviews = generate_project_catalogue()
    for name, data in ((PRODUCTS_FILE, products), (ATTRIBUTES_FILE, attributes), (REVIEWS_FILE, reviews)):
        (directory / name).write_bytes(json.dumps(data, ensure_ascii=True).encode("ascii"))
    return directory


# --------------------------------------------------------------------------- the project catalogue
#
# Each product type: where it sits (category, product_category path, the search query it
# was "scraped" for), the nouns its names are made of, the attributes it may have in three
# slots as the original's instructions use them ("Find me <pre> <type> with <with> for
# <for>"), its options, its price range in dollars, and name details.

@dataclass(frozen=True)
class _Type:
    category: str
    path: str
    query: str
    heads: tuple[str, ...]
    pre: tuple[str, ...]
    with_: tuple[str, ...]
    for_: tuple[str, ...]
    options: tuple[tuple[str, tuple[str, ...]], ...]
    price: tuple[int, int]
    details: tuple[str, ...]


def _t(category: str, path: str, query: str, heads: str, pre: str, with_: str, for_: str,
       options: dict[str, str], price: tuple[int, int], details: str) -> _Type:
    split = lambda text: tuple(s.strip() for s in text.split(";") if s.strip())  # noqa: E731
    return _Type(category, path, query, split(heads), split(pre), split(with_), split(for_),
                 tuple((name, split(values)) for name, values in options.items()), price, split(details))


_COLORS = "Black; White; Navy Blue; Light Grey; Burgundy; Olive Green; Beige; Pink; Charcoal; Black/White; Red; Khaki"
_SIZES = "X-Small; Small; Medium; Large; X-Large; XX-Large"
_WOOD = "Walnut; Natural Oak; Espresso; White; Rustic Brown; Grey Wash; Black"
_PACKS = "Pack of 1; Pack of 2; Pack of 3; Pack of 6; Pack of 12"

_TYPES: tuple[_Type, ...] = (
    # beauty
    _t("beauty", "Beauty & Personal Care › Hair Care › Hair Treatment Oils", "hair treatment oils",
       "Hair Oil; Hair Serum; Scalp Oil; Hair Treatment Oil",
       "paraben free; sulfate free; cruelty free; long lasting; natural; lightweight",
       "argan oil; tea tree; essential oils; natural ingredients; vitamin e; rosemary oil",
       "dry hair; damaged hair; hair growth; hair loss; curly hair",
       {"size": "2 Fl Oz; 4 Fl Oz; 8 Fl Oz; 16 Fl Oz", "scent": "Unscented; Lavender; Coconut; Mint/Tea Tree"},
       (8, 40), "Salon Quality; Travel Size Bottle; With Dropper; Made in USA"),
    _t("beauty", "Beauty & Personal Care › Skin Care › Face › Creams & Moisturizers", "face moisturizers",
       "Face Cream; Face Moisturizer; Night Cream; Day Cream; Gel Moisturizer",
       "cruelty free; fragrance free; non greasy; dermatologist tested; paraben free; vegan",
       "hyaluronic acid; vitamin c; green tea; retinol; shea butter; natural ingredients",
       "sensitive skin; dry skin; fine lines; dark spots; oily skin",
       {"size": "1.7 Oz; 2.5 Oz; 3.4 Oz", "scent": "Unscented; Rose; Cucumber"},
       (10, 65), "Anti Aging Formula; For Men and Women; SPF 30; 24 Hour Hydration"),
    _t("beauty", "Beauty & Personal Care › Makeup › Eyes › Eyeshadow", "eyeshadow palettes",
       "Eyeshadow Palette; Eye Shadow Palette; Shimmer Palette; Matte Palette",
       "long lasting; highly pigmented; cruelty free; waterproof; easy apply; high quality",
       "mirror; brush; matte shades; glitter shades; natural ingredients",
       "eye makeup; daily use; party makeup; travel",
       {"color": "Nude; Smoky; Rose Gold; Sunset; Galaxy; Neutral"},
       (6, 35), "18 Colors; 35 Shades; Professional Makeup Kit; Compact Case"),
    _t("beauty", "Beauty & Personal Care › Oral Care › Toothbrushes › Electric Toothbrushes", "electric toothbrush",
       "Electric Toothbrush; Sonic Toothbrush; Rechargeable Toothbrush; Toothbrush Set",
       "rechargeable; travel friendly; long lasting; waterproof; easy use",
       "replacement heads; travel case; smart timer; soft bristles; pressure sensor",
       "sensitive teeth; oral care; adults; kids; teeth whitening",
       {"color": "White; Black; Pink; Mint Green; Blue", "size": "1 Count; 2 Count"},
       (15, 90), "5 Modes; 4 Brush Heads; 40000 VPM; USB Charging"),
    _t("beauty", "Beauty & Personal Care › Skin Care › Body › Scrubs & Body Treatments", "body scrubs",
       "Body Scrub; Sugar Scrub; Salt Scrub; Exfoliating Scrub; Coffee Scrub",
       "natural; exfoliating; cruelty free; paraben free; moisturizing; vegan",
       "dead sea salt; coconut oil; tea tree; essential oils; natural ingredients; shea butter",
       "dead skin; dry skin; acne; cellulite; sensitive skin",
       {"scent": "Lavender; Coconut; Coffee; Peppermint; Unscented", "size": "8 Oz; 12 Oz; 16 Oz"},
       (9, 38), "Exfoliator; Gift Set; Spa Quality; With Wooden Spoon"),
    _t("beauty", "Beauty & Personal Care › Fragrance › Women's › Eau de Parfum", "womens perfume",
       "Eau de Parfum; Perfume Spray; Fragrance Mist; Perfume Oil",
       "long lasting; travel size; alcohol free; cruelty free; vegan",
       "floral notes; vanilla; jasmine; sandalwood; citrus notes",
       "women; daily wear; evening; gift",
       {"size": "0.33 Fl Oz; 1.7 Fl Oz; 3.4 Fl Oz"},
       (12, 95), "Spray for Women; Gift Box; Roll On; Classic Scent"),
    # food
    _t("grocery", "Grocery & Gourmet Food › Snacks & Sweets › Granola & Nutrition Bars", "granola bars",
       "Granola Bar; Protein Bar; Nutrition Bar; Snack Bar; Energy Bar",
       "gluten free; low sugar; non gmo; plant based; low carb; dairy free; high protein",
       "simple ingredients; dark chocolate; almonds; peanut butter; oats; sea salt",
       "breakfast; snacking; post workout; kids lunch box",
       {"flavor name": "Dark Chocolate Sea Salt; Peanut Butter; Blueberry Almond; Honey Oat; Chocolate Chip",
        "size": "12 Count; 15 Count; 24 Count"},
       (8, 45), "Individually Wrapped; Variety Pack; 1.4 Ounce Bars; Family Size"),
    _t("grocery", "Grocery & Gourmet Food › Beverages › Coffee, Tea & Cocoa › Tea › Green Tea", "green tea",
       "Green Tea; Matcha Tea; Tea Bags; Loose Leaf Tea; Herbal Tea",
       "organic; caffeine free; non gmo; kosher; decaf; sugar free",
       "jasmine; ginger; lemon; mint; natural flavors; antioxidants",
       "weight loss; digestion; iced tea; daily drinking",
       {"flavor name": "Original; Jasmine; Mint; Lemon Ginger; Honey", "size": "20 Count; 40 Count; 100 Count"},
       (5, 30), "Tea Bags; Premium Grade; Resealable Pouch; Japanese Style"),
    _t("grocery", "Grocery & Gourmet Food › Snacks & Sweets › Chips & Crisps", "potato chips",
       "Potato Chips; Kettle Chips; Veggie Chips; Tortilla Chips; Snack Crisps",
       "gluten free; non gmo; low fat; vegan; kosher; keto friendly",
       "sea salt; olive oil; real vegetables; no artificial flavors; avocado oil",
       "snacking; parties; lunch box; movie night",
       {"flavor name": "Sea Salt; Barbecue; Sour Cream Onion; Salt Vinegar; Jalapeno", "size": _PACKS},
       (4, 32), "Family Size Bag; Single Serve Bags; 5 Ounce; Variety Pack"),
    _t("grocery", "Grocery & Gourmet Food › Candy & Chocolate › Chocolate Truffles", "chocolate gift box",
       "Chocolate Truffles; Chocolate Gift Box; Assorted Chocolates; Chocolate Bars",
       "gluten free; individually wrapped; kosher; gift boxed; sugar free",
       "milk chocolate; dark chocolate; caramel; hazelnut; sea salt",
       "valentines day; birthday gift; christmas; holiday gift",
       {"flavor name": "Milk Chocolate; Dark Chocolate; Assorted; Salted Caramel", "size": "12 Piece; 24 Piece; 36 Piece"},
       (10, 60), "Gift Box; Gourmet Collection; Belgian Style; Holiday Edition"),
    _t("grocery", "Grocery & Gourmet Food › Pantry Staples › Cooking & Baking › Nut Butters", "peanut butter",
       "Peanut Butter; Almond Butter; Nut Butter; Cashew Butter",
       "organic; no sugar added; non gmo; keto friendly; natural; creamy",
       "roasted peanuts; sea salt; honey; chocolate; simple ingredients",
       "breakfast; smoothies; baking; snacking",
       {"flavor name": "Creamy; Crunchy; Honey; Chocolate", "size": "12 Ounce; 16 Ounce; 28 Ounce; Pack of 2"},
       (5, 28), "No Stir; Squeeze Pack; Glass Jar; Family Size"),
    _t("grocery", "Grocery & Gourmet Food › Breakfast Foods › Cereals", "breakfast cereal",
       "Breakfast Cereal; Granola Cereal; Oat Cereal; Muesli",
       "gluten free; whole grain; high fiber; low sugar; non gmo; organic",
       "oats; almonds; dried fruit; honey; cinnamon",
       "breakfast; kids; healthy snacking",
       {"flavor name": "Honey Almond; Cinnamon; Berry; Original", "size": "10 Ounce; 14 Ounce; Pack of 4"},
       (4, 26), "Family Size Box; Value Pack; Ready to Eat; Crunchy Clusters"),
    # fashion
    _t("fashion", "Clothing, Shoes & Jewelry › Men › Clothing › Shirts › T-Shirts", "mens t shirts",
       "T-Shirt; Crew Neck Tee; Graphic Tee; V-Neck T-Shirt; Pocket Tee",
       "machine wash; slim fit; classic fit; officially licensed; wash cold; moisture wicking",
       "short sleeve; cotton heather; polyester spandex; needle sleeve; crew neck",
       "daily wear; gym workout; men; casual outings",
       {"color": _COLORS, "size": _SIZES},
       (9, 35), "Cotton Tee; Casual Top; Athletic Shirt; Soft Comfortable Fit"),
    _t("fashion", "Clothing, Shoes & Jewelry › Women › Clothing › Tops, Tees & Blouses › Tunics", "womens tunic tops",
       "Tunic Top; Blouse; Casual Shirt; Tunic Blouse; Loose Top",
       "loose fit; machine wash; hand wash; relaxed fit; button closure; lightweight",
       "long sleeve; short sleeve; v neck; polyester spandex; floral print",
       "women; daily wear; office; leggings",
       {"color": _COLORS, "size": _SIZES},
       (12, 40), "Casual Blouse; Flowy Shirt; Summer Top; Work Blouse"),
    _t("fashion", "Clothing, Shoes & Jewelry › Women › Shoes › Sandals", "womens sandals",
       "Sandals; Flat Sandals; Slide Sandals; Ankle Strap Sandals; Flip Flops",
       "non slip; open toe; comfortable; lightweight; waterproof",
       "rubber sole; arch support; ankle strap; memory foam; faux leather",
       "women; beach; summer; walking",
       {"color": _COLORS, "size": "6; 6.5; 7; 7.5; 8; 8.5; 9; 10"},
       (14, 55), "Summer Shoes; Casual Slides; Beach Shoes; Wide Width"),
    _t("fashion", "Clothing, Shoes & Jewelry › Men › Shoes › Athletic › Running Shoes", "mens running shoes",
       "Running Shoes; Sneakers; Walking Shoes; Trail Running Shoes; Athletic Shoes",
       "non slip; lightweight; breathable; slip resistant; shock absorbing",
       "rubber sole; mesh upper; memory foam; arch support; rubber outsole",
       "men; running; gym workout; walking; tennis",
       {"color": _COLORS, "size": "7; 8; 8.5; 9; 9.5; 10; 11; 12"},
       (25, 120), "Fashion Sneakers; Road Running; Tennis Shoes; Wide Fit"),
    _t("fashion", "Clothing, Shoes & Jewelry › Women › Clothing › Active › Active Pants › Yoga Pants", "yoga pants",
       "Yoga Pants; Leggings; Workout Leggings; Flare Yoga Pants; Jogger Pants",
       "high waist; tummy control; moisture wicking; quick drying; butt lifting; machine wash",
       "pockets; polyester spandex; elastic waistband; drawstring closure",
       "women; gym workout; yoga; running; daily wear",
       {"color": _COLORS, "size": _SIZES},
       (15, 45), "Athletic Pants; Workout Tights; Stretch Fit; 7/8 Length"),
    _t("fashion", "Clothing, Shoes & Jewelry › Men › Clothing › Fashion Hoodies & Sweatshirts", "mens hoodies",
       "Hoodie; Pullover Hoodie; Zip Up Hoodie; Sweatshirt; Fleece Hoodie",
       "machine wash; classic fit; officially licensed; relaxed fit; wash cold",
       "long sleeve; drawstring closure; kangaroo pocket; polyester cotton; fleece lining",
       "men; winter; daily wear; gym workout",
       {"color": _COLORS, "size": _SIZES},
       (20, 60), "Hooded Sweatshirt; Warm Pullover; Casual Jacket; Heavyweight"),
    # furniture
    _t("garden", "Home & Kitchen › Furniture › Living Room Furniture › Tables › Coffee Tables", "coffee tables",
       "Coffee Table; Lift Top Coffee Table; Round Coffee Table; Cocktail Table",
       "easy assemble; mid century; assembly required; space saving; easy clean; modern",
       "storage space; metal frame; solid wood; tempered glass; open shelf",
       "living room; home office; small spaces; apartment",
       {"color": _WOOD},
       (60, 320), "with Storage; Center Table; Farmhouse Style; 2 Tier"),
    _t("garden", "Home & Kitchen › Furniture › Bedroom Furniture › Nightstands", "nightstands",
       "Nightstand; Bedside Table; End Table; Night Stand with Drawer",
       "easy assemble; eco friendly; white item; easy install; space saving",
       "storage space; drawer; charging station; solid wood; metal frame",
       "bedroom; living room; small spaces; dorm",
       {"color": _WOOD, "size": "1 Pack; 2 Pack"},
       (35, 180), "with Drawer; Set of 2; Side Table; Modern Design"),
    _t("garden", "Home & Kitchen › Furniture › Home Office Furniture › Home Office Desks", "office desk",
       "Computer Desk; Writing Desk; Standing Desk; Office Desk; Gaming Desk",
       "height adjustable; easy assemble; heavy duty; space saving; easy clean; modern",
       "steel frame; storage shelves; keyboard tray; monitor stand; wood frame",
       "home office; study; gaming; small spaces",
       {"color": _WOOD, "size": "40 Inch; 47 Inch; 55 Inch; 63 Inch"},
       (70, 380), "Study Table; Workstation; with Shelves; L Shaped"),
    _t("garden", "Home & Kitchen › Furniture › Bedroom Furniture › Beds, Frames & Bases › Bed Frames", "bed frame",
       "Bed Frame; Platform Bed Frame; Upholstered Bed; Metal Bed Frame",
       "heavy duty; easy assemble; noise free; no box spring needed; assembly required",
       "metal frame; wood slats; headboard; storage space; under bed storage",
       "bedroom; guest room; kids room",
       {"size": "Twin; Full; Queen; King", "color": "Black; Grey; White; Brown"},
       (90, 450), "Mattress Foundation; Heavy Duty Slats; 14 Inch; Modern Style"),
    _t("garden", "Home & Kitchen › Furniture › Living Room Furniture › Chairs › Accent Chairs", "accent chair",
       "Accent Chair; Armchair; Lounge Chair; Club Chair; Swivel Chair",
       "mid century; easy assemble; comfortable; high density; modern",
       "solid wood; wood legs; faux leather; velvet fabric; memory foam",
       "living room; bedroom; reading nook; home office",
       {"color": "Grey; Navy Blue; Green Velvet; Cream; Brown Leather; Pink"},
       (80, 350), "Upholstered Chair; Reading Chair; Side Chair; Comfy Seat"),
    _t("garden", "Home & Kitchen › Home Décor Products › Mirrors › Wall-Mounted Mirrors", "wall mirror",
       "Wall Mirror; Bathroom Mirror; Vanity Mirror; Round Mirror; Decorative Mirror",
       "wall mounted; easy install; shatter proof; modern; high quality",
       "metal frame; wood frame; led light; beveled edge; clear glass",
       "living room; bathroom; bedroom; entryway; home decor",
       {"size": "20 Inch; 24 Inch; 30 Inch; 36 Inch", "color": "Black; Gold; Silver; Natural Wood"},
       (25, 200), "Round Mirror; Vanity Mirror; Decorative Mirror; Hanging Mirror"),
    # electronics
    _t("electronics", "Electronics › Portable Audio & Video › Portable Speakers & Docks › Portable Bluetooth Speakers",
       "bluetooth speaker",
       "Bluetooth Speaker; Portable Speaker; Wireless Speaker; Party Speaker; Mini Speaker",
       "waterproof; portable; high quality; long lasting; hands free",
       "wireless bluetooth; stereo sound; deep bass; usb port; built in microphone",
       "outdoor; home; travel; party; shower",
       {"color": "Black; Blue; Red; Grey; Camo"},
       (18, 130), "20W Stereo Sound; 24H Playtime; IPX7; With FM Radio"),
    _t("electronics", "Electronics › Computers & Accessories › Data Storage › USB Flash Drives", "usb flash drive",
       "USB Flash Drive; Thumb Drive; Memory Stick; USB C Flash Drive",
       "high speed; plug play; easy carry; durable; compact",
       "usb 3.0; usb c; metal case; key chain; password protection",
       "laptop; data storage; backup; phone",
       {"size": "32GB; 64GB; 128GB; 256GB", "color": "Silver; Black; Blue"},
       (6, 60), "2 Pack; 5 Pack; Dual Drive; Swivel Design"),
    _t("electronics", "Electronics › Cell Phones & Accessories › Accessories › Screen Protectors", "screen protector",
       "Screen Protector; Tempered Glass Screen Protector; Privacy Screen Protector; Camera Lens Protector",
       "easy install; bubble free; case friendly; high definition; anti scratch",
       "tempered glass; glass screen; alignment frame; 9h hardness",
       "iphone pro; samsung galaxy; cell phone; mobile phone",
       {"size": "1 Pack; 2 Pack; 3 Pack"},
       (5, 20), "Installation Kit; Full Coverage; Ultra Clear; Privacy Glass"),
    _t("electronics", "Electronics › Television & Video › Accessories › Remote Controls", "replacement remote",
       "Replacement Remote; Remote Control; Universal Remote; Voice Remote; TV Remote",
       "easy use; no setup needed; long range; durable",
       "batteries; voice control; backlit buttons; shortcut buttons",
       "smart tv; home theater; sound bar; streaming",
       {"color": "Black; Silver; White"},
       (7, 35), "Universal Fit; Replacement Part; No Programming; 2 Pack"),
    _t("electronics", "Electronics › Headphones, Earbuds & Accessories › Earbud Headphones", "wireless earbuds",
       "Wireless Earbuds; Bluetooth Earbuds; Noise Cancelling Earbuds; Sports Earbuds",
       "noise cancelling; waterproof; hands free; long lasting; high quality",
       "wireless bluetooth; charging case; built in microphone; touch control; deep bass",
       "running; gym workout; phone calls; travel",
       {"color": "Black; White; Navy Blue; Rose Gold"},
       (15, 150), "40H Playtime; In Ear Headphones; Sweatproof; With Mic"),
    _t("electronics", "Electronics › Camera & Photo › Video Surveillance › Surveillance Cameras", "security camera",
       "Security Camera; WiFi Camera; Indoor Camera; Outdoor Camera; Baby Monitor Camera",
       "high definition; easy install; motion detection; night vision; wireless",
       "two way audio; cloud storage; sd card slot; spotlight; pan tilt",
       "home security; baby monitor; pet camera; outdoor",
       {"size": "1 Pack; 2 Pack; 4 Pack", "color": "White; Black"},
       (20, 160), "1080P; 2K; Works with Alexa; Motion Alerts"),
)

_BRANDS = {
    "beauty": "Lumera; Verdana; Aurelle; Solvie; Petalin; Nuvara; Kelso Botanics; Mirabel",
    "grocery": "Harvest Lane; Oakridge Pantry; Sunny Fields; Brightmill; Tiller & Co; Nutwise; Golden Acre",
    "fashion": "Northwind; Urbanista; Coastline; Trailpeak; Velora; Marlow; Kestrel Athletic; Bellhaven",
    "garden": "Oakhaven; Nordhem; Loftcraft; Homevia; Birchwood; Casa Linea; Tribeca Home",
    "electronics": "Voltix; Sonora; Brightek; Nexo; Kinetra; Auralink; Pixelon; Tecvault",
}
_REVIEW_TITLES = (
    "Works great", "Exactly as described", "Good value for the price", "Not what I expected",
    "Love it", "Decent quality", "Would buy again", "Arrived damaged", "Pretty good", "Five stars",
)
_REVIEW_BODIES = (
    "I have used this {head} for a few weeks now and it does what it says.",
    "The {head} arrived quickly and the quality is better than I expected for the price.",
    "Good {head}, but the {aspect} could be better.",
    "My second {head} from this brand; the {aspect} is still great.",
    "Returned it: the {aspect} was not as shown in the pictures.",
    "Bought this {head} as a gift and they loved it.",
)
_ASPECTS = {
    "beauty": "scent; texture; packaging; results",
    "grocery": "taste; texture; packaging; freshness",
    "fashion": "fit; fabric; color; stitching",
    "garden": "assembly; finish; sturdiness; size",
    "electronics": "battery life; sound; build quality; connectivity",
}
_FEATURES = {
    "beauty": ("Gentle on skin and suitable for everyday use", "Free from harsh chemicals and artificial dyes",
               "Dermatologist reviewed formula made in small batches", "Recyclable packaging, never tested on animals"),
    "grocery": ("Made with simple ingredients you can pronounce", "Packed fresh in a facility that handles tree nuts",
             "Great for on the go snacking at work or school", "Resealable packaging keeps it fresh longer"),
    "fashion": ("Soft breathable fabric that keeps its shape wash after wash",
                "Tagless design for all day comfort", "Imported; please check the size chart before ordering",
                "Pairs easily with jeans, shorts or joggers"),
    "garden": ("All hardware and step by step instructions included", "Sturdy construction supports up to 200 lbs",
                  "Wipe clean with a damp cloth", "Fits modern, rustic and farmhouse decor"),
    "electronics": ("Plug and play with no driver needed", "Backed by a 12 month warranty and friendly support",
                    "Compact design that fits in a pocket or bag", "Compatible with most phones, tablets and laptops"),
}
_ASIN_CHARS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _title(text: str) -> str:
    return " ".join(word[:1].upper() + word[1:] for word in text.split())


def _asin(rng: random.Random, taken: set[str]) -> str:
    while True:
        asin = "B0" + "".join(rng.choice(_ASIN_CHARS) for _ in range(8))
        if asin not in taken:
            taken.add(asin)
            return asin


def _price(rng: random.Random, low: int, high: int) -> str:
    dollars = rng.randrange(low, high)
    cents = rng.choice((99, 99, 95, 49, 0, 89))
    return f"${dollars}.{cents:02d}"


def _pick(rng: random.Random, pool: tuple[str, ...], low: int, high: int) -> list[str]:
    """Between low and high items of pool, in pool order."""
    count = min(len(pool), rng.randint(low, high))
    chosen = set(rng.sample(range(len(pool)), count))
    return [item for i, item in enumerate(pool) if i in chosen]


def _leaf(kind: _Type) -> str:
    """The product type as instructions name it: the last category of the path, lower case,
    with "women's"/"men's" when the path is under Women or Men (as in the original's)."""
    parts = [p.strip() for p in kind.path.split("›")]
    leaf = parts[-1].lower()
    for part in parts:
        if part in ("Women", "Men"):
            return f"{part.lower()}'s {leaf}"
    return leaf


def _instruction(rng: random.Random, kind: _Type, pre: list[str], with_: list[str], for_: list[str]
                 ) -> tuple[str, list[str]] | None:
    """A 'Find me ...' instruction over 2-4 of the product's attributes, or None."""
    attributes = pre + with_ + for_
    if len(attributes) < 2 or rng.random() < 0.25:
        return None
    chosen = set(_pick(rng, tuple(attributes), 2, 4))
    picked = [[a for a in slot if a in chosen] for slot in (pre, with_, for_)]
    text = "Find me " + (", ".join(picked[0]) + " " if picked[0] else "") + _leaf(kind)
    if picked[1]:
        text += " with " + ", ".join(picked[1])
    if picked[2]:
        text += " for " + ", ".join(picked[2])
    return text, [a for a in attributes if a in chosen]


def _product(rng: random.Random, kind: _Type, asin: str) -> tuple[dict, dict, dict]:
    head = rng.choice(kind.heads)
    brand = rng.choice([b.strip() for b in _BRANDS[kind.category].split(";")])
    has_attributes = rng.random() >= 0.18
    pre = _pick(rng, kind.pre, 0, 2) if has_attributes else []
    with_ = _pick(rng, kind.with_, 0, 2) if has_attributes else []
    for_ = _pick(rng, kind.for_, 0, 2) if has_attributes else []
    name = [brand]
    if pre and rng.random() < 0.6:
        name.append(_title(pre[0]))
    if with_ and rng.random() < 0.5:
        name.append(_title(with_[0]))
    name.append(head)
    if for_ and rng.random() < 0.5:
        name.append("for " + " and ".join(_title(f) for f in for_))
    if rng.random() < 0.6:
        name[-1] += ","
        name.append(rng.choice(kind.details))
    title = " ".join(name)

    description = [f"{brand} {head.lower()}" + (f" made with {' and '.join(with_)}." if with_ else ".")]
    if pre:
        description.append(f"It is {' and '.join(pre)}, designed to last.")
    if for_:
        description.append(f"A good choice for {', '.join(for_)}.")
    description.append(rng.choice(_FEATURES[kind.category]) + ".")
    bullets = [f"{_title(a).upper()}: {rng.choice(_FEATURES[kind.category])}" for a in (pre + with_)[:3]]
    bullets += rng.sample(_FEATURES[kind.category], 2)

    customization = {}
    for option_name, pool in kind.options:
        if rng.random() < 0.7:
            values = _pick(rng, pool, 2, 5)
            customization[option_name] = [
                {"value": v, "image": f"https://images.webshop.invalid/{asin}/{i}.jpg" if rng.random() < 0.5 else None}
                for i, v in enumerate(values)]
    raw = {
        "asin": asin,
        "category": kind.category,
        "query": kind.query,
        "name": title,
        "product_category": kind.path,
        "full_description": " ".join(description),
        "small_description": bullets,
        "pricing": _price(rng, *kind.price),
        "images": [f"https://images.webshop.invalid/{asin}/main.jpg"],
        "customization_options": customization or None,
        "brand": brand,
    }
    attributes: dict[str, Any] = {"attributes": pre + with_ + for_}
    instruction = _instruction(rng, kind, pre, with_, for_)
    if instruction is not None:
        attributes["instruction"], attributes["instruction_attributes"] = instruction
    aspects = [a.strip() for a in _ASPECTS[kind.category].split(";")]
    reviews = []
    for _ in range(rng.randint(0, 4)):
        reviews.append({
            "title": rng.choice(_REVIEW_TITLES),
            "stars": rng.randint(1, 5),
            "review": rng.choice(_REVIEW_BODIES).format(head=head.lower(), aspect=rng.choice(aspects)),
        })
    rating = round(sum(r["stars"] for r in reviews) / len(reviews), 1) if reviews else "N.A."
    return raw, attributes, {"asin": asin, "reviews": reviews, "average_rating": rating}


def generate_project_catalogue(seed: int = CATALOGUE_SEED, count: int = NUM_PRODUCTS
                               ) -> tuple[list[dict], dict[str, dict], list[dict]]:
    """The project catalogue in the original's raw form: (items_shuffle rows, items_ins_v2
    map, reviews rows). Deterministic: only a seeded ``random.Random`` is used, and no set
    or hash order reaches the output."""
    rng = random.Random(seed)
    taken: set[str] = set()
    rows, attributes, reviews = [], {}, []
    for i in range(count):
        kind = _TYPES[i % len(_TYPES)]
        raw, attrs, review = _product(rng, kind, _asin(rng, taken))
        rows.append(raw)
        attributes[raw["asin"]] = attrs
        reviews.append(review)
    rng.shuffle(rows)
    return rows, attributes, reviews


def _main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m pytest_agentgym.servers.embedded.webshop.catalogue DIR", file=sys.stderr)
        return 2
    started = time.perf_counter()
    directory = write_project_catalogue(argv[0])
    size = sum(p.stat().st_size for p in directory.iterdir())
    print(f"wrote {directory} ({size / 1e6:.2f} MB) in {time.perf_counter() - started:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
