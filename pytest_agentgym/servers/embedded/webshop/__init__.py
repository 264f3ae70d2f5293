"""Embedded WebShop: AgentGym's ``agentenv-webshop`` wire protocol over a shop built
once per process (docs/envs/webshop.md).

``catalogue`` (the shop: products, fixed prices, goals), ``data_files`` (the original's
data files and their loader), ``project_catalogue`` and ``product_types`` (the shop played
without them), ``goals``, ``reward``, ``nouns`` (the original's reward and its noun
tagger), ``search`` (BM25 over the catalogue), ``pages`` (what each page of the web site
shows), ``session`` (one env's state machine) and ``server`` (the FastAPI app,
``create_app()``).
"""

from __future__ import annotations

import importlib.util

#: the packages the server runs on (the extra 'webshop' installs them): the search engine's
#: tokenizer and stemmer, and the reward's fuzzy matching
REQUIRED_MODULES = ("regex", "nltk", "thefuzz")


def missing_requirements() -> str | None:
    """What to install for the embedded WebShop server, or None when it can run here."""
    missing = [name for name in REQUIRED_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        names = " and ".join(repr(name) for name in missing)
        return f"the embedded WebShop server needs {names}: pip install 'pytest-agentgym[webshop]'"
    return None
