"""The RL (GRPO) settings, spelled and defaulted exactly as Megatron's ``rl`` group."""


from typing import Annotated, Literal, Optional

from megaplug import Computed, Flag, options

Granularity = Literal["R", "G", "B"]


@options
class RLOptions:
    """Flags of reinforcement-learning post-training (GRPO rollouts, refit, inference model)."""

    perform_rl_step: bool = Flag(
        default=False,
        help="Train with the RL (GRPO) step instead of the plain language-model step.")
    rl_prompts_per_eval: int = Flag(
        default=32,
        help="Prompts evaluated per RL task at each evaluation (evaluation can be costly).")
    grpo_prompts_per_step: int = Flag(
        default=32,
        help="Rollout groups (prompts) collected per GRPO step.")
    grpo_group_size: int = Flag(default=2, help="Rollouts sampled per prompt in a GRPO group.")
    rl_generation_lag: Optional[float] = Flag(
        default=None,
        help="Trainer batches of rollout generation lag allowed; above 0 needs "
             "--rl-partial-rollouts.")
    rl_max_inflight_requests: Optional[int] = Flag(
        default=None,
        help="Upper bound on rollout requests in flight at once; none means no bound.")
    rl_submission_granularity: Granularity = Flag(
        default="B",
        help="Unit in which rollout work is submitted: R a rollout, G a group, B a whole "
             "batch of groups.")
    rl_consumption_granularity: Granularity = Flag(
        default="B",
        help="Unit in which generated rollouts are consumed by training: G a group, B a "
             "batch (R is not supported).")
    rl_durable_rollout_bank: bool = Flag(
        default=False,
        help="Keep generated rollouts in a durable bank on disk.")
    rl_rollout_bank_dir: Optional[str] = Flag(
        default=None,
        help="Directory of the durable rollout bank.")
    rl_rollout_bank_max_bytes: int = Flag(
        default=0,
        help="Size limit of the durable rollout bank in bytes; 0 means unlimited.")
    grpo_iterations: int = Flag(
        default=2,
        help="Optimizer passes over each batch of generated rollouts.")
    grpo_clamp_eps_lower: float = Flag(
        default=0.01,
        help="Lower clipping bound of the GRPO policy ratio.")
    grpo_clamp_eps_upper: float = Flag(
        default=0.01,
        help="Upper clipping bound of the GRPO policy ratio (equal to the lower one for "
             "vanilla GRPO).")
    grpo_kl_beta: float = Flag(default=0.001, help="Weight of the KL term in the GRPO loss.")
    grpo_entropy_term_weight: float = Flag(
        default=0.0,
        help="Weight of the entropy term in the GRPO loss.")
    grpo_filter_groups_with_same_reward: bool = Flag(
        default=False,
        help="Drop rollout groups whose rollouts all got the same reward.")
    langrl_env_config: Optional[str] = Flag(
        default=None,
        help="YAML file describing the RL environments.")
    rl_default_temperature: float = Flag(
        default=1.0,
        help="Sampling temperature of rollout inference.")
    rl_default_top_p: float = Flag(
        default=0,
        help="Top-p of rollout inference sampling; 0 disables it.")
    rl_default_top_k: int = Flag(
        default=-1,
        help="Top-k of rollout inference sampling; -1 disables it.")
    rl_offload_optimizer_during_inference: bool = Flag(
        default=False,
        help="Move optimizer state to CPU while rollouts are generated.")
    rl_kv_cache_management_mode: Literal["persist", "offload", "recompute"] = Flag(
        default="persist",
        help="What happens to the KV cache while training runs: persist keeps it on GPU, "
             "offload moves it to CPU, recompute frees and rebuilds it.")
    rl_persist_cuda_graphs: bool = Flag(
        default=False,
        action="boolean_optional", type=bool,
        help="Keep inference CUDA graphs across suspend/resume instead of recapturing them.")
    rl_partial_rollouts: bool = Flag(
        default=False,
        action="boolean_optional",
        help="Let inference keep generating while training updates the policy (off-policy "
             "rollouts).")
    rl_inference_logprobs_is_correction: bool = Flag(
        default=False,
        action="boolean_optional", type=bool,
        help="Correct the loss by importance sampling with the inference log-probabilities.")
    rl_importance_sampling_truncation_coef: Optional[float] = Flag(
        default=None,
        help="Truncation coefficient of the importance-sampling correction.")
    rl_use_sequence_packing: bool = Flag(
        default=False,
        action="boolean_optional", type=bool,
        help="Pack rollouts into bins of the sequence length (needs --micro-batch-size 1).")
    rl_sequence_packing_max_sequences_per_bin: int = Flag(
        default=50,
        help="Most sequences packed into one bin.")
    rl_sequence_packing_algo: Literal["fifo", "round-robin"] = Flag(
        default="fifo",
        help="How packed bins are spread over ranks: fifo in order, round-robin "
             "cyclically.")
    rl_training_cuda_graphs: bool = Flag(
        default=False,
        action="boolean_optional", type=bool,
        help="Keep CUDA graphs on during training instead of toggling them per phase.")
    rl_inference_tensor_model_parallel_size: Optional[int] = Flag(
        default=None,
        help="Tensor parallel size of the rollout inference model; none means the training "
             "one.")
    rl_inference_pipeline_model_parallel_size: Optional[int] = Flag(
        default=None,
        help="Pipeline parallel size of the rollout inference model; none means the training "
             "one.")
    rl_inference_expert_model_parallel_size: Optional[int] = Flag(
        default=None,
        help="Expert parallel size of the rollout inference model; none means the training "
             "one.")
    rl_inference_expert_tensor_model_parallel_size: Optional[int] = Flag(
        default=None,
        help="Expert tensor parallel size of the rollout inference model; none means the "
             "training one.")
    rl_inference_model_unified_memory_level: int = Flag(
        default=0,
        choices=(0, 1),
        help="Unified memory for the separate inference model weights: 0 off, 1 on.")
    rl_offload_inference_model_weights_when_idle: bool = Flag(
        default=False,
        action="boolean_optional",
        help="Move the separate inference model weights to CPU between rollout phases.")
    refit_method: Literal["nccl", "gloo", "nvshmem"] = Flag(
        default="gloo",
        help="Transport that copies trained weights into the inference model.")
    rl_verify_model_weights_swap: bool = Flag(
        default=False,
        action="boolean_optional",
        help="Check the first weight refit by comparing forward outputs.")
    rl_skip_bos_token: bool = Flag(
        default=False,
        action="boolean_optional", type=bool,
        help="Skip the BOS token at the start of sequences.")
    rl_profile: bool = Flag(default=False, help="Collect RL timer data (JSONL and CSV).")
    rl_profile_dir: Optional[str] = Flag(
        default=None,
        help="Directory of RL profiling data; none means <save>/profiles.")
    # A bare ``list``: Megatron declares this flag without a type (nargs "*").
    rl_inference_parsers: Annotated[list, Flag(  # type: ignore[type-arg]
        nargs="*", help="Response parsers enabled for rollout inference.")] = []

    # Not a flag: what Megatron's training loop reads to time GRPO's collection phases.
    grpo_samples_per_iteration: Optional[int] = Computed(
        "Rollouts one GRPO step generates: --grpo-prompts-per-step x --grpo-group-size; "
        "present only with --perform-rl-step.", default=None)

    rl_enforce_generation_order: Optional[bool] = Computed(
        "Whether generations are consumed in submission order (a generation batch above 1); "
        "present only in an RL run of Megatron 0.17 and 0.18.", default=None)

    # Not a flag: the RL data loader's counter, added only when rollouts are packed.
    consumed_train_bins: Optional[int] = Computed(
        "Packed bins consumed so far; starts at 0, present only with "
        "--rl-use-sequence-packing.", default=None)
