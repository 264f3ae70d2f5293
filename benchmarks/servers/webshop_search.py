"""WebShop search: our BM25 engine against the original's pyserini LuceneSearcher, on the
same documents and queries: ranking agreement and weight.

    python benchmarks/servers/webshop_search.py --pyserini-python /work/venv-pyserini/bin/python \
        [--data DIR] [--max-queries N] [--queries-file FILE] [--json OUT]

The products are ``catalogue.load_shop(DIR).products`` (no ``--data``: the shop the server
serves, i.e. ``AGENTENV_WEBSHOP_DATA`` or the project catalogue). The collection is written
as the original's ``search_engine/convert_product_file_format.py`` writes it
(``{"id", "contents", "product"}`` per line; the text rule restated here, not taken from
search.py) and indexed as its ``run_indexing.sh`` does (``python -m pyserini.index.lucene
--collection JsonCollection --generator DefaultLuceneDocumentGenerator --threads 1
--storePositions --storeDocvectors --storeRaw``). Each query goes to both engines, lower-cased
as the original's text env does, and both keep 50 hits; pyserini's ASINs are read as the
original reads them (``json.loads(searcher.doc(hit.docid).raw())['id']``).

Queries (all distinct): every goal's instruction text; the same without its trailing price
condition and leading "find me"; every product's Title; every product's ``query``; with
``--queries-file FILE``, also the lines of FILE (e.g. people's goals and search queries).
Agreement: identical top-50 lists, same top-1, mean top-10 overlap, mean Kendall tau over
the ASINs both top-50 lists hold, and the largest score difference on those ASINs (pyserini
rounds its scores to 4 decimals after ranking: up to 5e-05).
Weight, each engine in a process of its own: import time, index time (pyserini: the
indexing command, a JVM of its own), time to open the index, per-query latency (median,
p95), the process's peak RSS after its queries, and the installed size of the packages.

pyserini is not a dependency of this project: it needs a virtual environment of its own
and Java 11+ (``JAVA_HOME`` or ``java`` on PATH). What worked here (Python 3.11, Java 17)::

    python3.11 -m venv /work/venv-pyserini
    /work/venv-pyserini/bin/pip install --no-deps pyserini==0.17.0
    /work/venv-pyserini/bin/pip install pyjnius numpy pandas tqdm Cython scikit-learn scipy \
        transformers sentencepiece onnxruntime lightgbm faiss-cpu torch

(``--no-deps``: its nmslib pin does not build on Python 3.11, and neither nmslib nor spaCy
is imported by ``pyserini.search.lucene``; ``pyserini.search`` does import faiss, torch,
transformers, scikit-learn and onnxruntime.) Without ``--pyserini-python`` only our
engine's weight is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
K = 50

#: sizes of the installed distributions (their RECORD files) and of the Python process
_WEIGHT_HELPERS = r'''
import importlib.metadata as md, os, resource, sys
def dist_size(names=None):
    total = 0
    seen = set()
    for dist in md.distributions():
        name = (dist.metadata["Name"] or "").lower().replace("_", "-")
        if name in seen or (names is not None and name not in names):
            continue
        seen.add(name)
        for f in dist.files or []:
            try:
                total += os.path.getsize(dist.locate_file(f))
            except OSError:
                pass
    return total
def peak_rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
'''

#: runs under the pyserini interpreter: argv = collection dir, index dir, queries file, out file
PYSERINI_CHILD = _WEIGHT_HELPERS + r'''
import json, subprocess, time, shutil
coll, index, queries_file, out = sys.argv[1:5]
started = time.perf_counter()
subprocess.run([sys.executable, "-m", "pyserini.index.lucene", "--collection", "JsonCollection",
                "--input", coll, "--index", index, "--generator", "DefaultLuceneDocumentGenerator",
                "--threads", "1", "--storePositions", "--storeDocvectors", "--storeRaw"],
               check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
index_s = time.perf_counter() - started
started = time.perf_counter()
from pyserini.search.lucene import LuceneSearcher
import_s = time.perf_counter() - started
started = time.perf_counter()
searcher = LuceneSearcher(index)
open_s = time.perf_counter() - started
results, latencies = [], []
for query in json.load(open(queries_file)):
    started = time.perf_counter()
    hits = searcher.search(query, k=%d)
    asins = [json.loads(searcher.doc(hit.docid).raw())["id"] for hit in hits]
    latencies.append(time.perf_counter() - started)
    results.append([[asin, hit.score] for asin, hit in zip(asins, hits)])
java = shutil.which("java")
java_home = os.environ.get("JAVA_HOME") or (os.path.dirname(os.path.dirname(os.path.realpath(java))) if java else "")
jvm_bytes = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(java_home) for f in fs
                if not os.path.islink(os.path.join(d, f))) if java_home else 0
json.dump({"results": results, "latencies": latencies, "index_s": index_s, "import_s": import_s,
           "open_s": open_s, "peak_rss_mib": peak_rss_mib(), "install_bytes": dist_size(),
           "package_bytes": dist_size({"pyserini"}), "jvm_bytes": jvm_bytes,
           "version": md.version("pyserini")}, open(out, "w"))
''' % K

#: runs under this project's interpreter: argv = products file, queries file, out file
OURS_CHILD = _WEIGHT_HELPERS + r'''
import json, time
products_file, queries_file, out = sys.argv[1:4]
products = json.load(open(products_file))
started = time.perf_counter()
from pytest_agentgym.servers.embedded.webshop.search import SearchIndex, analyze
analyze("warm up the imports")
import_s = time.perf_counter() - started
started = time.perf_counter()
index = SearchIndex.build(products)
index_s = time.perf_counter() - started
results, latencies = [], []
for query in json.load(open(queries_file)):
    started = time.perf_counter()
    hits = index.scored(query, k=%d)
    latencies.append(time.perf_counter() - started)
    results.append([[asin, score] for asin, score in hits])
json.dump({"results": results, "latencies": latencies, "index_s": index_s, "import_s": import_s,
           "open_s": 0.0, "peak_rss_mib": peak_rss_mib(),
           "package_bytes": dist_size({"regex", "nltk", "joblib", "defusedxml", "click", "tqdm"}),
           "install_bytes": dist_size({"regex", "nltk", "joblib", "defusedxml", "click", "tqdm",
                                       "numpy"})}, open(out, "w"))
''' % K


def collection_line(product: dict[str, Any]) -> str:
    """One line of the original's documents.jsonl for a product."""
    option_texts = []
    for name, values in product.get("options", {}).items():
        option_texts.append(f"{name}: {', '.join(values)}")
    contents = " ".join([product["Title"], product["Description"], product["BulletPoints"][0],
                         ", and ".join(option_texts)]).lower()
    return json.dumps({"id": product["asin"], "contents": contents, "product": product})


def queries_of(shop: Any) -> dict[str, list[str]]:
    """The query sets, lower-cased and distinct within each set."""
    def distinct(texts: list[str]) -> list[str]:
        return list(dict.fromkeys(t.lower().strip() for t in texts if t and t.strip()))

    instructions = [g["instruction_text"] for g in shop.goals if g.get("instruction_text")]
    short = []
    for text in instructions:
        text = text.split(", and price lower than")[0]
        short.append(text[len("find me "):] if text.lower().startswith("find me ") else text)
    return {
        "instructions": distinct(instructions),
        "instructions without price": distinct(short),
        "titles": distinct([p["Title"] for p in shop.products]),
        "product queries": distinct([p.get("query", "") for p in shop.products]),
    }


def kendall_tau(first: list[str], second: list[str]) -> float | None:
    """Kendall's tau of two rankings over the items both hold (None when fewer than 2)."""
    common = [item for item in first if item in set(second)]
    if len(common) < 2:
        return None
    where = {item: n for n, item in enumerate(second)}
    ranks = [where[item] for item in common]
    concordant = discordant = 0
    for i in range(len(ranks)):
        for j in range(i + 1, len(ranks)):
            if ranks[i] < ranks[j]:
                concordant += 1
            else:
                discordant += 1
    return (concordant - discordant) / (concordant + discordant)


def agreement(ours: list[list], theirs: list[list]) -> dict[str, float]:
    identical = top1 = 0
    overlaps, taus, score_diff = [], [], 0.0
    for mine, ref in zip(ours, theirs):
        a = [asin for asin, _ in mine]
        r = [asin for asin, _ in ref]
        identical += a == r
        top1 += a[:1] == r[:1]
        if r:
            overlaps.append(len(set(a[:10]) & set(r[:10])) / min(10, len(r)))
        else:
            overlaps.append(1.0 if not a else 0.0)
        tau = kendall_tau(r, a)
        if tau is not None:
            taus.append(tau)
        ref_scores = dict(map(tuple, ref))
        for asin, score in mine:
            if asin in ref_scores:
                score_diff = max(score_diff, abs(score - ref_scores[asin]))
    n = len(ours)
    return {"queries": n, "identical_top50": identical / n, "top1": top1 / n,
            "top10_overlap": statistics.fmean(overlaps), "kendall_tau_top50": statistics.fmean(taus) if taus else 1.0,
            "max_score_diff": score_diff}


def run_child(python: str, code: str, args: list[str], env: dict[str, str]) -> dict[str, Any]:
    out = args[-1]
    done = subprocess.run([python, "-c", code, *args], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{python} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(Path(out).read_text())


def weight_lines(name: str, r: dict[str, Any]) -> list[str]:
    lat = sorted(r["latencies"])
    p95 = lat[min(len(lat) - 1, int(0.95 * len(lat)))] if lat else 0.0
    lines = [f"{name}: import {r['import_s']:.2f} s, index {r['index_s']:.2f} s, open {r['open_s']:.2f} s, "
             f"query median {1000 * statistics.median(lat):.2f} ms, p95 {1000 * p95:.2f} ms, "
             f"peak RSS {r['peak_rss_mib']:.0f} MiB",
             f"  installed: packages {r['package_bytes'] / 2**20:.1f} MiB, "
             f"with what they need {r['install_bytes'] / 2**20:.0f} MiB"]
    if "jvm_bytes" in r:
        lines[-1] += f", plus the JVM {r['jvm_bytes'] / 2**20:.0f} MiB"
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pyserini-python", help="a Python with pyserini 0.17.0 (see the module doc)")
    parser.add_argument("--data", help="a WebShop data directory (default: the shop the server serves)")
    parser.add_argument("--max-queries", type=int, default=0, help="queries per set (0: all)")
    parser.add_argument("--queries-file", help="one more query set: a text file, one query a line")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()

    from pytest_agentgym.servers.embedded.webshop.catalogue import load_shop

    shop = load_shop(args.data)
    sets = queries_of(shop)
    if args.queries_file:
        lines = Path(args.queries_file).read_text(encoding="utf-8").splitlines()
        sets[Path(args.queries_file).name] = list(dict.fromkeys(q.lower().strip() for q in lines if q.strip()))
    if args.max_queries:
        sets = {name: qs[:args.max_queries] for name, qs in sets.items()}
    queries = [q for qs in sets.values() for q in qs]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    work = Path(tempfile.mkdtemp(prefix="webshop-search-"))
    try:
        (work / "products.json").write_text(json.dumps(shop.products))
        (work / "queries.json").write_text(json.dumps(queries))
        (work / "collection").mkdir()
        (work / "collection" / "documents.jsonl").write_text(
            "".join(collection_line(p) + "\n" for p in shop.products))
        ours = run_child(sys.executable, OURS_CHILD,
                         [str(work / "products.json"), str(work / "queries.json"), str(work / "ours.json")], env)
        figures: dict[str, Any] = {"products": len(shop.products), "source": shop.source,
                                   "queries": {name: len(qs) for name, qs in sets.items()}}
        print(f"{len(shop.products)} products ({shop.source}), {len(queries)} queries "
              f"({', '.join(f'{name}: {len(qs)}' for name, qs in sets.items())})")
        if args.pyserini_python:
            theirs = run_child(args.pyserini_python, PYSERINI_CHILD,
                               [str(work / "collection"), str(work / "index"), str(work / "queries.json"),
                                str(work / "pyserini.json")], env)
            figures["agreement"] = {}
            parts, start = {}, 0
            for name, qs in sets.items():
                parts[name] = slice(start, start + len(qs))
                start += len(qs)
            parts["all"] = slice(0, len(queries))
            for name, part in parts.items():
                figures["agreement"][name] = agreement(ours["results"][part], theirs["results"][part])
                a = figures["agreement"][name]
                print(f"{name}: {a['queries']} queries, identical top-50 {100 * a['identical_top50']:.1f}%, "
                      f"top-1 {100 * a['top1']:.1f}%, top-10 overlap {100 * a['top10_overlap']:.1f}%, "
                      f"Kendall tau {a['kendall_tau_top50']:.4f}, max score difference {a['max_score_diff']:.2g}")
            print("(pyserini's scores are rounded to 4 decimals by Anserini's ScoreTiesAdjusterReranker, "
                  "hence a score difference up to 5e-05)")
            for line in weight_lines(f"pyserini {theirs['version']}", theirs):
                print(line)
            figures["pyserini"] = {k: v for k, v in theirs.items() if k not in ("results", "latencies")}
        for line in weight_lines("ours (regex + nltk + numpy)", ours):
            print(line)
        figures["ours"] = {k: v for k, v in ours.items() if k not in ("results", "latencies")}
        if args.json:
            Path(args.json).write_text(json.dumps(figures, indent=1))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
