"""How vLLM is started: the node profile's ``vllm:`` section as :class:`VLLMOptions`.

Read with the rest of the profile (:class:`~pytest_agentgym.model.endpoint_settings.ModelSettings`)
and fitted to a checkpoint (:func:`~pytest_agentgym.model.checkpoint.fit_max_model_len`)
before :class:`~pytest_agentgym.model.vllm.VLLMServer` turns it into a command line.
No process here.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, fields
from typing import Any, Mapping

from pytest_agentgym.model.call_settings import reject_unknown_keys
from pytest_agentgym.process import variables

__all__ = ["DTYPES", "LOGPROBS_MODES", "VLLMOptions", "VLLM_PYTHON_ENV"]

#: environment variable naming the python interpreter that has vLLM installed
VLLM_PYTHON_ENV = "AGENTGYM_VLLM_PYTHON"
#: ``--dtype`` values vLLM 0.32 takes (``ModelDType``), each with the name it is served as
DTYPES = {"auto": "auto", "half": "float16", "float16": "float16", "bfloat16": "bfloat16",
          "float": "float32", "float32": "float32"}
#: ``--logprobs-mode`` values vLLM 0.32 takes (``LogprobsMode``); raw_logprobs is its default:
#: the model's distribution before temperature, top-p and the other logit processors
LOGPROBS_MODES = ("raw_logprobs", "processed_logprobs", "raw_logits", "processed_logits")
#: flags the launcher sets from a key of its own, and records: not taken in ``extra_args``
KEYED_FLAGS = {"--dtype": "dtype", "--logprobs-mode": "logprobs_mode"}


@dataclass(frozen=True)
class VLLMOptions:
    """How vLLM is started. ``None`` leaves vLLM's own default in place, but for
    ``dtype`` (None or auto: the checkpoint's own) and ``logprobs_mode`` (always
    passed, vLLM 0.32's default unless set, so that a run records it).

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
    #: None or auto: the checkpoint's own (:func:`~pytest_agentgym.model.vllm_dtype.fit_dtype`)
    dtype: str | None = None
    logprobs_mode: str = "raw_logprobs"
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
        if values.get("logprobs_mode", "") is None:  # null: vLLM's default
            values.pop("logprobs_mode")
        if values.get("env") is not None:
            values["env"] = {str(k): str(v) for k, v in dict(values["env"]).items()}
        else:
            values.pop("env", None)
        return cls(**values)

    def __post_init__(self) -> None:
        if self.dtype is not None and str(self.dtype).lower() not in DTYPES:
            raise ValueError(f"vllm.dtype {self.dtype!r} is not one vLLM takes; write one of "
                             f"{', '.join(DTYPES)} (auto: the checkpoint's own)")
        if self.logprobs_mode not in LOGPROBS_MODES:
            raise ValueError(f"vllm.logprobs_mode {self.logprobs_mode!r} is not one vLLM takes; write one of "
                             f"{', '.join(LOGPROBS_MODES)} (raw_logprobs: vLLM's default)")
        for arg in self.extra_args:
            flag = str(arg).partition("=")[0].replace("_", "-")
            if flag in KEYED_FLAGS:
                raise ValueError(f"vllm.extra_args has {flag}: set vllm.{KEYED_FLAGS[flag]} instead, so the "
                                 f"run header and run.json record what vLLM was given")

    def interpreter(self) -> str:
        return self.python or variables.value(VLLM_PYTHON_ENV) or sys.executable
