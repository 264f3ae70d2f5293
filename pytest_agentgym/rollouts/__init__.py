"""The GRPO rollout service: ``pytest-agentgym rollout-server``.

A trainer posts a batch (environment, task ids, model endpoint, n samples per
id, sampling, seed) and gets one scored conversation per rollout, played by the
same engine, adapters and prompts as a pytest run (docs/training.md).

    node      what the service takes from a node profile
    request   a POST /rollouts body, checked (HTTP 400 when wrong)
    endpoint  the batch's model endpoint: its /v1 base URL, is it answering
    access    where the service's API key may go (the key allow-list), caller tokens
    answer    one finished rollout as the service answers it
    service   run directory, servers, one engine per endpoint; knows no HTTP
    jobs      batches answered later (POST ?async=1, GET /rollouts/{id})
    app       the HTTP routes (FastAPI)
"""
