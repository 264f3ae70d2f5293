"""The project catalogue: the shop WebShop plays when the original's data files are not there.

The original's files cannot be downloaded here, so unless ``AGENTENV_WEBSHOP_DATA`` names a
directory that holds them, the shop is the **project catalogue**: 1,000 invented products
of 30 product types (:mod:`.product_types`) in the five categories of WebShop's data (beauty,
grocery, fashion, garden, electronics), with names, descriptions, features, options, one
price each, reviews, attributes and (for about half) a "Find me ..." instruction, as the
original's are written. :func:`generate_project_catalogue` makes it from a fixed seed with
Python's seeded ``random.Random`` only (the same bytes on every machine; 1.4 MB, about
0.15 s); it is written in the original's file format (:mod:`.data_files`, with a
``reviews.json``) under ``$XDG_CACHE_HOME/pytest-agentgym/webshop/<hash of the modules that
make it>/`` (``AGENTGYM_WEBSHOP_CACHE`` names another parent) at first use and read back by
the same loader as the original's files. Runs on it are not comparable with published
WebShop numbers (``Shop.comparable`` is False, :mod:`.catalogue`).

    python -m pytest_agentgym.servers.embedded.webshop.project_catalogue DIR   # write the project catalogue into DIR
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pytest_agentgym.servers.embedded.webshop import product_types
from pytest_agentgym.servers.embedded.webshop.data_files import (
    ATTRIBUTES_FILE,
    NUM_PRODUCTS,
    PRODUCTS_FILE,
    REVIEWS_FILE,
    WebShopDataError,
)
from pytest_agentgym.servers.embedded.webshop.product_types import (
    ASPECTS,
    BRANDS,
    FEATURES,
    REVIEW_BODIES,
    REVIEW_TITLES,
    TYPES,
    ProductType,
)
from pytest_agentgym.process import variables

#: environment variable naming the parent directory of the project catalogue's cache
CACHE_ENV = "AGENTGYM_WEBSHOP_CACHE"
#: seed of the project catalogue
CATALOGUE_SEED = 20260428
_ASIN_CHARS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"


# --------------------------------------------------------------------------- the cache

def catalogue_version() -> str:
    """A hash of the modules that make the project catalogue (this one and
    :mod:`.product_types`): its cache directory is named after it."""
    digest = hashlib.sha256(Path(__file__).read_bytes())
    digest.update(Path(product_types.__file__).read_bytes())
    return digest.hexdigest()[:16]


def _cache_root() -> Path:
    configured = variables.value(CACHE_ENV)
    if configured is not None:
        return Path(configured).expanduser()
    base = variables.value("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pytest-agentgym" / "webshop"


def _complete(directory: Path) -> bool:
    return all((directory / name).is_file() for name in (PRODUCTS_FILE, ATTRIBUTES_FILE, REVIEWS_FILE))


def project_catalogue_dir(cache_root: str | Path | None = None) -> Path:
    """The project catalogue's data directory, written on first use (into a scratch
    directory beside it, then renamed, so no reader ever sees half of it)."""
    explicit = cache_root is not None or variables.value(CACHE_ENV) is not None
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


# --------------------------------------------------------------------------- the generator

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


def _leaf(kind: ProductType) -> str:
    """The product type as instructions name it: the last category of the path, lower case,
    with "women's"/"men's" when the path is under Women or Men (as in the original's)."""
    parts = [p.strip() for p in kind.path.split("›")]
    leaf = parts[-1].lower()
    for part in parts:
        if part in ("Women", "Men"):
            return f"{part.lower()}'s {leaf}"
    return leaf


def _instruction(rng: random.Random, kind: ProductType, pre: list[str], with_: list[str], for_: list[str]
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


def _product(rng: random.Random, kind: ProductType, asin: str) -> tuple[dict, dict, dict]:
    head = rng.choice(kind.heads)
    brand = rng.choice([b.strip() for b in BRANDS[kind.category].split(";")])
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
    description.append(rng.choice(FEATURES[kind.category]) + ".")
    bullets = [f"{_title(a).upper()}: {rng.choice(FEATURES[kind.category])}" for a in (pre + with_)[:3]]
    bullets += rng.sample(FEATURES[kind.category], 2)

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
    aspects = [a.strip() for a in ASPECTS[kind.category].split(";")]
    reviews = []
    for _ in range(rng.randint(0, 4)):
        reviews.append({
            "title": rng.choice(REVIEW_TITLES),
            "stars": rng.randint(1, 5),
            "review": rng.choice(REVIEW_BODIES).format(head=head.lower(), aspect=rng.choice(aspects)),
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
        kind = TYPES[i % len(TYPES)]
        raw, attrs, review = _product(rng, kind, _asin(rng, taken))
        rows.append(raw)
        attributes[raw["asin"]] = attrs
        reviews.append(review)
    rng.shuffle(rows)
    return rows, attributes, reviews


def _main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m pytest_agentgym.servers.embedded.webshop.project_catalogue DIR", file=sys.stderr)
        return 2
    started = time.perf_counter()
    directory = write_project_catalogue(argv[0])
    size = sum(p.stat().st_size for p in directory.iterdir())
    print(f"wrote {directory} ({size / 1e6:.2f} MB) in {time.perf_counter() - started:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
