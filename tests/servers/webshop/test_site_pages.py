"""The WebShop pages as AgentGym's text env shows them (pages.py).

Expected texts are written from the original's templates
(agentenv-webshop/webshop/web_agent_site/templates/*.html), the text env's
``convert_html_to_text(simple=True)`` and ``get_available_actions``
(envs/web_agent_text_env.py); each test says which template facts it relies on.
They were also checked once against the original code itself (run with Flask 2.1.2
and BeautifulSoup 4.11.1, its search engine and goal code stubbed), on the same
kinds of products.
"""

from __future__ import annotations

from html.parser import HTMLParser

import pytest

from helpers.webshop_shop import product
from pytest_agentgym.servers.embedded.webshop import pages

INSTRUCTION = "i need a sulfate free shampoo, and price lower than 40.00 dollars"


# parse_action and the white-space rule ------------------------------------------------


@pytest.mark.parametrize("action, expected", [
    ("search[red shoes]", ("search", "red shoes")),
    ("click[Buy Now]", ("click", "Buy Now")),
    ("click[buy now] please", ("click", "buy now")),   # match at the start; text after "]" ignored
    ("search[a [b] c]", ("search[a ", "b] c")),         # greedy: the name takes up to the last "["
    ("search[]", ("search[]", None)),                   # (.+) needs one character
    ("think about it", ("think about it", None)),
])
def test_parse_action_follows_the_originals_regex(action, expected):
    assert pages.parse_action(action) == expected


@pytest.mark.parametrize("node, pre, expected", [
    ("", False, None),            # an empty value makes no node
    ("\n      ", False, None),    # BeautifulSoup collapses it to "\n", which the text env drops
    ("   ", False, ""),           # collapses to " ": kept, stripped to ""
    (" \xa0", False, ""),         # not only ASCII space: kept, stripped
    ("  a b  ", False, "a b"),
    ("\n", True, None),           # inside <pre> nothing collapses, but "\n" is still dropped
    (" \n", True, ""),
])
def test_visible_follows_beautifulsoup_and_the_text_env(node, pre, expected):
    assert pages.visible(node, pre) == expected


# the pages ---------------------------------------------------------------------------


def test_search_page():
    # search_page.html: <h2>WebShop</h2>, <h4>Instruction: <br>{{ instruction_text }}</h4>,
    # <input id="search_input">, <button class="btn ...">Search</button>
    page = pages.search_page(INSTRUCTION)
    assert page.observation == f"WebShop [SEP] Instruction: [SEP] {INSTRUCTION} [SEP] Search"
    assert page.available_actions() == {"has_search_bar": True, "clickables": ["search"]}
    assert page.instruction == f"Instruction: {INSTRUCTION}"  # h4.text keeps the space


def results(page_number: int, items: list[dict], total: int) -> pages.Page:
    return pages.results_page(INSTRUCTION, items, page_number, total, lambda asin: f"/item/{asin}")


def test_results_page_one():
    # results_page.html: instruction h4 "Instruction:<br>..." (no space), Back to Search button,
    # <h3>Page N (Total results: T)</h3>, "< Prev" only when page > 1, "Next >" always, then per
    # product <a class="product-link">asin</a>, the title, the price (the commented-out category,
    # query and product category are not text)
    items = [product("B000AAAAA1", "Red Shoe", price="$3.5"), product("B000AAAAA2", "Blue & <Big> Shoe")]
    page = results(1, items, 23)
    assert page.observation == (
        f"Instruction: [SEP] {INSTRUCTION} [SEP] Back to Search [SEP] Page 1 (Total results: 23) [SEP] Next > "
        "[SEP] B000AAAAA1 [SEP] Red Shoe [SEP] $3.5 [SEP] B000AAAAA2 [SEP] Blue & <Big> Shoe [SEP] $10.0")
    assert page.available_actions() == {
        "has_search_bar": False, "clickables": ["back to search", "next >", "b000aaaaa1", "b000aaaaa2"]}
    assert page.instruction == f"Instruction:{INSTRUCTION}"


def test_results_page_two_has_prev_and_an_empty_page_has_no_products():
    page = results(3, [], 23)
    assert page.observation == (f"Instruction: [SEP] {INSTRUCTION} [SEP] Back to Search [SEP] "
                                "Page 3 (Total results: 23) [SEP] < Prev [SEP] Next >")
    assert page.available_actions()["clickables"] == ["back to search", "< prev", "next >"]


def test_item_page_lists_options_then_title_price_rating_and_buttons():
    # item_page.html: Back to Search, < Prev; per option <h4>name</h4> then per value a radio
    # (value=...) and <label>value</label>; <h2>Title</h2>, "Price: ...", "Rating: ...";
    # Description/Features/Reviews buttons (Attributes only with show_attrs, never in AgentGym),
    # Buy Now. Clickables: the .btn buttons, then the radios' values (not lower-cased)
    item = product("B000AAAAA1", "Red Shoe", price="$3.5 to $4.0",
                   options={"color": ["red", "dark blue"], "size": ["9", "10"]})
    page = pages.item_page(INSTRUCTION, item)
    assert page.observation == (
        f"Instruction: [SEP] {INSTRUCTION} [SEP] Back to Search [SEP] < Prev [SEP] color [SEP] red [SEP] "
        "dark blue [SEP] size [SEP] 9 [SEP] 10 [SEP] Red Shoe [SEP] Price: $3.5 to $4.0 [SEP] Rating: N.A. "
        "[SEP] Description [SEP] Features [SEP] Reviews [SEP] Buy Now")
    assert page.available_actions()["clickables"] == [
        "back to search", "< prev", "description", "features", "reviews", "buy now", "red", "dark blue", "9", "10"]
    assert "attributes" in pages.item_page(INSTRUCTION, item, show_attrs=True).clickables


def test_item_page_clickables_are_a_dict_later_radio_wins_first_place_kept():
    # text_to_clickable is a dict: a value under two options, or equal to a button's text,
    # keeps its first place and names the last element
    item = product("B000AAAAA1", "Shoe", options={"color": ["blue", "reviews"], "fit": ["blue"]})
    page = pages.item_page(INSTRUCTION, item)
    assert page.available_actions()["clickables"] == [
        "back to search", "< prev", "description", "features", "reviews", "buy now", "blue"]
    assert page.clickables["blue"] == pages.Clickable("option", "fit")
    assert page.clickables["reviews"] == pages.Clickable("option", "color")


def test_sub_pages():
    # description_page.html: <p>{{Description}}</p>; features_page.html: <li><p> {{bullet}}</p></li>
    # (an empty bullet is " ": an empty part); review_page.html: "title" in quotes, score, body;
    # all three: Back to Search, < Prev
    item = product("B000AAAAA1", "Shoe", description="Soft.\nLight.", bullets=["one", "", "\n"])
    item["Reviews"] = [{"title": "Great", "score": 5, "body": "Fits well"}]
    head = f"Instruction: [SEP] {INSTRUCTION} [SEP] Back to Search [SEP] < Prev"
    assert pages.sub_page("Description", INSTRUCTION, item).observation == head + " [SEP] Soft.\nLight."
    assert pages.sub_page("Features", INSTRUCTION, item).observation == head + " [SEP] one [SEP] "
    assert pages.sub_page("Reviews", INSTRUCTION, item).observation == head + ' [SEP] "Great" [SEP] 5 [SEP] Fits well'
    empty = pages.sub_page("Description", INSTRUCTION, product("B000AAAAA2", "Shoe", description=""))
    assert empty.observation == head
    assert empty.available_actions() == {"has_search_bar": False, "clickables": ["back to search", "< prev"]}


def test_done_page():
    # done_page.html rendered by the text env without mturk_code, purchased_attrs, category,
    # query, product_category or goal: those print "None" (or nothing for goal.*); options
    # through Flask's tojson (sorted keys, <>&' escaped); the display:none block is text too
    page = pages.done_page("B000AAAAA1", {"size": "9", "color": "red & <blue>"}, 0.5)
    assert page.observation == (
        "Thank you for shopping with us! [SEP] Your code: [SEP] None [SEP] (Paste it in your MTurk interface.) "
        "[SEP] Purchased [SEP] asin [SEP] B000AAAAA1 [SEP] options [SEP] "
        '{"color": "red \\u0026 \\u003cblue\\u003e", "size": "9"} [SEP] attrs [SEP] None [SEP] category [SEP] '
        "None [SEP] query [SEP] None [SEP] product category [SEP] None [SEP] Target [SEP] asin [SEP] options "
        "[SEP] attrs [SEP] price upper [SEP] instuction text [SEP] category [SEP] product category [SEP] query "
        "[SEP] Goal [SEP] None [SEP] Reward [SEP] Your score (min 0.0, max 1.0) [SEP] 0.5 [SEP] "
        "Reward Details [SEP] None")
    assert page.available_actions() == {"has_search_bar": False, "clickables": []}
    assert page.instruction is None


# our HTML says the same as the text ----------------------------------------------------


VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class OriginalReading(HTMLParser):
    """What the original's text env reads from a page's HTML, by BeautifulSoup's rules:
    text nodes (white-space-only ones collapsed outside <pre>), .btn and .product-link
    texts, radio values, the #instruction-text h4 text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.nodes: list[tuple[str, bool]] = []
        self.buttons: list[str] = []
        self.links: list[str] = []
        self.radios: list[str] = []
        self.search_bar = False
        self.heading: str | None = None
        self._capture: list[str] | None = None
        self._classes: list[list[str]] = []
        self._ids: list[str | None] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        classes = (attrs.get("class") or "").split()
        if tag == "input":
            if attrs.get("id") == "search_input":
                self.search_bar = True
            if attrs.get("type") == "radio":
                self.radios.append(attrs.get("value", ""))
            return
        if tag in VOID:
            return
        self.stack.append(tag)
        self._classes.append(classes)
        self._ids.append(attrs.get("id"))
        if "btn" in classes or "product-link" in classes:
            self._capture = []

    def handle_endtag(self, tag):
        if tag not in self.stack:  # BeautifulSoup ignores an end tag with no open element
            return
        while self.stack:  # and closes every element opened inside the one it ends
            closed = self.stack.pop()
            classes = self._classes.pop()
            self._ids.pop()
            if self._capture is not None and ("btn" in classes or "product-link" in classes):
                (self.buttons if "btn" in classes else self.links).append("".join(self._capture).lower())
                self._capture = None
            if closed == tag:
                return

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag not in VOID:
            self.handle_endtag(tag)

    def handle_data(self, data):
        if set(self.stack) & {"head", "title", "script", "style"}:
            return
        pre = "pre" in self.stack
        self.nodes.append((data, pre))
        if self._capture is not None:
            self._capture.append(data)
        if "instruction-text" in self._ids and "h4" in self.stack:
            self.heading = (self.heading or "") + data


def read_like_the_original(html: str) -> dict:
    reader = OriginalReading()
    reader.feed(html)
    clickables: dict[str, None] = {}
    for key in reader.buttons + reader.links + reader.radios:
        clickables[key] = None
    texts = (pages.visible(text, pre) for text, pre in reader.nodes)
    return {"observation": " [SEP] ".join(t for t in texts if t is not None),
            "actions": {"has_search_bar": reader.search_bar, "clickables": list(clickables)},
            "instruction": reader.heading}


@pytest.mark.parametrize("make", [
    lambda: pages.search_page(INSTRUCTION),
    lambda: results(2, [product("B000AAAAA1", "Red & <b>Shoe</b>")], 12),
    lambda: pages.item_page(INSTRUCTION, product("B000AAAAA1", "Shoe", options={"color": ["a \"q\"", "b"]})),
    lambda: pages.sub_page("Features", INSTRUCTION, product("B000AAAAA1", "Shoe", bullets=["x", " "])),
    lambda: pages.done_page("B000AAAAA1", {"color": "red"}, 1.0),
], ids=["search", "results", "item", "features", "done"])
def test_our_html_reads_as_the_same_page(make):
    """/state's html is ours, not the original's template; read the original's way
    it gives the page's observation, clickables and instruction heading."""
    page = make()
    read = read_like_the_original(page.html)
    assert read["observation"] == page.observation
    assert read["actions"] == page.available_actions()
    assert read["instruction"] == page.instruction
