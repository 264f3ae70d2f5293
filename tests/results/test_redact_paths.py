"""Secrets in a URL's path (results/redact.py, ``secret_segments``): the webhook shapes
of chat services and token-looking segments are hidden, ordinary paths are kept.
The whole-run check (a real run notifying Slack-, Discord- and Mattermost-shaped URLs)
is tests/publish/test_webhook_path_secrets.py."""

from __future__ import annotations

import json
import shlex

import pytest

from pytest_agentgym.results.redact import redact_text, redact_url


@pytest.mark.parametrize("url, shown", [
    # Slack: the host's whole path after its first segment
    ("https://hooks.slack.com/services/T0001/B0002/Xk9TqLm2Rv7WpZs4Nb8YcH3d",
     "https://hooks.slack.com/services/***/***/***"),
    ("https://HOOKS.SLACK.COM:443/workflows/T1/A2/345/abc", "https://HOOKS.SLACK.COM:443/workflows/***/***/***/***"),
    # Discord (and its old host): what follows /webhooks/
    ("https://discord.com/api/webhooks/123456789012345678/dScT0k3n-abc_DEFghiJ",
     "https://discord.com/api/webhooks/***/***"),
    ("https://discordapp.com/api/v10/webhooks/1/t?wait=true", "https://discordapp.com/api/v10/webhooks/***/***?wait=true"),
    # Microsoft Teams' connectors, Power Automate's workflows (sig is a query secret; the id looks like a token)
    ("https://acme.webhook.office.com/webhookb2/9f8e-7d@1a2b-3c/IncomingWebhook/0a1b2c/4d5e",
     "https://acme.webhook.office.com/webhookb2/***/***/***/***"),
    ("https://prod-12.westus.logic.azure.com:443/workflows/9f86d081884c7d659a2feaa0c55ad015/triggers/manual/paths/"
     "invoke?api-version=2016-06-01&sp=%2Ftriggers%2Fmanual%2Frun&sv=1.0&sig=s3cretSig",
     "https://prod-12.westus.logic.azure.com:443/workflows/***/triggers/manual/paths/"
     "invoke?api-version=2016-06-01&sp=%2Ftriggers%2Fmanual%2Frun&sv=1.0&sig=***"),
    # Google Chat: key and token are query secrets already
    ("https://chat.googleapis.com/v1/spaces/AAAAxyz/messages?key=k3y&token=t0k",
     "https://chat.googleapis.com/v1/spaces/AAAAxyz/messages?key=***&token=***"),
    # Mattermost (any host): what follows /hooks/
    ("https://mm.example.org/hooks/mm7hookid3abcdefghijk12345", "https://mm.example.org/hooks/***"),
    ("http://127.0.0.1:8065/Hooks/abc/", "http://127.0.0.1:8065/Hooks/***/"),
    # a token-looking segment anywhere (Telegram's bot token)
    ("https://api.telegram.org/bot123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw/sendMessage",
     "https://api.telegram.org/***/sendMessage"),
    # user info, path and query together
    ("https://u:p@hooks.slack.com/services/T/B/S?token=t", "https://***@hooks.slack.com/services/***/***/***?token=***"),
])
def test_webhook_paths_are_hidden(url, shown):
    assert redact_url(url) == shown


@pytest.mark.parametrize("url", [
    "http://127.0.0.1:8000/v1",
    "https://hooks.example.org/agentgym",
    "https://huggingface.co/Qwen/Qwen2.5-7B-Instruct",
    "https://h.example/models/meta-llama-3-8b-instruct-awq-int4/v1",
    "https://h.example/runs/step-1200/checkpoint-12000",
    "https://h.example/XXXXXXXXXXXXXXXXXXXXXXXX",  # a placeholder, not a token: no digit
    "https://h.example/hooks",  # the marker alone: nothing after it
    "https://h.example/v1/chat/completions",
    "https://h.example/123e4567-e89b-12d3-a456-426614174000",  # a UUID's pieces are short runs
])
def test_ordinary_paths_are_kept(url):
    assert redact_url(url) == url


def test_path_secrets_are_hidden_in_text_shell_and_json():
    hook = "https://hooks.slack.com/services/T0001/B0002/Xk9TqLm2Rv7WpZs4Nb8YcH3d"
    command = shlex.join(["pytest", f"--agentgym-notify={hook},https://discord.com/api/webhooks/1/tok3n"])
    assert shlex.split(redact_text(command)) == [
        "pytest", "--agentgym-notify=https://hooks.slack.com/services/***/***/***,https://discord.com/api/webhooks/***/***"]
    text = redact_text(json.dumps({"note": f"notify {hook} not delivered"}))
    assert json.loads(text) == {"note": "notify https://hooks.slack.com/services/***/***/*** not delivered"}
