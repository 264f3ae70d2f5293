"""How vLLM is started: the node profile's ``vllm:`` section as :class:`VLLMOptions`.

Read with the rest of the profile (:class:`~pytest_agentgym.model.endpoint_settings.ModelSettings`)
and fitted to a checkpoint (:func:`~pytest_agentgym.model.checkpoint.fit_max_model_len`)
before :class:`~pytest_agentgym.model.vllm.VLLMServer` turns it into a command line.
No process here.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field, fields
from typing import Any, Mapping

from pytest_agentgym.model.call_settings import reject_unknown_keys

__all__ = ["VLLMOptions", "VLLM_PYTHON_ENV"]

#: environment variable naming the python interpreter that has vLLM installed
VLLM_PYTHON_ENV = "AGENTGYM_VLLM_PYTHON"


@dataclass(frozen=True)
class VLLMOptions:
    """How vLLM is started. ``None`` leaves vLLM's own default in place.

    The node profile's ``vllm:`` section maps onto these fields one to one
    (see docs/model.md).
    """

    python: str | None = None
    served_model_name: str | None = None
    host: str = "127.0.0.1"
    port: int | None = None
    max_model_len: int | None = None
    gpu_memory_utilization: float | None = None
    tensor_parallel_size: int | None = None
    data_parallel_size: int | None = None
    seed: int | None = None
    dtype: str | None = None
    enforce_eager: bool = False
    startup_timeout: float = 900.0
    extra_args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None, *, where: str = "vllm") -> "VLLMOptions":
        """Build from a profile's ``vllm:`` mapping; unknown keys are an error."""
        if data is None:
            return cls()
        if not isinstance(data, Mapping):
            raise ValueError(f"{where} must be a mapping of vLLM options, not {type(data).__name__}")
        reject_unknown_keys(data, (f.name for f in fields(cls)), where,
                            hint=" (pass other vLLM flags in extra_args)")
        values = dict(data)
        extra = values.get("extra_args")
        if isinstance(extra, str):
            values["extra_args"] = tuple(extra.split())
        elif extra is not None:
            values["extra_args"] = tuple(str(a) for a in extra)
        if values.get("env") is not None:
            values["env"] = {str(k): str(v) for k, v in dict(values["env"]).items()}
        else:
            values.pop("env", None)
        return cls(**values)

    def interpreter(self) -> str:
        return self.python or os.environ.get(VLLM_PYTHON_ENV) or sys.executable
