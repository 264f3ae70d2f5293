"""The pages of the WebShop web site as AgentGym's text env sees them.

The original renders each page from a Jinja template (web_agent_site/templates) and
the text env turns the HTML back into what a client gets:

* the **observation** (``observation_mode="text"``): every text node of the page
  outside ``head``/``script``/``style``/``title``/``meta`` and comments, as
  BeautifulSoup's ``html.parser`` tree holds it, stripped and joined by ``" [SEP] "``;
  nodes that are exactly ``"\\n"`` are left out;
* the **clickables** (``get_available_actions``): the lower-cased text of every
  ``.btn`` element, then of every ``.product-link``, in page order, then the ``value``
  of every radio input (not lower-cased); kept in a dict, so a repeated key keeps its
  first place and its last element;
* the **instruction heading** (``get_instruction_text``): the text of the
  ``#instruction-text h4`` element, "Instruction: " and the goal's text on the search
  page, "Instruction:" and the text (no space) on the others; the done page has none.

Here each page is built directly as that list of text nodes, with the clickables, so
neither Flask, Jinja nor BeautifulSoup is needed. Two rules of BeautifulSoup decide
which nodes exist (:func:`visible`): an empty string is no node, and a node made only
of ASCII white space becomes ``"\\n"`` (left out) when it holds a newline, else ``" "``
(kept, stripped to ``""``), except inside ``<pre>``. A node's text is what the template
writes around a value (``" " + bullet point`` in the features page, ``"Price: " +
price``), values as Jinja prints them (``None`` as ``"None"``, a missing field as
nothing).

Each page also carries a small HTML document of our own (``/state``'s ``html``; the
original's is the rendered template): no white space between tags, one element per
text node, the clickables as ``.btn`` buttons, ``.product-link`` anchors and radio
inputs, so that the original's text extraction run on it gives the same observation,
clickables and instruction heading.
"""

from __future__ import annotations

import json
import pprint
import re
from dataclasses import dataclass, field
from html import escape
from typing import Any, Callable, Iterable, Mapping

#: the original's fake server address, the start of every page url
BASE_URL = "http://127.0.0.1:3000"
END_BUTTON = "Buy Now"
NEXT_PAGE = "Next >"
PREV_PAGE = "< Prev"
BACK_TO_SEARCH = "Back to Search"
SEARCH_BUTTON = "Search"
#: the item's sub pages, in the order of their buttons; "Attributes" only with show_attrs
SUB_PAGES = ("Description", "Features", "Reviews", "Attributes")
#: results shown on one results page
PRODUCT_WINDOW = 10
#: what BeautifulSoup counts as white space when it collapses a white-space-only node
ASCII_SPACES = " \n\t\f\r"
SEP = " [SEP] "

_ACTION = re.compile(r"(.+)\[(.+)\]")


def parse_action(action: str) -> tuple[str, str | None]:
    """``(name, argument)`` of ``search[...]``/``click[...]`` by the original's rule: a
    greedy ``(.+)\\[(.+)\\]`` matched at the start (text after the last ``]`` is
    ignored); without a match the whole action is the name and the argument None."""
    match = _ACTION.match(action)
    if match is None:
        return action, None
    return match.group(1), match.group(2)


def jinja_text(value: Any) -> str:
    """A value as Jinja prints it: ``None`` is ``"None"``, anything else ``str()``."""
    return str(value)


def visible(text: str, pre: bool = False) -> str | None:
    """The observation part of one text node, or None when the node is not there or is
    left out (BeautifulSoup's white-space rule, then the text env's strip)."""
    if not text:
        return None
    if not pre and all(char in ASCII_SPACES for char in text):
        text = "\n" if "\n" in text else " "
    if text == "\n":
        return None
    return text.strip()


@dataclass(frozen=True)
class Clickable:
    """What a clickable key names: a ``button``, a ``product`` link or an ``option``
    radio (``option`` is then its option name, the radio's ``name``)."""

    kind: str
    option: str | None = None


@dataclass
class Page:
    """One rendered page: its text nodes, clickables and our HTML."""

    name: str
    nodes: list[tuple[str, bool]] = field(default_factory=list)  # (text, inside <pre>)
    #: (key, clickable) of the .btn elements, the .product-link anchors and the radios, in page order
    buttons: list[tuple[str, Clickable]] = field(default_factory=list)
    links: list[tuple[str, Clickable]] = field(default_factory=list)
    radios: list[tuple[str, Clickable]] = field(default_factory=list)
    has_search_bar: bool = False
    #: the #instruction-text heading's text; None on the done page
    instruction: str | None = None
    html_parts: list[str] = field(default_factory=list)

    @property
    def observation(self) -> str:
        parts = (visible(text, pre) for text, pre in self.nodes)
        return SEP.join(part for part in parts if part is not None)

    @property
    def clickables(self) -> dict[str, Clickable]:
        """The original's ``text_to_clickable``: buttons, then product links, then radios;
        a repeated key keeps its first place and takes the later element."""
        found: dict[str, Clickable] = {}
        for key, clickable in self.buttons + self.links + self.radios:
            found[key] = clickable
        return found

    @property
    def html(self) -> str:
        return ("<!DOCTYPE html><html><head><title>WebShop</title></head><body>"
                + "".join(self.html_parts) + "</body></html>")

    def available_actions(self) -> dict[str, Any]:
        """``get_available_actions``: ``{"has_search_bar", "clickables"}``."""
        return {"has_search_bar": self.has_search_bar, "clickables": list(self.clickables)}

    # building ---------------------------------------------------------------------

    def text(self, text: str, tag: str = "p") -> None:
        self.nodes.append((text, False))
        self.html_parts.append(f"<{tag}>{escape(text, quote=False)}</{tag}>" if text else f"<{tag}></{tag}>")

    def pre(self, text: str) -> None:
        self.nodes.append((text, True))
        self.html_parts.append(f"<pre>{escape(text, quote=False)}</pre>")

    def button(self, label: str) -> None:
        self.nodes.append((label, False))
        self.buttons.append((label.lower(), Clickable("button")))
        self.html_parts.append(f'<button class="btn" type="submit">{escape(label, quote=False)}</button>')

    def product_link(self, asin: str, url: str) -> None:
        self.nodes.append((asin, False))
        self.links.append((asin.lower(), Clickable("product")))
        self.html_parts.append(f'<a class="product-link" href="{escape(url)}">{escape(asin, quote=False)}</a>')

    def option(self, option_name: str, value: str, index: int) -> None:
        self.nodes.append((value, False))
        self.radios.append((value, Clickable("option", option_name)))
        ident = escape(f"radio_{option_name}{index}")
        self.html_parts.append(f'<input type="radio" id="{ident}" name="{escape(option_name)}" '
                               f'value="{escape(value)}"><label for="{ident}">{escape(value, quote=False)}</label>')

    def instruction_heading(self, label: str, instruction: str) -> None:
        """``<h4>label<br>instruction</h4>`` inside ``#instruction-text``: two nodes."""
        self.nodes.append((label, False))
        self.nodes.append((instruction, False))
        self.instruction = label + instruction
        self.html_parts.append(f'<div id="instruction-text"><h4>{escape(label, quote=False)}<br>'
                               f"{escape(instruction, quote=False)}</h4></div>")


def field_text(product: Mapping[str, Any], key: str) -> str:
    """``{{product.key}}``: the field as Jinja prints it, nothing when it is missing."""
    return jinja_text(product[key]) if key in product else ""


# the pages ---------------------------------------------------------------------------


def search_page(instruction: str) -> Page:
    """The start page: logo, instruction, search bar and its button."""
    page = Page("search", has_search_bar=True)
    page.text("WebShop", "h2")
    page.instruction_heading("Instruction: ", instruction)
    page.html_parts.append('<input id="search_input" type="text" name="search_query">')
    page.button(SEARCH_BUTTON)
    return page


def _top(page: Page, instruction: str) -> None:
    page.instruction_heading("Instruction:", instruction)
    page.button(BACK_TO_SEARCH)


def results_page(instruction: str, products: Iterable[Mapping[str, Any]], page_number: int, total: int,
                 item_url: Callable[[str], str]) -> Page:
    """Page ``page_number`` of a search: the products shown (at most :data:`PRODUCT_WINDOW`),
    ``total`` results in all; ``item_url(asin)`` is a product link's address."""
    page = Page("results")
    _top(page, instruction)
    page.text(f"Page {page_number} (Total results: {total})", "h3")
    if page_number > 1:
        page.button(PREV_PAGE)
    page.button(NEXT_PAGE)
    for product in products:
        asin = product["asin"]
        page.product_link(jinja_text(asin), item_url(asin))
        page.text(field_text(product, "Title"), "h4")
        page.text(field_text(product, "Price"), "h5")
    return page


def item_page(instruction: str, product: Mapping[str, Any], show_attrs: bool = False) -> Page:
    """A product: its options with their values, title, price, rating, the sub-page
    buttons and Buy Now."""
    page = Page("item")
    _top(page, instruction)
    page.button(PREV_PAGE)
    for option_name, values in (product.get("options") or {}).items():
        page.text(jinja_text(option_name), "h4")
        for index, value in enumerate(values):
            page.option(jinja_text(option_name), jinja_text(value), index)
    page.text(field_text(product, "Title"), "h2")
    page.text(f"Price: {field_text(product, 'Price')}", "h4")
    page.text(f"Rating: {field_text(product, 'Rating')}", "h4")
    for name in SUB_PAGES:
        if name != "Attributes" or show_attrs:
            page.button(name)
    page.button(END_BUTTON)
    return page


def sub_page(name: str, instruction: str, product: Mapping[str, Any]) -> Page:
    """One of :data:`SUB_PAGES` of a product."""
    if name not in SUB_PAGES:
        raise ValueError(f"no sub page {name!r}: the sub pages are {', '.join(SUB_PAGES)}")
    page = Page(name)
    _top(page, instruction)
    page.button(PREV_PAGE)
    if name == "Description":
        page.text(field_text(product, "Description"))
    elif name == "Features":
        for bullet in product.get("BulletPoints") or []:
            page.text(" " + jinja_text(bullet), "li")
    elif name == "Reviews":
        for review in product.get("Reviews") or []:
            page.text(f'"{field_text(review, "title")}"', "h4")
            page.text(field_text(review, "score"), "span")
            page.text(field_text(review, "body"))
    else:
        for attribute in product.get("Attributes") or []:
            page.text(" " + jinja_text(attribute), "li")
        for key in ("category", "query", "product_category"):
            page.text(field_text(product, key), "h5")
    return page


def tojson(value: Any) -> str:
    """Flask's ``tojson`` filter: sorted keys, ASCII, and ``< > & '`` as \\u escapes."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=True)
    return (text.replace("<", "\\u003c").replace(">", "\\u003e")
            .replace("&", "\\u0026").replace("'", "\\u0027"))


def done_page(asin: str, options: Mapping[str, str], reward: float) -> Page:
    """The page after Buy Now. The original's text env renders it without the MTurk
    code, the purchase's attributes, category, query or the goal, so those show as
    ``None`` or nothing; the "hidden" block is text like any other."""
    page = Page("done")
    page.text("Thank you for shopping with us!", "h1")
    page.text("Your code: ", "h3")
    page.pre("None")
    page.text(" (Paste it in your MTurk interface.)")
    page.text("Purchased", "h2")
    page.text("asin", "h4")
    page.pre(jinja_text(asin))
    page.text("options", "h4")
    page.pre(tojson(dict(options)))
    for label in ("attrs", "category", "query", "product category"):
        page.text(label, "h4")
        page.pre("None")
    page.text("Target", "h2")
    # the goal is not passed to the template: each of its fields prints as nothing
    for label in ("asin", "options", "attrs", "price upper", "instuction text", "category",
                  "product category", "query"):
        page.text(label, "h4")
    page.text("Goal ", "h4")
    page.pre(pprint.pformat(None))
    page.text("Reward", "h2")
    page.text("Your score (min 0.0, max 1.0)", "h3")
    page.pre(jinja_text(reward))
    page.text("Reward Details ", "h4")
    page.pre(pprint.pformat(None))
    return page
