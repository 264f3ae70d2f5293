"""One WebShop env: the state machine of AgentGym's ``WebAgentTextEnv`` (text mode)
with its ``SimServer`` and ``SimBrowser``, over a shop and search index shared by
every env of the process.

The rules are the original's (web_agent_site/envs/web_agent_text_env.py):

* ``reset(session_id)``: the session is ``str(session_id)``, or 10 random lower-case
  letters when it is None; a session this env has not seen gets the goal
  ``goals[session_id]`` (Python indexing: -1 is the last goal, past the end is an
  error), or for None a goal drawn by the goals' weights (``random_idx``, whose
  bisect lands one goal after the one whose weight was drawn: kept); a session seen
  before keeps its goal. The page is the search page.
* ``step(action)``: ``search[...]``/``click[...]`` (:func:`pages.parse_action`); the
  argument is lower-cased. A search with a non-empty argument runs from any page
  (the keywords are the argument split on single spaces); a click must name a
  clickable of the current page other than ``search``. Anything else changes
  nothing: reward 0, not done.
* a click goes, by its name: ``buy now`` to the done page (reward, done); ``back to
  search`` to the search page; ``next >``/``< prev`` on a results page to the next or
  previous results page; ``< prev`` on a sub page to the item, on an item page to its
  results page; ``description``/``features``/``reviews``/``attributes`` to that sub
  page; anything else to an item page (a product link opens that product, an option
  value is chosen under its option name). Which page the env is on is read from its
  url by the original's rule (the first of ``search_results``, ``item_page``,
  ``item_sub_page``, ``done`` that the url contains).
* a results page runs the search again (``<c> cat``, ``<q> query`` and ``<r>`` are
  the original's category, query and random listings; ``<a>`` fails as it does
  there); 50 results at most, 10 a page.
* the step's state is the page's observation (AgentGym keeps no previous observations).
"""

from __future__ import annotations

import bisect
import json
import random
import string
from typing import Any, Callable, Mapping, Protocol, Sequence

from pytest_agentgym.servers.embedded.webshop import pages
from pytest_agentgym.servers.embedded.webshop.pages import BASE_URL, Page

#: results a search keeps (LuceneSearcher.search(query, k=50) in the original)
SEARCH_RETURN_N = 50
#: the original's page names, in the order its url test tries them
PAGE_NAMES = ("search_results", "item_page", "item_sub_page", "done")


class SessionError(Exception):
    """A request the original fails with an exception (an HTTP 500); says what and why."""


class ShopLike(Protocol):
    products: list[dict]
    by_asin: dict[str, dict]
    prices: dict[str, float]
    goals: list[dict]


class IndexLike(Protocol):
    def search(self, query: str, k: int = SEARCH_RETURN_N) -> list[str]: ...


Reward = Callable[[dict, dict, float, dict], float]


def page_name(url: str | None) -> str | None:
    """The original's ``get_page_name``: a substring test on the url, in order."""
    if url is None:
        return None
    for name in PAGE_NAMES:
        if name in url:
            return name
    return ""


def weighted_index(cum_weights: Sequence[float], rng: random.Random) -> int:
    """The original's ``random_idx``: a goal drawn by weight."""
    position = rng.uniform(0, cum_weights[-1])
    return min(bisect.bisect(cum_weights, position), len(cum_weights) - 2)


class Catalogue:
    """The shared, read-only part: shop, index, reward, the goals' cumulated weights."""

    def __init__(self, shop: ShopLike, index: IndexLike, reward: Reward, *, show_attrs: bool = False) -> None:
        self.shop = shop
        self.index = index
        self.reward = reward
        self.show_attrs = show_attrs
        self.cum_weights = [0.0]
        for goal in shop.goals:
            self.cum_weights.append(self.cum_weights[-1] + goal.get("weight", 1))

    def search(self, keywords: list[str], rng: random.Random) -> list[dict]:
        """``get_top_n_product_from_keywords``: the products a search lists, best first."""
        products = self.shop.products
        head = keywords[0]
        if head == "<r>":
            return rng.sample(products, k=SEARCH_RETURN_N)
        if head == "<a>":
            raise SessionError("search[<a> ...] lists products by attribute, which the original's "
                               "text env cannot do (it fails there too): search with keywords instead")
        if head == "<c>":
            if len(keywords) < 2:
                raise SessionError("search[<c> CATEGORY] needs a category after <c> (the original fails)")
            category = keywords[1].strip()
            return [p for p in products if p.get("category") == category]
        if head == "<q>":
            query = " ".join(keywords[1:]).strip()
            return [p for p in products if p.get("query") == query]
        by_asin = self.shop.by_asin
        asins = self.index.search(" ".join(keywords), k=SEARCH_RETURN_N)
        return [by_asin[asin] for asin in asins if asin in by_asin]


class WebShopSession:
    """One env. Not thread-safe: the server calls it from one thread."""

    def __init__(self, catalogue: Catalogue, rng: random.Random | None = None) -> None:
        self.catalogue = catalogue
        self.rng = rng or random.Random()
        self.goals_by_session: dict[str, dict] = {}
        self.session_id = ""
        self.goal: dict[str, Any] = {}
        self.instruction_text = ""
        self.url: str | None = None
        self.page: Page | None = None
        self.keywords: list[str] | None = None
        self.page_number: int | None = None
        self.asin: str | None = None
        self.asins: set[str] = set()
        self.options: dict[str, str] = {}
        self._results: tuple[tuple[str, ...], list[dict]] | None = None

    # what a client reads -------------------------------------------------------------

    @property
    def current(self) -> Page:
        if self.page is None:
            raise SessionError("this env has no page yet: POST /reset first")
        return self.page

    @property
    def observation(self) -> str:
        return self.current.observation

    def available_actions(self) -> dict[str, Any]:
        return self.current.available_actions()

    def instruction_heading(self) -> str:
        """``get_instruction_text``: the heading of the current page."""
        heading = self.current.instruction
        if heading is None:
            raise SessionError(f"the {self.current.name} page has no instruction (the original fails "
                               "with AttributeError: 'NoneType' object has no attribute 'h4'); "
                               "GET /state holds the instruction of the last reset")
        return heading

    def state(self) -> dict[str, str]:
        return {"url": self.url or "", "html": self.current.html, "instruction_text": self.instruction_text}

    @property
    def instruction(self) -> str:
        return pages.jinja_text(self.goal.get("instruction_text"))

    # reset -----------------------------------------------------------------------------

    def reset(self, session_id: int | None = None) -> tuple[str, None]:
        if session_id is not None:
            session = str(session_id)
        else:
            session = "".join(self.rng.choices(string.ascii_lowercase, k=10))
        if session not in self.goals_by_session:
            goals = self.catalogue.shop.goals
            if session_id is not None:
                if not -len(goals) <= session_id < len(goals):
                    raise SessionError(f"session_id {session_id} is out of range: this shop has "
                                       f"{len(goals)} goals, session ids 0-{len(goals) - 1} "
                                       "(negative ones count from the end)")
                index = session_id
            else:
                index = weighted_index(self.catalogue.cum_weights, self.rng)
            self.goals_by_session[session] = goals[index]
        self.session_id = session
        self.goal = self.goals_by_session[session]
        self._to_search_page()
        self.instruction_text = self.instruction_heading()
        return self.observation, None

    def _to_search_page(self) -> None:
        self.page = pages.search_page(self.instruction)
        self.url = f"{BASE_URL}/{self.session_id}"
        self.keywords = None
        self.page_number = None
        self.asin = None
        self.asins = set()
        self.options = {}

    # step -------------------------------------------------------------------------------

    def step(self, action: str) -> tuple[str, float, bool, None]:
        clickables = self.current.clickables
        name, argument = pages.parse_action(action)
        if argument is not None:
            argument = argument.lower()
        reward, done = 0.0, False
        if name == "search" and argument:
            self._search(argument.split(" "), 1)
        elif name == "click" and argument in clickables and argument != "search":
            reward, done = self._click(argument, clickables)
        return self.observation, reward, done, None

    def _keywords_in_url(self) -> str:
        return "+".join(self.keywords or [])

    def _search(self, keywords: list[str], page_number: int) -> None:
        self.keywords = keywords
        self.page_number = page_number
        self.asin = None
        self.options = {}
        key = tuple(keywords)
        if keywords[0] == "<r>" or self._results is None or self._results[0] != key:
            self._results = (key, self.catalogue.search(keywords, self.rng))
        found = self._results[1]
        # plain slicing, as the original: page 0 (< Prev from page 1 of an item's results) shows nothing
        shown = found[(page_number - 1) * pages.PRODUCT_WINDOW:page_number * pages.PRODUCT_WINDOW]
        self.url = f"{BASE_URL}/search_results/{self.session_id}/{self._keywords_in_url()}/{page_number}"
        self.page = pages.results_page(self.instruction, shown, page_number, len(found), self._item_url)

    def _item_url(self, asin: str) -> str:
        return (f"{BASE_URL}/item_page/{self.session_id}/{asin}/{self._keywords_in_url()}/"
                f"{self.page_number}/{{}}")

    def _click(self, name: str, clickables: Mapping[str, pages.Clickable]) -> tuple[float, bool]:
        where = page_name(self.url)
        if name == pages.END_BUTTON.lower():
            return self._buy(), True
        if name == pages.BACK_TO_SEARCH.lower():
            self._to_search_page()
        elif name == pages.NEXT_PAGE.lower() and where == "search_results":
            self._search(self._require_keywords(), self.page_number + 1)
        elif name == pages.PREV_PAGE.lower() and where == "search_results":
            self._search(self._require_keywords(), self.page_number - 1)
        elif name == pages.PREV_PAGE.lower() and where == "item_sub_page":
            self._item(name, clickables)
        elif name == pages.PREV_PAGE.lower() and where == "item_page":
            self._search(self._require_keywords(), self.page_number)
        elif name in (sub.lower() for sub in pages.SUB_PAGES):
            self._sub_page(name)
        else:
            self._item(name, clickables)
        return 0.0, False

    def _require_keywords(self) -> list[str]:
        if self.keywords is None:
            raise SessionError("no search to page through (the original fails here): search[...] first")
        return self.keywords

    def _product(self) -> dict:
        try:
            return self.catalogue.shop.by_asin[self.asin]  # type: ignore[index]
        except KeyError:
            raise SessionError(f"no product {self.asin!r} in the shop (the original fails with "
                               "KeyError): open a product from a results page first") from None

    def _item(self, name: str, clickables: Mapping[str, pages.Clickable]) -> None:
        clickable = clickables[name]
        if clickable.kind == "product":
            self.asin = name.upper()
            self.asins.add(self.asin)
        elif clickable.kind == "option":
            self.options[str(clickable.option).lower()] = name
        product = self._product()
        self.url = (f"{BASE_URL}/item_page/{self.session_id}/{self.asin}/{self._keywords_in_url()}/"
                    f"{self.page_number}/{json.dumps(self.options)}")
        self.page = pages.item_page(self.instruction, product, show_attrs=self.catalogue.show_attrs)

    def _sub_page(self, name: str) -> None:
        title = next(sub for sub in pages.SUB_PAGES if sub.lower() == name)
        product = self._product()
        self.url = (f"{BASE_URL}/item_sub_page/{self.session_id}/{self.asin}/{self._keywords_in_url()}/"
                    f"{self.page_number}/{title}/{self.options}")
        self.page = pages.sub_page(title, self.instruction, product)

    def _buy(self) -> float:
        product = self._product()
        price = self.catalogue.shop.prices.get(self.asin)  # type: ignore[arg-type]
        reward = self.catalogue.reward(product, self.goal, price, self.options)
        self.url = f"{BASE_URL}/done/{self.session_id}/{self.asin}/{self.options}"
        self.page = pages.done_page(pages.jinja_text(self.asin), self.options, reward)
        return reward
