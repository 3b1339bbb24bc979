"""A small GPT-style decoder in plain torch, built from Megatron-style resolved arguments.

Module names follow Megatron core (``linear_qkv``, ``linear_proj``, ``linear_fc1``,
``linear_fc2``) so that flags naming modules (``--lora-target-modules``) mean the same
thing here as in Megatron.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class GPTConfig:
    """The architecture, read from the resolved arguments by :func:`gpt_config_from_args`."""

    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_query_groups: int
    kv_channels: int
    ffn_hidden_size: int
    padded_vocab_size: int
    max_position_embeddings: int
    activation: str = "gelu"  # gelu | swiglu | squared_relu
    normalization: str = "LayerNorm"
    norm_epsilon: float = 1e-5
    position_embedding_type: str = "learned_absolute"
    rotary_base: float = 10000.0
    rotary_percent: float = 1.0
    add_bias_linear: bool = True
    untie_embeddings_and_output_weights: bool = False
    hidden_dropout: float = 0.0
    attention_dropout: float = 0.0
    init_method_std: float = 0.02


def gpt_config_from_args(args: Any, padded_vocab_size: int) -> GPTConfig:
    """The model architecture a Megatron-style namespace describes."""
    heads = args.num_attention_heads
    groups = args.num_query_groups if getattr(args, "group_query_attention", False) else heads
    kv_channels = args.kv_channels or args.hidden_size // heads
    if getattr(args, "swiglu", False):
        activation = "swiglu"
    elif getattr(args, "squared_relu", False):
        activation = "squared_relu"
    else:
        activation = "gelu"
    return GPTConfig(
        num_layers=args.num_layers,
        hidden_size=args.hidden_size,
        num_attention_heads=heads,
        num_query_groups=groups or heads,
        kv_channels=kv_channels,
        ffn_hidden_size=args.ffn_hidden_size or 4 * args.hidden_size,
        padded_vocab_size=padded_vocab_size,
        max_position_embeddings=args.max_position_embeddings or args.seq_length,
        activation=activation,
        normalization=args.normalization,
        norm_epsilon=getattr(args, "norm_epsilon", 1e-5),
        position_embedding_type=args.position_embedding_type,
        rotary_base=float(getattr(args, "rotary_base", 10000)),
        rotary_percent=float(getattr(args, "rotary_percent", 1.0)),
        add_bias_linear=getattr(args, "add_bias_linear", True),
        untie_embeddings_and_output_weights=args.untie_embeddings_and_output_weights,
        hidden_dropout=args.hidden_dropout,
        attention_dropout=args.attention_dropout,
        init_method_std=args.init_method_std,
    )


def make_norm(config: GPTConfig) -> nn.Module:
    """LayerNorm or RMSNorm over the hidden size, as ``--normalization`` asks."""
    if config.normalization == "RMSNorm":
        return nn.RMSNorm(config.hidden_size, eps=config.norm_epsilon)
    return nn.LayerNorm(config.hidden_size, eps=config.norm_epsilon)


class RotaryEmbedding(nn.Module):
    """Rotary position embedding over the first ``rotary_percent`` of each head.

    The angles are computed in fp32 on each call, whatever the model's dtype: a bf16 copy
    of the frequencies (what ``model.to(torch.bfloat16)`` makes of a buffer) puts
    position 511 over half a radian off with 128-channel heads.
    """

    def __init__(self, head_dim: int, base: float, percent: float) -> None:
        super().__init__()
        self.dim = max(2, int(head_dim * percent) // 2 * 2)
        self.base = base

    def forward(self, seq_len: int,
                device: torch.device | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        channels = torch.arange(0, self.dim, 2, dtype=torch.float32, device=device)
        inv_freq = 1.0 / (self.base ** (channels / self.dim))
        positions = torch.arange(seq_len, dtype=torch.float32, device=device)
        freqs = torch.outer(positions, inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos(), emb.sin()


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate the leading ``cos.shape[-1]`` channels of ``x`` (B, H, T, D); pass the rest."""
    dim = cos.shape[-1]
    rot, rest = x[..., :dim], x[..., dim:]
    first, second = rot.chunk(2, dim=-1)
    rotated = torch.cat((-second, first), dim=-1)
    out = rot * cos.to(x.dtype) + rotated * sin.to(x.dtype)
    return torch.cat((out, rest), dim=-1)


class SelfAttention(nn.Module):
    """Causal multi-head (or grouped-query) self-attention."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.heads = config.num_attention_heads
        self.groups = config.num_query_groups
        self.head_dim = config.kv_channels
        qkv_out = (self.heads + 2 * self.groups) * self.head_dim
        self.linear_qkv = nn.Linear(config.hidden_size, qkv_out, bias=config.add_bias_linear)
        self.linear_proj = nn.Linear(self.heads * self.head_dim, config.hidden_size,
                                     bias=config.add_bias_linear)
        self.dropout = config.attention_dropout

    def forward(self, x: torch.Tensor,
                rope: tuple[torch.Tensor, torch.Tensor] | None) -> torch.Tensor:
        batch, seq, _ = x.shape
        qkv = self.linear_qkv(x)
        q, k, v = qkv.split([self.heads * self.head_dim, self.groups * self.head_dim,
                             self.groups * self.head_dim], dim=-1)
        q = q.view(batch, seq, self.heads, self.head_dim).transpose(1, 2)
        k = k.view(batch, seq, self.groups, self.head_dim).transpose(1, 2)
        v = v.view(batch, seq, self.groups, self.head_dim).transpose(1, 2)
        if rope is not None:
            q, k = apply_rotary(q, *rope), apply_rotary(k, *rope)
        if self.groups != self.heads:
            repeat = self.heads // self.groups
            k, v = k.repeat_interleave(repeat, dim=1), v.repeat_interleave(repeat, dim=1)
        out = F.scaled_dot_product_attention(
            q, k, v, is_causal=True, dropout_p=self.dropout if self.training else 0.0)
        return self.linear_proj(out.transpose(1, 2).reshape(batch, seq, -1))


class MLP(nn.Module):
    """The feed-forward block: gelu, squared relu, or gated SwiGLU."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.activation = config.activation
        fc1_out = config.ffn_hidden_size * (2 if self.activation == "swiglu" else 1)
        self.linear_fc1 = nn.Linear(config.hidden_size, fc1_out, bias=config.add_bias_linear)
        self.linear_fc2 = nn.Linear(config.ffn_hidden_size, config.hidden_size,
                                    bias=config.add_bias_linear)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.linear_fc1(x)
        if self.activation == "swiglu":
            gate, up = h.chunk(2, dim=-1)
            h = F.silu(gate) * up
        elif self.activation == "squared_relu":
            h = F.relu(h) ** 2
        else:
            h = F.gelu(h)
        return self.linear_fc2(h)


class TransformerLayer(nn.Module):
    """A pre-norm decoder layer: x + attn(norm(x)), then x + mlp(norm(x))."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.input_layernorm = make_norm(config)
        self.self_attention = SelfAttention(config)
        self.pre_mlp_layernorm = make_norm(config)
        self.mlp = MLP(config)
        self.dropout = nn.Dropout(config.hidden_dropout)

    def forward(self, x: torch.Tensor,
                rope: tuple[torch.Tensor, torch.Tensor] | None) -> torch.Tensor:
        x = x + self.dropout(self.self_attention(self.input_layernorm(x), rope))
        return x + self.dropout(self.mlp(self.pre_mlp_layernorm(x)))


class GPTModel(nn.Module):
    """Token ids (B, T) in, logits over the padded vocabulary (B, T, V) out."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.config = config
        self.word_embeddings = nn.Embedding(config.padded_vocab_size, config.hidden_size)
        self.position_embeddings = None
        self.rotary = None
        if config.position_embedding_type == "learned_absolute":
            self.position_embeddings = nn.Embedding(config.max_position_embeddings,
                                                    config.hidden_size)
        elif config.position_embedding_type == "rope":
            self.rotary = RotaryEmbedding(config.kv_channels, config.rotary_base,
                                          config.rotary_percent)
        self.embedding_dropout = nn.Dropout(config.hidden_dropout)
        self.layers = nn.ModuleList(TransformerLayer(config) for _ in range(config.num_layers))
        self.final_layernorm = make_norm(config)
        self.output_layer = None
        if config.untie_embeddings_and_output_weights:
            self.output_layer = nn.Linear(config.hidden_size, config.padded_vocab_size, bias=False)
        self._init_weights()

    def _init_weights(self) -> None:
        # Megatron's scheme: N(0, std) everywhere, std / sqrt(2 * layers) on the layers
        # that write into the residual stream, so its variance does not grow with depth.
        std = self.config.init_method_std
        scaled = std / math.sqrt(2.0 * max(1, self.config.num_layers))
        for name, module in self.named_modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                is_output = name.endswith("linear_proj") or name.endswith("linear_fc2")
                nn.init.normal_(module.weight, mean=0.0, std=scaled if is_output else std)
                if getattr(module, "bias", None) is not None:
                    nn.init.zeros_(module.bias)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        seq = tokens.shape[1]
        x = self.word_embeddings(tokens)
        if self.position_embeddings is not None:
            x = x + self.position_embeddings(torch.arange(seq, device=tokens.device))
        x = self.embedding_dropout(x)
        rope = self.rotary(seq, tokens.device) if self.rotary is not None else None
        for layer in self.layers:
            x = layer(x, rope)
        x = self.final_layernorm(x)
        weight = (self.output_layer.weight if self.output_layer is not None
                  else self.word_embeddings.weight)
        return F.linear(x, weight)


class LoRALinear(nn.Module):
    """A frozen linear layer plus a trainable low-rank update: W x + scaling * B A x."""

    def __init__(self, base: nn.Linear, rank: int, scaling: float, dropout: float) -> None:
        super().__init__()
        self.base = base
        for parameter in self.base.parameters():
            parameter.requires_grad_(False)
        self.lora_a = nn.Parameter(torch.empty(rank, base.in_features, dtype=base.weight.dtype))
        self.lora_b = nn.Parameter(torch.zeros(base.out_features, rank, dtype=base.weight.dtype))
        nn.init.kaiming_uniform_(self.lora_a, a=math.sqrt(5))
        self.scaling = scaling
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        update = F.linear(F.linear(self.dropout(x), self.lora_a), self.lora_b)
        return self.base(x) + self.scaling * update


def apply_lora(model: nn.Module, targets: Sequence[str], rank: int, scaling: float,
               dropout: float) -> int:
    """Freeze ``model`` and wrap every linear named in ``targets`` with a LoRA adapter.

    Returns the number of wrapped layers.
    """
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    wrapped = 0
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if name in targets and isinstance(child, nn.Linear):
                setattr(module, name, LoRALinear(child, rank, scaling, dropout))
                wrapped += 1
    return wrapped
