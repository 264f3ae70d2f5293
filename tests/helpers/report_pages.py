"""The HTML report read as a file: its tags, its <script> blocks and the trajectory
chunks and episode index they carry (tests of the report, the compare view and the trend
page read pages with these)."""

from __future__ import annotations

import base64
import gzip
import json
from html.parser import HTMLParser


class PageParser(HTMLParser):
    """Collects start tags (with attributes) and the text inside each <script>."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[tuple[dict[str, str | None], str]] = []
        self._script: dict[str, str | None] | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag == "script":
            self._script, self._text = dict(attrs), []

    def handle_data(self, data):
        if self._script is not None:
            self._text.append(data)

    def handle_endtag(self, tag):
        if tag == "script" and self._script is not None:
            self.scripts.append((self._script, "".join(self._text)))
            self._script = None


def parse(html: str) -> PageParser:
    parser = PageParser()
    parser.feed(html)
    parser.close()
    return parser


def chunk_texts(page: PageParser) -> list[tuple[str, str]]:
    return [(attrs["data-encoding"], text) for attrs, text in page.scripts
            if "trajectory-chunk" in (attrs.get("class") or "")]


def decode_chunk(encoding: str, text: str) -> list[dict]:
    if encoding == "gzip-base64":
        text = gzip.decompress(base64.b64decode(text)).decode("utf-8")
    return json.loads(text)


def index_of(html: str) -> list[dict]:
    (text,) = [t for attrs, t in parse(html).scripts if attrs.get("id") == "episode-index"]
    return json.loads(text)
