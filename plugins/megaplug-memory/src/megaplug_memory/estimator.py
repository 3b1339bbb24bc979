"""Per-rank peak GPU memory of a Megatron training job, from its resolved arguments.

Pure arithmetic on the values ``megaplug resolve`` prints (Megatron's names): no torch, no
Megatron, a few microseconds a rank. Each part follows what Megatron allocates or what
autograd keeps for backward in Megatron's code (main at d98e8a64dd):

- **weights**: this pipeline stage's parameters, sharded by TP / EP / expert TP, in the
  parameters' dtype; embeddings on the first stage, the output layer on the last (a copy of
  the embedding there when tied and PP > 1); MTP layers on the last stage.
- **gradients**: the DDP ``main_grad`` buffers (fp32 unless the gradients accumulate in bf16).
- **optimizer**: Adam's fp32 main parameters and two moments (or the precision-aware
  optimizer's dtypes), sharded over data-parallel ranks (expert data-parallel ranks for
  expert parameters) by the distributed optimizer.
- **activations**: what each layer keeps for backward per micro-batch (``layer_activations``),
  times the micro-batches in flight on this stage of the pipeline schedule, minus what
  recomputation drops.
- **transient**: the largest short-lived buffers at the peak moment -- the logits and the
  fp32 cross-entropy on the last stage, the attention backward on the unfused (local) path,
  a recomputed layer.
- **other**: the allocator's fragmentation and Megatron's own small buffers.

The constants that are not sizes of tensors (``CALIBRATION``) were fitted on the measured
corpus in ``tests/data/corpus.json`` (Megatron's pretrain_gpt.py on an H200, see the README).

What the estimate cannot know it says (``Job.unknowns``), and then claims no fit: a
tokenizer-defined vocabulary (the figure is a lower bound), FSDP and CPU offloading (not
modelled: the figure is unsharded), hybrid (Mamba) layers. What depends on the run, not on
the configuration, is an explicit assumption (``Assumptions``): the MoE routing imbalance
the bound allows, and whether the allocator uses expandable segments.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Mapping

GIB = 1 << 30

#: Fitted on the measured corpus (see the module docstring); each says what it stands for.
CALIBRATION = {
    # attention backward on the unfused path: softmax backward's output and its input's
    # gradient beside the kept probabilities, in units of one s x s probability tensor
    "local_attention_backward": 2.0,
    # the same, when the core attention was recomputed (the probabilities come back too)
    "recomputed_attention_backward": 4.0,
    # the allocator's reserved-but-unallocated memory that a job must leave free, as a
    # fraction of what churns (activations and short-lived buffers), without expandable
    # segments and with them (docs/memory.md, "The allocator's margin", has the fit)
    "fragmentation": 0.10,
    "fragmentation_expandable": 0.03,
    # bytes the allocator and Megatron's small buffers (rope tables, masks, bucket padding)
    # add to what this model counts
    "other_bytes": 0.5 * GIB,
    # fraction of the device's memory a job can really allocate (CUDA context, NCCL)
    "usable_fraction": 0.97,
}

_DTYPE_BYTES = {"torch.float32": 4, "torch.float16": 2, "torch.bfloat16": 2,
                "torch.uint8": 1, "torch.float8_e4m3fn": 1, "fp32": 4, "bf16": 2, "fp16": 2,
                "fp8": 1, "float32": 4, "bfloat16": 2, "float16": 2}


#: The largest size (elements of one dimension, layers, ranks) the estimate takes: beyond it
#: no GPU holds one tensor of the model, and the arithmetic would leave float's range.
LARGEST_SIZE = 1 << 40

#: --assume-moe-imbalance's default: a dropless MoE layer's bound assumes an expert rank
#: receives up to this many times its balanced share of tokens (docs/memory.md says why).
DEFAULT_MOE_IMBALANCE = 2.0


class Assumptions:
    """What the estimate cannot read from the configuration, stated: the MoE routing
    imbalance the bound allows (the largest tokens an expert rank receives / the balanced
    count) and whether PyTorch's allocator uses expandable segments."""

    __slots__ = ("moe_imbalance", "expandable_segments")

    def __init__(self, moe_imbalance: float = DEFAULT_MOE_IMBALANCE,
                 expandable_segments: bool = False) -> None:
        if not 1.0 <= moe_imbalance <= 1e6:
            raise ValueError(f"the MoE imbalance is the largest tokens an expert rank receives "
                             f"over the balanced count, 1 or more, got {moe_imbalance}")
        self.moe_imbalance = float(moe_imbalance)
        self.expandable_segments = bool(expandable_segments)

    @classmethod
    def from_environment(cls, getenv: Callable[[str], str | None],
                         moe_imbalance: float | None = None) -> Assumptions:
        """From the target's environment: ``PYTORCH_CUDA_ALLOC_CONF`` (expandable segments)
        and ``MEGAPLUG_ASSUME_MOE_IMBALANCE``, unless ``moe_imbalance`` is given."""
        if moe_imbalance is None:
            stated = getenv(IMBALANCE_VARIABLE)
            moe_imbalance = DEFAULT_MOE_IMBALANCE if stated is None else parse_imbalance(stated)
        return cls(moe_imbalance, expandable(getenv(ALLOC_CONF_VARIABLE)))

    def as_dict(self) -> dict[str, Any]:
        return {"moe_imbalance": self.moe_imbalance,
                "expandable_segments": self.expandable_segments}


IMBALANCE_VARIABLE = "MEGAPLUG_ASSUME_MOE_IMBALANCE"
ALLOC_CONF_VARIABLE = "PYTORCH_CUDA_ALLOC_CONF"


def parse_imbalance(text: str) -> float:
    """``--assume-moe-imbalance`` / ``MEGAPLUG_ASSUME_MOE_IMBALANCE``: a number >= 1."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 1.0 <= value <= 1e6:
        raise ValueError(f"the MoE imbalance is a number of 1 or more (the largest tokens an "
                         f"expert rank receives over the balanced count), got {text!r}")
    return value


def expandable(alloc_conf: str | None) -> bool:
    """Whether ``PYTORCH_CUDA_ALLOC_CONF`` turns expandable segments on (its last say wins)."""
    found = False
    for option in (alloc_conf or "").split(","):
        key, _, value = option.partition(":")
        if key.strip() == "expandable_segments":
            found = value.strip().lower() in ("true", "1")
    return found


class Unknown:
    """Something the estimate cannot know: its words, and whether the figure is still a
    lower bound (so that a figure over the device already says it cannot fit)."""

    __slots__ = ("words", "lower_bound")

    def __init__(self, words: str, lower_bound: bool) -> None:
        self.words = words
        self.lower_bound = lower_bound


def _bytes_of(dtype: Any, default: int) -> int:
    return _DTYPE_BYTES.get(str(dtype), default) if dtype is not None else default


def _int(values: Mapping[str, Any], name: str, default: int = 0) -> int:
    value = values.get(name)
    return default if value is None else int(value)


class Job:
    """The numbers the estimate needs, read once from resolved values."""

    def __init__(self, values: Mapping[str, Any],
                 assumptions: Assumptions | None = None) -> None:
        self.assumptions = assumptions or Assumptions()
        self._parallelism(values)
        self._shape(values)
        self._mixture_of_experts(values)
        self._recompute_and_precision(values)
        self.layout = _layout(values.get("pipeline_model_parallel_layout"), self.pp)
        self.unknowns = _unknowns(values, self)

    def _parallelism(self, values: Mapping[str, Any]) -> None:
        get = values.get
        self.world = _int(values, "world_size", 1)
        self.tp = _int(values, "tensor_model_parallel_size", 1)
        self.pp = _int(values, "pipeline_model_parallel_size", 1)
        self.cp = _int(values, "context_parallel_size", 1)
        self.ep = _int(values, "expert_model_parallel_size", 1)
        self.etp = _int(values, "expert_tensor_parallel_size", self.tp) or self.tp
        model_parallel = max(1, self.tp * self.pp * self.cp)
        self.dp = _int(values, "data_parallel_size", 0) or max(1, self.world // model_parallel)
        self.expert_dp = max(1, (self.dp * self.tp * self.cp) // max(1, self.etp * self.ep))
        self.vpp = _int(values, "virtual_pipeline_model_parallel_size", 1) or 1
        self.sp = bool(get("sequence_parallel")) and self.tp > 1
        self.first_stage_layers = _int(values, "decoder_first_pipeline_num_layers", 0)
        self.last_stage_layers = _int(values, "decoder_last_pipeline_num_layers", 0)

    def _shape(self, values: Mapping[str, Any]) -> None:
        get = values.get
        self.layers = _int(values, "num_layers", 1)
        self.hidden = _int(values, "hidden_size")
        self.ffn = _int(values, "ffn_hidden_size", 4 * self.hidden)
        self.heads = _int(values, "num_attention_heads", 1)
        self.head_dim = _int(values, "kv_channels", 0) or self.hidden // max(1, self.heads)
        gqa = bool(get("group_query_attention"))
        self.groups = _int(values, "num_query_groups", self.heads) if gqa else self.heads
        self.seq = _int(values, "seq_length", 1)
        self.micro_batch = _int(values, "micro_batch_size", 1)
        global_batch = _int(values, "global_batch_size", 0) or self.micro_batch * self.dp
        self.microbatches = max(1, global_batch // max(1, self.micro_batch * self.dp))
        divisible = max(1, _int(values, "make_vocab_size_divisible_by", 128) * self.tp)
        vocab = _int(values, "padded_vocab_size", 0) or _int(values, "vocab_size", 0)
        self.vocab = -(-vocab // divisible) * divisible if vocab else 0
        self.vocab_known = bool(vocab)
        self.tied = not bool(get("untie_embeddings_and_output_weights"))
        self.learned_positions = get("position_embedding_type") in (None, "learned_absolute")
        self.max_positions = _int(values, "max_position_embeddings", self.seq)
        self.swiglu = bool(get("swiglu"))
        self.bias = bool(get("add_bias_linear", True))
        self.qkv_bias = bool(get("add_qkv_bias")) or self.bias
        self.layernorm = str(get("normalization") or "LayerNorm") == "LayerNorm"
        self.attention_dropout = float(get("attention_dropout") or 0.0)
        self.hidden_dropout = float(get("hidden_dropout") or 0.0)
        self.half = bool(get("bf16")) or bool(get("fp16"))
        self.param_bytes = 2 if self.half else 4
        self.local = str(get("transformer_impl") or "transformer_engine") == "local"
        self.softmax_fp32 = bool(get("attention_softmax_in_fp32"))
        self.mla = bool(get("multi_latent_attention"))
        self.q_lora = _int(values, "q_lora_rank", 0)
        self.kv_lora = _int(values, "kv_lora_rank", 512)
        self.qk_head = _int(values, "qk_head_dim", 128)
        self.qk_rope = _int(values, "qk_pos_emb_head_dim", 64)
        self.v_head = _int(values, "v_head_dim", 128)
        self.mtp = _int(values, "mtp_num_layers", 0)

    def _mixture_of_experts(self, values: Mapping[str, Any]) -> None:
        get = values.get
        self.experts = _int(values, "num_experts", 0)
        self.expert_ffn = _int(values, "moe_ffn_hidden_size", 0) or self.ffn
        self.shared_ffn = _int(values, "moe_shared_expert_intermediate_size", 0)
        self.topk = _int(values, "moe_router_topk", 2)
        self.capacity = get("moe_expert_capacity_factor")
        self.pad_to_capacity = bool(get("moe_pad_expert_input_to_capacity"))
        self.dispatcher = str(get("moe_token_dispatcher_type") or "allgather")
        self.moe_pattern = _moe_pattern(get("moe_layer_freq"), self.layers) if self.experts else []

    def _recompute_and_precision(self, values: Mapping[str, Any]) -> None:
        get = values.get
        self.recompute = get("recompute_granularity")
        self.recompute_method = get("recompute_method")
        self.recompute_layers = _int(values, "recompute_num_layers", 1)
        modules = get("recompute_modules")
        self.recompute_modules = set(modules or ("core_attn",))
        self.distributed_optimizer = bool(get("use_distributed_optimizer"))
        self.adam = str(get("optimizer") or "adam") == "adam"
        in_bf16 = bool(get("grad_reduce_in_bf16")) or (
            self.half and not get("accumulate_allreduce_grads_in_fp32", True))
        self.grad_bytes = 2 if in_bf16 else _bytes_of(get("main_grads_dtype"), 4)
        precision_aware = bool(get("use_precision_aware_optimizer"))
        self.main_param_bytes = _bytes_of(get("main_params_dtype"), 4) if precision_aware else 4
        moment = (_bytes_of(get("exp_avg_dtype"), 4) + _bytes_of(get("exp_avg_sq_dtype"), 4)
                  if precision_aware else 8)
        self.moment_bytes = moment if self.adam else 4  # SGD keeps one momentum buffer

    # -- what a stage holds --------------------------------------------------------------

    def stage_layers(self, stage: int) -> list[int]:
        """The (global) indices of the transformer layers on pipeline stage ``stage``."""
        return [layer for chunk in self.stage_chunks(stage) for layer in chunk]

    def stage_chunks(self, stage: int) -> list[list[int]]:
        """The layers of each model chunk (virtual stage) of pipeline stage ``stage``: one
        chunk without an interleaved schedule. Megatron recomputes by chunk: block
        recomputation's first N layers are each chunk's."""
        if self.layout is not None:
            return [self.layout_layers(virtual * self.pp + stage)
                    for virtual in range(len(self.layout) // self.pp)]
        layers = self._even_stage_layers(stage)
        if self.vpp <= 1 or len(layers) % self.vpp:
            return [layers]
        size = len(layers) // self.vpp
        if self.first_stage_layers or self.last_stage_layers:
            return [layers[i * size:(i + 1) * size] for i in range(self.vpp)]
        # virtual stage v of rank r holds the (v * PP + r)-th slice of the model
        return [list(range((v * self.pp + stage) * size, (v * self.pp + stage + 1) * size))
                for v in range(self.vpp)]

    def layout_layers(self, virtual_stage: int) -> list[int]:
        """The decoder layers (``t``) of one stage of ``--pipeline-model-parallel-layout``."""
        layout = self.layout or []
        start = sum(symbols.count("t") for symbols in layout[:virtual_stage])
        return list(range(start, start + layout[virtual_stage].count("t")))

    def holds(self, stage: int, symbol: str) -> int:
        """How many ``symbol`` (``E`` embedding, ``L`` loss, ``m`` MTP layer) the layout puts
        on pipeline stage ``stage``; without a layout, Megatron's placement."""
        if self.layout is None:
            if symbol == "E":
                return int(stage == 0)
            if symbol == "L":
                return int(stage == self.pp - 1)
            return self.mtp if stage == self.pp - 1 else 0
        return sum(self.layout[virtual * self.pp + stage].count(symbol)
                   for virtual in range(len(self.layout) // self.pp))

    def _even_stage_layers(self, stage: int) -> list[int]:
        counts = [self.layers // self.pp] * self.pp
        first, last = self.first_stage_layers, self.last_stage_layers
        if first or last:
            middle = self.layers - first - last
            inner = self.pp - (1 if first else 0) - (1 if last else 0)
            counts = [middle // inner if inner else 0] * self.pp
            if first:
                counts[0] = first
            if last:
                counts[-1] = last
        start = sum(counts[:stage])
        return list(range(start, start + counts[stage]))

    def sizable(self) -> bool:
        """Whether every size the estimate divides by or multiplies with is positive; a job
        with a zero or negative one is another plugin's problem, and gets no estimate."""
        sizes = (self.world, self.tp, self.pp, self.cp, self.ep, self.etp, self.dp, self.vpp,
                 self.layers, self.hidden, self.heads, self.head_dim, self.groups, self.seq,
                 self.micro_batch, self.ffn)
        return all(size > 0 for size in sizes) and self.layers >= self.pp and (
            not self.experts or (self.experts > 0 and self.expert_ffn > 0 and self.topk > 0))

    def too_large(self) -> list[str]:
        """The sizes beyond :data:`LARGEST_SIZE`, as ``name=value`` (Megatron's names): no
        GPU holds such a model, and the estimate does not try."""
        sizes = {"world_size": self.world, "num_layers": self.layers, "hidden_size": self.hidden,
                 "ffn_hidden_size": self.ffn, "num_attention_heads": self.heads,
                 "kv_channels": self.head_dim, "num_query_groups": self.groups,
                 "seq_length": self.seq, "micro_batch_size": self.micro_batch,
                 "vocab_size": self.vocab, "num_experts": self.experts,
                 "moe_ffn_hidden_size": self.expert_ffn,
                 "moe_shared_expert_intermediate_size": self.shared_ffn,
                 "moe_router_topk": self.topk, "max_position_embeddings": self.max_positions,
                 "num_microbatches": self.microbatches, "q_lora_rank": self.q_lora,
                 "kv_lora_rank": self.kv_lora, "mtp_num_layers": self.mtp}
        return [f"{name}={_shown(value)}" for name, value in sizes.items()
                if value > LARGEST_SIZE]

    @property
    def fits_claimable(self) -> bool:
        """Whether a figure within the device means it fits (nothing unknown)."""
        return not self.unknowns

    def moe_bound_factor(self) -> float:
        """The bound's tokens over the balanced tokens an expert rank receives: the capacity
        factor where tokens are dropped (what it allows), else the assumed imbalance; never
        more than every token of the group choosing this rank's experts."""
        if not self.experts:
            return 1.0
        local = max(1, self.experts // self.ep)
        most = self.ep * min(self.topk, local) / self.topk  # every choice lands here
        if self.capacity is not None and float(self.capacity) > 0:
            return min(float(self.capacity), most)
        return min(self.assumptions.moe_imbalance, most)

    def is_moe(self, layer: int) -> bool:
        return bool(self.moe_pattern) and bool(self.moe_pattern[layer])


def _shown(value: int) -> str:
    """A size as written, or its order of magnitude when it is too long to read."""
    digits = str(value)
    return digits if len(digits) <= 16 else f"about 10**{len(digits) - 1}"


def _layout(text: Any, pp: int) -> list[tuple[str, ...]] | None:
    """``--pipeline-model-parallel-layout`` as the symbols of each (virtual) stage, through
    the parallel plugin's one parser; None without a layout, or with one that plugin
    refuses (it reports that)."""
    if not text:
        return None
    from megaplug.builtin.parallel.layout import LayoutError, parse_layout

    try:
        stages = [tuple(stage) for stage in parse_layout(str(text)).stages]
    except LayoutError:
        return None
    return stages if pp > 0 and len(stages) % pp == 0 else None


def _unknowns(values: Mapping[str, Any], job: Job) -> list[Unknown]:
    """What this estimate cannot know about the job (see :class:`Unknown`)."""
    get = values.get
    found = []
    if not job.vocab_known:
        found.append(Unknown(
            "the vocabulary size (no --vocab-size: the tokenizer defines it; the embedding, "
            "output layer and logits are not counted, so the figure is a lower bound)", True))
    if get("use_megatron_fsdp") or get("use_torch_fsdp2"):
        found.append(Unknown(
            "FSDP (--use-megatron-fsdp / --use-torch-fsdp2) is not modelled: weights, "
            "gradients and optimizer states are shown unsharded", False))
    if get("optimizer_cpu_offload") or get("cpu_offloading") or get(
            "fine_grained_activation_offloading"):
        found.append(Unknown("CPU offloading (optimizer or activations) is not modelled: the "
                             "figure counts on the GPU what it moves to the host", False))
    if get("hybrid_layer_pattern") or get("hybrid_override_pattern"):
        found.append(Unknown("hybrid (Mamba) layers are not modelled", False))
    return found


def _moe_pattern(frequency: Any, layers: int) -> list[int]:
    """Megatron's --moe-layer-freq: an int N (every N-th layer) or a list of 0/1 per layer."""
    if isinstance(frequency, (list, tuple)):
        return [int(bool(x)) for x in frequency][:layers] + [0] * max(0, layers - len(frequency))
    every = int(frequency or 1)
    return [1 if i % every == 0 else 0 for i in range(layers)]


# -- parameters -------------------------------------------------------------------------

def attention_parameters(job: Job) -> int:
    """One layer's attention parameters on one tensor-parallel rank (with its norm)."""
    h, tp = job.hidden, job.tp
    norm = 2 * h if job.layernorm else h
    if job.mla:
        q = (h * job.q_lora + job.q_lora + job.q_lora * job.heads * (job.qk_head + job.qk_rope)
             // tp) if job.q_lora else h * job.heads * (job.qk_head + job.qk_rope) // tp
        kv = (h * (job.kv_lora + job.qk_rope) + job.kv_lora
              + job.kv_lora * job.heads * (job.qk_head + job.v_head) // tp)
        return norm + q + kv + job.heads * job.v_head * h // tp
    qkv_out = (job.heads + 2 * job.groups) * job.head_dim
    qkv = h * qkv_out // tp + (qkv_out // tp if job.qkv_bias else 0)
    proj = job.heads * job.head_dim * h // tp + (h if job.bias else 0)
    return norm + qkv + proj


def _mlp_parameters(h: int, ffn: int, swiglu: bool, bias: bool, split: int) -> int:
    up = h * ffn * (2 if swiglu else 1) // split
    return up + ffn * h // split + ((ffn * (2 if swiglu else 1)) // split + h if bias else 0)


def layer_parameters(job: Job, layer: int) -> tuple[int, int]:
    """(dense, expert) parameters of one layer on this rank."""
    h = job.hidden
    norm = 2 * h if job.layernorm else h
    dense = attention_parameters(job) + norm
    if not job.is_moe(layer):
        return dense + _mlp_parameters(h, job.ffn, job.swiglu, job.bias, job.tp), 0
    dense += h * job.experts  # the router, replicated
    if job.shared_ffn:
        dense += _mlp_parameters(h, job.shared_ffn, job.swiglu, False, job.tp)
    local_experts = max(1, job.experts // job.ep)
    expert = local_experts * _mlp_parameters(h, job.expert_ffn, job.swiglu, job.bias, job.etp)
    return dense, expert


def stage_parameters(job: Job, stage: int) -> tuple[int, int]:
    """(dense, expert) parameters held by a rank of pipeline stage ``stage``."""
    dense = expert = 0
    by_kind: dict[bool, tuple[int, int]] = {}  # dense and MoE layers: one count each
    for layer in job.stage_layers(stage):
        kind = job.is_moe(layer)
        if kind not in by_kind:
            by_kind[kind] = layer_parameters(job, layer)
        d, e = by_kind[kind]
        dense, expert = dense + d, expert + e
    embedding = job.vocab * job.hidden // job.tp
    first, last = job.holds(stage, "E"), job.holds(stage, "L")
    if first:
        dense += embedding + (job.max_positions * job.hidden if job.learned_positions else 0)
    if last:
        dense += (2 * job.hidden if job.layernorm else job.hidden)  # the final norm
        if not job.tied or not first:
            dense += embedding  # the output layer (a tied copy of the embedding elsewhere)
    for mtp in range(job.holds(stage, "m")):
        d, e = layer_parameters(job, job.layers - 1)
        dense += d + 2 * job.hidden * job.hidden // job.tp + 3 * job.hidden
        expert += e
    return dense, expert


# -- activations --------------------------------------------------------------------------

def _probabilities(job: Job) -> int:
    """Bytes of one s x s attention-probability tensor of a micro-batch on this rank."""
    seq = job.seq // job.cp
    return 2 * job.micro_batch * (job.heads // job.tp) * seq * job.seq


def layer_activations(job: Job, layer: int, moe_factor: float = 1.0) -> int:
    """Bytes one layer keeps for backward for one micro-batch, without recomputation
    (selective recomputation's savings applied); an MoE layer's experts receive
    ``moe_factor`` times their balanced share of tokens."""
    a = job.param_bytes
    t = job.seq * job.micro_batch // job.cp
    h, tp = job.hidden, job.tp
    replicated = t * h // (tp if job.sp else 1)  # norms' inputs, residual-stream tensors
    selective = job.recompute == "selective"
    modules = job.recompute_modules if selective else set()
    stats = 4 * t // (tp if job.sp else 1) * (2 if job.layernorm else 1)
    # attention block: its norm's input and statistics, the QKV projection's input
    total = a * replicated + stats
    total += 0 if "layernorm" in modules else a * replicated
    q = t * job.heads * job.head_dim // tp
    kv = t * job.groups * job.head_dim // tp
    if job.mla:
        q = t * job.heads * (job.qk_head + job.qk_rope) // tp
        kv = t * job.heads * (job.qk_head + job.v_head) // tp
        total += a * t * (job.kv_lora + job.qk_rope + job.q_lora)  # the down-projections
    if "core_attn" in modules:
        total += a * (q + 2 * kv)  # the checkpoint keeps its inputs only
    elif job.local and not job.mla:
        # the unfused path expands K and V to every head, keeps the softmax's output (and
        # a dropout mask and output), as DotProductAttention does
        total += a * 3 * q
        probability_elements = _probabilities(job) // 2
        total += (a + (4 if job.softmax_fp32 else 0)) * probability_elements
        if job.attention_dropout > 0:
            total += (1 + a) * probability_elements
    else:
        # flash / cuDNN attention: Q, K, V, the output and the softmax statistics
        total += a * (2 * q + 2 * kv) + 4 * job.micro_batch * (job.heads // tp) * t
    total += a * t * job.heads * (job.v_head if job.mla else job.head_dim) // tp  # proj input
    if job.hidden_dropout > 0:
        total += 2 * replicated  # the two dropout masks of the bias-dropout-adds
    return total + _mlp_block_activations(job, layer, modules, moe_factor)


def _mlp_block_activations(job: Job, layer: int, modules: set[str],
                           moe_factor: float) -> int:
    """The MLP (or MoE) block's part of :func:`layer_activations`."""
    a = job.param_bytes
    t = job.seq * job.micro_batch // job.cp
    h, tp = job.hidden, job.tp
    replicated = t * h // (tp if job.sp else 1)
    stats = 4 * t // (tp if job.sp else 1) * (2 if job.layernorm else 1)
    # its norm's input and statistics, the first projection's (or the router's) input
    total = a * replicated + stats + (0 if "layernorm" in modules else a * replicated)
    if not job.is_moe(layer):
        if "mlp" in modules:
            return total
        return total + _mlp_activations(job, t, job.ffn, tp)
    if "moe" in modules:
        return total
    return total + _moe_activations(job, modules, moe_factor)


def _moe_activations(job: Job, modules: set[str], moe_factor: float) -> int:
    """What an MoE layer's router, dispatcher and experts keep for one micro-batch, its
    experts receiving ``moe_factor`` times the balanced ``tokens x top-k`` (a rank of the
    expert group holds 1/EP of the experts and receives 1/EP of the group's choices)."""
    a = job.param_bytes
    t = job.seq * job.micro_batch // job.cp
    h, tp = job.hidden, job.tp
    total = 0
    routed = t // (tp if job.sp else 1)
    total += 8 * routed * job.experts  # router scores and probabilities, fp32
    expert_tokens = int(routed * job.topk * moe_factor)
    total += a * expert_tokens * h * 2  # expert inputs and the outputs the combine keeps
    if "moe_act" not in modules:
        total += _mlp_activations(job, expert_tokens, job.expert_ffn, job.etp)
    else:
        total += a * expert_tokens * job.expert_ffn // job.etp
    if job.dispatcher == "allgather":
        total += 4 * routed * job.ep * job.experts // job.ep  # the gathered routing map
    if job.shared_ffn and "shared_experts" not in modules:
        total += _mlp_activations(job, t, job.shared_ffn, tp)
    return total


def _mlp_activations(job: Job, tokens: int, ffn: int, split: int) -> int:
    """An MLP's activation input (twice as wide under SwiGLU) and second projection's input."""
    return job.param_bytes * tokens * (ffn // split) * (3 if job.swiglu else 2)


def layer_input(job: Job) -> int:
    """Bytes of one layer's input (what full recomputation keeps per layer)."""
    return job.param_bytes * job.seq * job.micro_batch // job.cp * job.hidden // (
        job.tp if job.sp else 1)


def in_flight(job: Job, stage: int) -> float:
    """Micro-batches whose activations stage ``stage`` holds at once, in units of the whole
    stage's layers (the interleaved schedule holds more chunks of fewer layers)."""
    if job.pp == 1:
        return 1.0
    if job.vpp > 1:
        chunks = (job.pp - stage - 1) * 2 + (job.vpp - 1) * job.pp + 1
        return min(chunks, job.microbatches * job.vpp) / job.vpp
    return float(min(job.pp - stage, job.microbatches))


# -- the estimate ----------------------------------------------------------------------

class RankEstimate:
    """One rank's predicted peak and its parts, in bytes: for balanced MoE routing
    (``parts``), at the bound the assumptions allow (``bound_parts``; the same for a dense
    model), and the allocator's margin beyond the bound's peak."""

    def __init__(self, rank: int, stage: int, parts: dict[str, int],
                 bound_parts: dict[str, int] | None = None, margin: int = 0) -> None:
        self.rank = rank
        self.stage = stage
        self.parts = parts
        self.bound_parts = parts if bound_parts is None else bound_parts
        self.margin = margin

    @property
    def peak(self) -> int:
        """``torch.cuda.max_memory_allocated()`` predicted for balanced routing."""
        return sum(self.parts.values())

    @property
    def bound(self) -> int:
        """The peak at the bound of MoE routing (the peak itself for a dense model)."""
        return sum(self.bound_parts.values())

    @property
    def needed(self) -> int:
        """What the job needs of the device: the bound plus the allocator's margin."""
        return self.bound + self.margin

    def biggest_part(self) -> str:
        return max(self.bound_parts, key=lambda name: self.bound_parts[name])


def stage_estimate(job: Job, stage: int, moe_factor: float = 1.0) -> dict[str, int]:
    """The parts of a rank of pipeline stage ``stage``: weights, gradients, optimizer,
    activations, transient, other (bytes); MoE experts receiving ``moe_factor`` times
    their balanced share of tokens."""
    dense, expert = stage_parameters(job, stage)
    params = dense + expert
    weights = params * job.param_bytes
    gradients = params * job.grad_bytes
    state = job.main_param_bytes + job.moment_bytes
    if not job.half:
        state -= job.main_param_bytes  # fp32 training keeps no separate main copy
    if job.distributed_optimizer:
        optimizer = dense * state // job.dp + expert * state // job.expert_dp
    else:
        optimizer = params * state
    activations, transient = activation_parts(job, stage, moe_factor)
    return {"weights": weights, "gradients": gradients, "optimizer": optimizer,
            "activations": activations, "transient": transient,
            "other": int(CALIBRATION["other_bytes"])}


def activation_parts(job: Job, stage: int, moe_factor: float = 1.0) -> tuple[int, int]:
    """(kept for backward by the micro-batches in flight, short-lived at the peak moment)."""
    chunks = job.stage_chunks(stage)
    layers = [layer for chunk in chunks for layer in chunk]
    per_layer = _per_layer_activations(job, layers, moe_factor)
    flight = in_flight(job, stage)
    full = job.recompute == "full"
    if full:
        activations = int(_kept_under_full_recompute(job, chunks, per_layer) * flight)
    else:
        activations = int(sum(per_layer.values()) * flight)
    if job.holds(stage, "E"):
        activations += int(flight * job.seq * job.micro_batch // job.cp * job.hidden
                           // (job.tp if job.sp else 1) * (1 if job.hidden_dropout else 0))
    # the peak moment: the loss on the last stage, or the backward of the newest layer
    transient = 0
    if layers and job.local and not job.mla:
        key = "recomputed_attention_backward" if (
            full or (job.recompute == "selective" and "core_attn" in job.recompute_modules)
        ) else "local_attention_backward"
        transient = int(CALIBRATION[key] * _probabilities(job))
    if full and layers:
        transient += max(per_layer.values())  # the layer being recomputed
    if job.holds(stage, "L"):
        t = job.seq * job.micro_batch // job.cp
        logits = (job.param_bytes + 4) * t * job.vocab // job.tp  # logits + fp32 softmax
        logits += 2 * job.param_bytes * t * job.hidden  # final norm and output layer inputs
        transient = max(transient, logits)
    return activations, transient


def _per_layer_activations(job: Job, layers: list[int], moe_factor: float) -> dict[int, int]:
    """:func:`layer_activations` of each layer, computed once per kind (dense or MoE)."""
    by_kind: dict[bool, int] = {}
    per_layer = {}
    for layer in layers:
        kind = job.is_moe(layer)
        if kind not in by_kind:
            by_kind[kind] = layer_activations(job, layer, moe_factor)
        per_layer[layer] = by_kind[kind]
    return per_layer


def _kept_under_full_recompute(job: Job, chunks: list[list[int]],
                               per_layer: dict[int, int]) -> int:
    """What one micro-batch keeps under full recomputation: uniform keeps every layer's
    input; block recomputes each chunk's first N layers (Megatron's TransformerBlock does
    so per model chunk) and keeps the rest whole."""
    kept = 0
    for chunk in chunks:
        recomputed = len(chunk) if job.recompute_method == "uniform" else min(
            len(chunk), job.recompute_layers)
        kept += layer_input(job) * recomputed + sum(per_layer[layer]
                                                    for layer in chunk[recomputed:])
    return kept


def stage_of(job: Job, rank: int) -> int:
    """The pipeline stage of ``rank`` in Megatron's default order (tp-cp-ep-dp-pp)."""
    return min(job.pp - 1, rank // max(1, job.world // job.pp))


def rank_estimate(job: Job, rank: int, stage: int) -> RankEstimate:
    """The estimate of ``rank`` (on pipeline stage ``stage``): balanced, bound, margin."""
    parts = stage_estimate(job, stage)
    factor = job.moe_bound_factor()
    bound_parts = parts if factor == 1.0 else stage_estimate(job, stage, factor)
    churn = bound_parts["activations"] + bound_parts["transient"]
    key = "fragmentation_expandable" if job.assumptions.expandable_segments else "fragmentation"
    return RankEstimate(rank, stage, parts, bound_parts, int(CALIBRATION[key] * churn))


def estimate(values: Mapping[str, Any], rank: int | None = None,
             assumptions: Assumptions | None = None) -> list[RankEstimate]:
    """One estimate per pipeline stage (the ranks of a stage hold the same), or for
    ``rank`` alone. The first rank of each stage stands for the stage."""
    job = Job(values, assumptions)
    if rank is not None:
        return [rank_estimate(job, rank, stage_of(job, rank))]
    per_stage = max(1, job.world // job.pp)
    return [rank_estimate(job, stage * per_stage, stage) for stage in range(job.pp)]


def usable(device_memory: int) -> int:
    """What a job can allocate on a device of ``device_memory`` bytes (integer arithmetic:
    any size a device can state)."""
    return device_memory * round(CALIBRATION["usable_fraction"] * 1000) // 1000


def verdict(job: Job, rank: RankEstimate, device_memory: int | None) -> bool | None:
    """Whether ``rank`` fits: its bound plus the allocator's margin within what the device
    can allocate. None when the device's memory is unknown, or when the estimate misses
    something (:attr:`Job.unknowns`) -- unless every such gap leaves the figure a lower
    bound and the figure is already over the device."""
    if device_memory is None:
        return None
    fits = rank.needed <= usable(device_memory)
    if job.fits_claimable:
        return fits
    if not fits and all(unknown.lower_bound for unknown in job.unknowns):
        return False
    return None
