"""Models users bring, built from configs (no weights), with closed-form FLOP counts to check imports against.

Factories for Hugging Face ``transformers`` models (GPT-2, BERT, Llama, T5, ViT, MobileNetV2,
ConvNeXt) at their real sizes and at small test sizes, and closed-form forward FLOPs for the
transformer families computed from the config alone (2 FLOPs per multiply-add; matrix products and
attention only, as the importer's counter; causal masks not discounted):

GPT-2 (``L`` layers, width ``d``, MLP ``I``, vocabulary ``V``, ``T = B S`` tokens)
    .. math:: L \\, (2T(4d^2 + 2dI) + 4BS^2d) + 2TdV
BERT with its masked-LM head
    .. math:: L \\, (2T(4d^2 + 2dI) + 4BS^2d) + 2T(d^2 + dV)
Llama (``H_q`` query and ``H_{kv}`` key/value heads of size ``h``, gated MLP)
    .. math:: L \\, (2T(2dH_qh + 2dH_{kv}h + 3dI) + 4BH_qS^2h) + 2TdV
T5 (encoder ``S_e``, decoder ``S_d`` tokens, ``H`` heads of ``d_{kv}``, ``n = H d_{kv}``)
    encoder layers :math:`2T_e(4dn + 2dF) + 4BHS_e^2d_{kv}`, decoder layers
    :math:`2T_d(4dn + 2dn + 2dF) + 2T_e \\cdot 2dn + 4BH(S_d^2 + S_dS_e)d_{kv}`, head :math:`2T_ddV`
ViT (``P`` patches of ``p x p``, ``S = P + 1``)
    .. math:: 2BPd \\cdot 3p^2 + L \\, (2T(4d^2 + 2dI) + 4BS^2d) + 2Bd \\cdot \\text{labels}

For convolutional networks :func:`module_shape_flops` counts every ``nn.Conv*`` and ``nn.Linear``
from its weight shape and the output size seen in one shape-only run (forward hooks).

Needs the ``zoo`` extra (``transformers``) for the Hugging Face factories; test and benchmark use only.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import torch
from torch import nn

from milp_partition.importers.deps import require


def _transformers() -> Any:
    return require("transformers")


# --- factories ----------------------------------------------------------------------------------


def gpt2(**config: Any) -> nn.Module:
    """GPT-2 with its LM head (tied to the token embedding); default config = GPT-2 small (124 M), ``use_cache`` on."""
    t = _transformers()
    return t.GPT2LMHeadModel(t.GPT2Config(**config))


def bert(**config: Any) -> nn.Module:
    """BERT with its masked-LM head (decoder tied to the word embedding); default config = BERT-base."""
    t = _transformers()
    return t.BertForMaskedLM(t.BertConfig(**config))


#: A Llama-style decoder of GPT-2 small's size: 12 layers, width 768, grouped-query attention (12 query, 4 key/value heads).
LLAMA_12: dict[str, Any] = {
    "hidden_size": 768,
    "intermediate_size": 2048,
    "num_hidden_layers": 12,
    "num_attention_heads": 12,
    "num_key_value_heads": 4,
    "vocab_size": 32000,
    "max_position_embeddings": 2048,
}


def llama(**config: Any) -> nn.Module:
    """A Llama causal LM; default :data:`LLAMA_12` (12 layers), ``use_cache`` on as in the library's default."""
    t = _transformers()
    return t.LlamaForCausalLM(t.LlamaConfig(**{**LLAMA_12, **config}))


def t5(**config: Any) -> nn.Module:
    """T5 for conditional generation; default config = T5-small (60 M, LM head tied to the shared embedding)."""
    t = _transformers()
    return t.T5ForConditionalGeneration(t.T5Config(**config))


def vit(**config: Any) -> nn.Module:
    """ViT image classifier; default config = ViT-B/16 at 224 x 224 with 1000 labels."""
    t = _transformers()
    return t.ViTForImageClassification(t.ViTConfig(**{"num_labels": 1000, **config}))


def mobilenet_v2(**config: Any) -> nn.Module:
    """Transformers' MobileNetV2 image classifier (depthwise convolutions); default 1.0 width, 224 x 224."""
    t = _transformers()
    return t.MobileNetV2ForImageClassification(t.MobileNetV2Config(**config))


def convnext(**config: Any) -> nn.Module:
    """Transformers' ConvNeXt image classifier (7x7 depthwise convolutions); default ConvNeXt-T."""
    t = _transformers()
    return t.ConvNextForImageClassification(t.ConvNextConfig(**config))


SMALL_TEXT: dict[str, Any] = {"vocab_size": 1000}


def gpt2_small_test() -> nn.Module:
    """GPT-2, 4 layers of width 64, vocabulary 1000, library defaults otherwise (``use_cache`` on)."""
    return gpt2(n_layer=4, n_embd=64, n_head=4, n_positions=128, **SMALL_TEXT)


def bert_small_test() -> nn.Module:
    """BERT with masked-LM head, 4 layers of width 64, vocabulary 1000."""
    return bert(num_hidden_layers=4, hidden_size=64, num_attention_heads=4, intermediate_size=128, **SMALL_TEXT)


def llama_small_test() -> nn.Module:
    """Llama, 4 layers of width 64, 4 query and 2 key/value heads, vocabulary 1000 (``use_cache`` on)."""
    return llama(
        num_hidden_layers=4, hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2, **SMALL_TEXT
    )


def t5_small_test() -> nn.Module:
    """T5, 3 encoder and 3 decoder layers of width 64, vocabulary 1000 (``use_cache`` on)."""
    return t5(num_layers=3, num_decoder_layers=3, d_model=64, d_ff=128, num_heads=4, d_kv=16, **SMALL_TEXT)


def vit_small_test() -> nn.Module:
    """ViT, 4 layers of width 64 on 32 x 32 images in 8 x 8 patches, 10 labels."""
    return vit(
        num_hidden_layers=4,
        hidden_size=64,
        intermediate_size=128,
        num_attention_heads=4,
        image_size=32,
        patch_size=8,
        num_labels=10,
    )


def mobilenet_v2_small_test() -> nn.Module:
    """Transformers' MobileNetV2 at width 0.35 for 32 x 32 images, 10 labels."""
    return mobilenet_v2(image_size=32, depth_multiplier=0.35, num_labels=10)


def convnext_small_test() -> nn.Module:
    """ConvNeXt with one block per stage, widths 8-64, for 32 x 32 images, 10 labels."""
    return convnext(depths=[1, 1, 1, 1], hidden_sizes=[8, 16, 32, 64], image_size=32, num_labels=10)


# --- closed forms -------------------------------------------------------------------------------


def gpt2_forward_flops(config: Any, batch: int, seq: int) -> float:
    """Closed-form forward FLOPs of :func:`gpt2` (see the module docstring)."""
    d, layers, vocab = config.n_embd, config.n_layer, config.vocab_size
    inner = config.n_inner or 4 * d
    tokens = batch * seq
    return float(layers * (2 * tokens * (4 * d * d + 2 * d * inner) + 4 * batch * seq * seq * d) + 2 * tokens * d * vocab)


def bert_forward_flops(config: Any, batch: int, seq: int) -> float:
    """Closed-form forward FLOPs of :func:`bert` (encoder and masked-LM head)."""
    d, layers, inner, vocab = config.hidden_size, config.num_hidden_layers, config.intermediate_size, config.vocab_size
    tokens = batch * seq
    encoder = layers * (2 * tokens * (4 * d * d + 2 * d * inner) + 4 * batch * seq * seq * d)
    return float(encoder + 2 * tokens * (d * d + d * vocab))


def llama_forward_flops(config: Any, batch: int, seq: int) -> float:
    """Closed-form forward FLOPs of :func:`llama` (grouped-query attention, gated MLP, untied head)."""
    d, layers, inner, vocab = config.hidden_size, config.num_hidden_layers, config.intermediate_size, config.vocab_size
    heads, kv_heads = config.num_attention_heads, config.num_key_value_heads
    head_dim = getattr(config, "head_dim", None) or d // heads
    tokens = batch * seq
    projections = 2 * d * heads * head_dim + 2 * d * kv_heads * head_dim + 3 * d * inner
    return float(layers * (2 * tokens * projections + 4 * batch * heads * seq * seq * head_dim) + 2 * tokens * d * vocab)


def t5_forward_flops(config: Any, batch: int, enc_seq: int, dec_seq: int) -> float:
    """Closed-form forward FLOPs of :func:`t5` (encoder, decoder with cross-attention, LM head)."""
    d, heads, d_kv, d_ff, vocab = config.d_model, config.num_heads, config.d_kv, config.d_ff, config.vocab_size
    inner = heads * d_kv
    mlp = 3 if getattr(config, "is_gated_act", False) else 2
    t_e, t_d = batch * enc_seq, batch * dec_seq
    encoder = config.num_layers * (2 * t_e * (4 * d * inner + mlp * d * d_ff) + 4 * batch * heads * enc_seq * enc_seq * d_kv)
    decoder = config.num_decoder_layers * (
        2 * t_d * (4 * d * inner + 2 * d * inner + mlp * d * d_ff)
        + 2 * t_e * 2 * d * inner
        + 4 * batch * heads * (dec_seq * dec_seq + dec_seq * enc_seq) * d_kv
    )
    return float(encoder + decoder + 2 * t_d * d * vocab)


def vit_forward_flops(config: Any, batch: int) -> float:
    """Closed-form forward FLOPs of :func:`vit` (patch embedding, encoder, classifier on the class token)."""
    d, layers, inner, patch = config.hidden_size, config.num_hidden_layers, config.intermediate_size, config.patch_size
    patches = (config.image_size // patch) ** 2
    seq = patches + 1
    tokens = batch * seq
    embed = 2 * batch * patches * d * config.num_channels * patch * patch
    encoder = layers * (2 * tokens * (4 * d * d + 2 * d * inner) + 4 * batch * seq * seq * d)
    return float(embed + encoder + 2 * batch * d * config.num_labels)


def module_shape_flops(model: nn.Module, *inputs: torch.Tensor, training: bool = False) -> tuple[float, float]:
    """Forward (and backward) FLOPs of every ``nn.Conv*`` and ``nn.Linear`` of ``model`` from their weight shapes.

    One shape-only run on the meta device (forward hooks record each call's input and output
    shapes).  Forward per call: :math:`2 \\cdot \\text{outputs} \\cdot C_{in}/g \\cdot \\prod k` for a
    convolution, :math:`2 \\cdot \\text{rows} \\cdot \\text{in} \\cdot \\text{out}` for a linear layer.
    Backward: the same again for the weight gradient, and again for the input gradient when the
    layer's input depends on a parameter (a model input, padded or not, needs none).

    Returns
    -------
    (forward, backward)
        FLOPs; backward is 0 unless ``training``.
    """
    meta = _meta_copy(model)
    forward = backward = 0.0
    model_inputs = [x.detach().to("meta") for x in inputs]

    def hook(module: nn.Module, args: tuple[Any, ...], out: torch.Tensor) -> None:
        nonlocal forward, backward
        x = args[0]
        w = module.weight
        assert isinstance(w, torch.Tensor)
        if isinstance(module, nn.Linear):
            flops = 2.0 * (x.numel() // w.shape[1]) * w.shape[0] * w.shape[1]
        elif isinstance(module, (nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)):
            flops = 2.0 * x.shape[0] * math.prod(x.shape[2:]) * w.shape[0] * w.shape[1] * math.prod(w.shape[2:])
        else:
            flops = 2.0 * out.shape[0] * math.prod(out.shape[2:]) * w.shape[0] * w.shape[1] * math.prod(w.shape[2:])
        forward += flops
        backward += flops * (1 + int(x.requires_grad))

    kinds = (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)
    handles = [m.register_forward_hook(hook) for m in meta.modules() if isinstance(m, kinds)]
    try:
        with torch.enable_grad():
            meta(*model_inputs)
    finally:
        for h in handles:
            h.remove()
    return forward, backward if training else 0.0


def _meta_copy(model: nn.Module) -> nn.Module:
    return copy.deepcopy(model).to("meta").eval()


def unique_parameter_bytes(model: nn.Module) -> int:
    """Bytes of the model's parameters, each shared (tied) parameter once."""
    return sum(p.numel() * p.element_size() for p in model.parameters())
