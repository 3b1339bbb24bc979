"""The RL (GRPO) settings, spelled and defaulted exactly as Megatron's ``rl`` group."""


from dataclasses import field
from typing import Literal, Optional

from typing_extensions import Annotated

from megaplug import Computed, Flag, options

Granularity = Literal["R", "G", "B"]


@options
class RLOptions:
    """Flags of reinforcement-learning post-training (GRPO rollouts, refit, inference model)."""

    perform_rl_step: Annotated[bool, Flag(
        help="Train with the RL (GRPO) step instead of the plain language-model step.")] = False
    rl_prompts_per_eval: Annotated[int, Flag(
        help="Prompts evaluated per RL task at each evaluation (evaluation can be costly).")] = 32
    grpo_prompts_per_step: Annotated[int, Flag(
        help="Rollout groups (prompts) collected per GRPO step.")] = 32
    grpo_group_size: Annotated[int, Flag(
        help="Rollouts sampled per prompt in a GRPO group.")] = 2
    rl_generation_lag: Annotated[Optional[float], Flag(
        help="Trainer batches of rollout generation lag allowed; above 0 needs "
             "--rl-partial-rollouts.")] = None
    rl_max_inflight_requests: Annotated[Optional[int], Flag(
        help="Upper bound on rollout requests in flight at once; none means no bound.")] = None
    rl_submission_granularity: Annotated[Granularity, Flag(
        help="Unit in which rollout work is submitted: R a rollout, G a group, B a whole "
             "batch of groups.")] = "B"
    rl_consumption_granularity: Annotated[Granularity, Flag(
        help="Unit in which generated rollouts are consumed by training: G a group, B a "
             "batch (R is not supported).")] = "B"
    rl_durable_rollout_bank: Annotated[bool, Flag(
        help="Keep generated rollouts in a durable bank on disk.")] = False
    rl_rollout_bank_dir: Annotated[Optional[str], Flag(
        help="Directory of the durable rollout bank.")] = None
    rl_rollout_bank_max_bytes: Annotated[int, Flag(
        help="Size limit of the durable rollout bank in bytes; 0 means unlimited.")] = 0
    grpo_iterations: Annotated[int, Flag(
        help="Optimizer passes over each batch of generated rollouts.")] = 2
    grpo_clamp_eps_lower: Annotated[float, Flag(
        help="Lower clipping bound of the GRPO policy ratio.")] = 0.01
    grpo_clamp_eps_upper: Annotated[float, Flag(
        help="Upper clipping bound of the GRPO policy ratio (equal to the lower one for "
             "vanilla GRPO).")] = 0.01
    grpo_kl_beta: Annotated[float, Flag(help="Weight of the KL term in the GRPO loss.")] = 0.001
    grpo_entropy_term_weight: Annotated[float, Flag(
        help="Weight of the entropy term in the GRPO loss.")] = 0.0
    grpo_filter_groups_with_same_reward: Annotated[bool, Flag(
        help="Drop rollout groups whose rollouts all got the same reward.")] = False
    langrl_env_config: Annotated[Optional[str], Flag(
        help="YAML file describing the RL environments.")] = None
    rl_default_temperature: Annotated[float, Flag(
        help="Sampling temperature of rollout inference.")] = 1.0
    rl_default_top_p: Annotated[float, Flag(
        help="Top-p of rollout inference sampling; 0 disables it.")] = 0
    rl_default_top_k: Annotated[int, Flag(
        help="Top-k of rollout inference sampling; -1 disables it.")] = -1
    rl_offload_optimizer_during_inference: Annotated[bool, Flag(
        help="Move optimizer state to CPU while rollouts are generated.")] = False
    rl_kv_cache_management_mode: Annotated[Literal["persist", "offload", "recompute"], Flag(
        help="What happens to the KV cache while training runs: persist keeps it on GPU, "
             "offload moves it to CPU, recompute frees and rebuilds it.")] = "persist"
    rl_persist_cuda_graphs: Annotated[bool, Flag(
        action="boolean_optional", type=bool,
        help="Keep inference CUDA graphs across suspend/resume instead of recapturing them.")] = False
    rl_partial_rollouts: Annotated[bool, Flag(
        action="boolean_optional",
        help="Let inference keep generating while training updates the policy (off-policy "
             "rollouts).")] = False
    rl_inference_logprobs_is_correction: Annotated[bool, Flag(
        action="boolean_optional", type=bool,
        help="Correct the loss by importance sampling with the inference log-probabilities.")] = False
    rl_importance_sampling_truncation_coef: Annotated[Optional[float], Flag(
        help="Truncation coefficient of the importance-sampling correction.")] = None
    rl_use_sequence_packing: Annotated[bool, Flag(
        action="boolean_optional", type=bool,
        help="Pack rollouts into bins of the sequence length (needs --micro-batch-size 1).")] = False
    rl_sequence_packing_max_sequences_per_bin: Annotated[int, Flag(
        help="Most sequences packed into one bin.")] = 50
    rl_sequence_packing_algo: Annotated[Literal["fifo", "round-robin"], Flag(
        help="How packed bins are spread over ranks: fifo in order, round-robin "
             "cyclically.")] = "fifo"
    rl_training_cuda_graphs: Annotated[bool, Flag(
        action="boolean_optional", type=bool,
        help="Keep CUDA graphs on during training instead of toggling them per phase.")] = False
    rl_inference_tensor_model_parallel_size: Annotated[Optional[int], Flag(
        help="Tensor parallel size of the rollout inference model; none means the training "
             "one.")] = None
    rl_inference_pipeline_model_parallel_size: Annotated[Optional[int], Flag(
        help="Pipeline parallel size of the rollout inference model; none means the training "
             "one.")] = None
    rl_inference_expert_model_parallel_size: Annotated[Optional[int], Flag(
        help="Expert parallel size of the rollout inference model; none means the training "
             "one.")] = None
    rl_inference_expert_tensor_model_parallel_size: Annotated[Optional[int], Flag(
        help="Expert tensor parallel size of the rollout inference model; none means the "
             "training one.")] = None
    rl_inference_model_unified_memory_level: Annotated[int, Flag(
        choices=(0, 1),
        help="Unified memory for the separate inference model weights: 0 off, 1 on.")] = 0
    rl_offload_inference_model_weights_when_idle: Annotated[bool, Flag(
        action="boolean_optional",
        help="Move the separate inference model weights to CPU between rollout phases.")] = False
    refit_method: Annotated[Literal["nccl", "gloo", "nvshmem"], Flag(
        help="Transport that copies trained weights into the inference model.")] = "gloo"
    rl_verify_model_weights_swap: Annotated[bool, Flag(
        action="boolean_optional",
        help="Check the first weight refit by comparing forward outputs.")] = False
    rl_skip_bos_token: Annotated[bool, Flag(
        action="boolean_optional", type=bool,
        help="Skip the BOS token at the start of sequences.")] = False
    rl_profile: Annotated[bool, Flag(help="Collect RL timer data (JSONL and CSV).")] = False
    rl_profile_dir: Annotated[Optional[str], Flag(
        help="Directory of RL profiling data; none means <save>/profiles.")] = None
    # A bare ``list``: Megatron declares this flag without a type (nargs "*").
    rl_inference_parsers: Annotated[list, Flag(  # type: ignore[type-arg]
        nargs="*", help="Response parsers enabled for rollout inference.")] = field(
        default_factory=list)

    # Not a flag: the RL data loader's counter, added only when rollouts are packed.
    consumed_train_bins: Annotated[Optional[int], Computed(
        "Packed bins consumed so far; starts at 0, present only with "
        "--rl-use-sequence-packing.")] = None
