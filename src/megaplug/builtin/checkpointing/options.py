"""The checkpointing plugin's settings: where and how often to save, what and how to load.

Spellings, defaults and types follow Megatron's parser; ``--no-save-optim`` and friends
default to ``None`` (not ``False``) as they do there. ``use_dist_ckpt`` is computed.
"""


from typing import Literal, Optional


from megaplug import Computed, Flag, FlagDeclarations, options

CkptFormat = Literal["torch", "torch_dist", "torch_dcp", "fsdp_dtensor"]
Strictness = Literal["assume_ok_unexpected", "log_unexpected", "log_all", "raise_unexpected",
                     "raise_all", "return_unexpected", "return_all", "ignore_all"]


@options
class CheckpointingOptions:
    """Every flag of the ``checkpointing`` plugin, plus the computed ``use_dist_ckpt``."""

    # -- saving --------------------------------------------------------------------------
    save: Optional[str] = Flag(default=None, help="Directory to save checkpoints to.")
    save_interval: Optional[int] = Flag(
        "--save-interval", "--persistent-save-interval", default=None,
        help="Iterations between persistent checkpoints (needed with --save).")
    save_retain_interval: Optional[int] = Flag(
        default=None,
        help="Keep only checkpoints at multiples of this many iterations; delete the rest.")
    save_params_interval: Optional[int] = Flag(
        default=None,
        help="Iterations between dumps of the model parameters.")
    save_activations_interval: Optional[int] = Flag(
        default=None,
        help="Iterations between dumps of activations.")
    save_tokens_per_expert_interval: Optional[int] = Flag(
        default=None,
        help="Iterations between dumps of the tokens routed to each expert.")
    save_wgrads_interval: Optional[int] = Flag(
        default=None,
        help="Iterations between dumps of weight gradients.")
    save_dgrads_interval: Optional[int] = Flag(
        default=None,
        help="Iterations between dumps of activation gradients.")
    no_save_optim: Optional[bool] = Flag(
        default=None,
        help="Leave the optimizer state out of saved checkpoints.")
    no_save_rng: Optional[bool] = Flag(
        default=None,
        help="Leave the random-number-generator state out of saved checkpoints.")
    save_tokenizer_assets: bool = Flag(
        "--no-save-tokenizer-assets", "--disable-save-tokenizer-assets", default=True,
        help="Do not copy the tokenizer files into checkpoints.")

    # -- non-persistent (frequent, short-lived) checkpoints ------------------------------
    non_persistent_save_interval: Optional[int] = Flag(
        default=None,
        help="Iterations between non-persistent checkpoints.")
    non_persistent_ckpt_type: Optional[Literal["global", "local", "in_memory"]] = Flag(
        default=None,
        help="Where non-persistent checkpoints go: a global directory or node-local storage.")
    non_persistent_global_ckpt_dir: Optional[str] = Flag(
        default=None,
        help="Directory of global non-persistent checkpoints.")
    non_persistent_local_ckpt_dir: Optional[str] = Flag(
        default=None,
        help="Node-local directory of local non-persistent checkpoints.")
    non_persistent_local_ckpt_algo: Literal["fully_parallel", "atomic"] = Flag(
        default="fully_parallel",
        help="How local non-persistent checkpoints are written.")
    replication: bool = Flag(default=False, help="Replicate local checkpoints on other nodes.")
    replication_jump: Optional[int] = Flag(
        default=None,
        help="Rank distance between a local checkpoint and its replica.")
    replication_factor: int = Flag(default=2, help="Copies kept of each local checkpoint.")

    # -- loading -------------------------------------------------------------------------
    load: Optional[str] = Flag(default=None, help="Directory to load a checkpoint from.")
    pretrained_checkpoint: Optional[str] = Flag(
        default=None,
        help="Directory of a pretrained checkpoint to fine-tune from.")
    ckpt_step: Optional[int] = Flag(
        default=None,
        help="Load the checkpoint of this iteration instead of the latest.")
    finetune: bool = Flag(
        default=False,
        help="Load only the model weights and start counting iterations from zero.")
    no_load_optim: Optional[bool] = Flag(
        default=None,
        help="Do not load the optimizer state from the checkpoint.")
    no_load_rng: Optional[bool] = Flag(
        default=None,
        help="Do not load the random-number-generator state from the checkpoint.")
    load_main_params_from_ckpt: bool = Flag(
        default=False,
        help="Initialize the fp32 main parameters from the checkpoint (with --no-load-optim).")
    override_ckpt_iteration: Optional[int] = Flag(
        default=None,
        help="Treat the loaded checkpoint as taken at this iteration and replay data from there.")
    exit_on_missing_checkpoint: bool = Flag(
        default=False,
        help="Stop instead of starting from scratch when --load has no checkpoint.")
    use_checkpoint_args: bool = Flag(
        default=False,
        help="Take the model's arguments from the checkpoint being loaded.")
    use_mp_args_from_checkpoint_args: bool = Flag(
        default=False,
        help="Also take the model-parallel sizes from the checkpoint's arguments.")
    use_tokenizer_model_from_checkpoint_args: bool = Flag(
        "--no-use-tokenizer-model-from-checkpoint-args",
        "--disable-use-tokenizer-model-from-checkpoint-args", default=True,
        help="Keep the command line's tokenizer model instead of the checkpoint's.")

    # -- format and conversion ----------------------------------------------------------------
    ckpt_format: CkptFormat = Flag(default="torch_dist", help="Checkpoint format to save in.")
    auto_detect_ckpt_format: bool = Flag(
        default=False,
        help="Detect the format of the checkpoint being loaded.")
    ckpt_convert_format: Optional[Literal["torch", "torch_dist"]] = Flag(
        default=None,
        help="Convert the loaded checkpoint to this format and save it to --ckpt-convert-save.")
    ckpt_convert_save: Optional[str] = Flag(
        default=None,
        help="Directory for the converted checkpoint.")
    ckpt_convert_update_legacy_dist_opt_format: bool = Flag(
        default=False,
        help="Rewrite a legacy distributed-optimizer checkpoint layout while converting.")
    use_dist_ckpt_deprecated: bool = Flag(
        "--use-dist-ckpt", default=False,
        help="Deprecated and ignored: choose the format with --ckpt-format.")
    use_dist_ckpt: bool = Computed(
        "Whether checkpoints use the distributed format (every format but 'torch').", default=False)

    # -- distributed checkpoint behaviour ------------------------------------------------
    ckpt_fully_parallel_save: bool = Flag(
        "--no-ckpt-fully-parallel-save", default=True,
        help="Let one data-parallel rank write each shard instead of spreading the writes.")
    ckpt_fully_parallel_save_deprecated: bool = Flag(
        "--ckpt-fully-parallel-save", default=False,
        help="Deprecated and ignored: parallel save is the default.")
    ckpt_fully_parallel_load: bool = Flag(
        default=False,
        help="Spread checkpoint reads across data-parallel ranks and exchange the shards.")
    ckpt_fully_parallel_load_exchange_algo: Literal[
        "broadcast", "gather_rounds", "gather_object"] = Flag(
        default="broadcast",
        help="How ranks exchange shards in a fully parallel load.")
    ckpt_fully_parallel_load_per_rank_objects: bool = Flag(
        default=False,
        help="Load non-tensor objects on every rank in a fully parallel load.")
    ckpt_fully_parallel_save_process_group: Literal["dp", "ep_dp"] = Flag(
        default="dp",
        help="Process group that shares the writes of a fully parallel save.")
    ckpt_fully_parallel_load_process_group: Literal["dp", "ep_dp"] = Flag(
        default="dp",
        help="Process group that shares the reads of a fully parallel load.")
    ckpt_assume_constant_structure: bool = Flag(
        default=False,
        help="Reuse the save plan of the first checkpoint; the model structure never changes.")
    ckpt_pg_tensors_cache_path: Optional[str] = Flag(
        default=None,
        help="Directory caching how tensors are distributed over process groups.")
    ckpt_pg_tensors_cache_create: bool = Flag(
        default=False,
        help="Write the process-group tensor cache instead of reading it.")
    ckpt_load_validate_sharding_integrity: bool = Flag(
        "--no-ckpt-load-validate-sharding-integrity",
        "--disable-ckpt-load-validate-sharding-integrity", default=True,
        help="Skip the sharding-consistency check when loading.")
    strict_fsdp_dtensor_load: bool = Flag(
        "--no-strict-fsdp-dtensor-load", "--disable-strict-fsdp-dtensor-load", default=True,
        help="Tolerate missing or unexpected keys when loading fsdp_dtensor checkpoints.")
    dist_ckpt_strictness: Strictness = Flag(
        default="assume_ok_unexpected",
        help="What to do about keys that differ between the model and a distributed checkpoint.")
    dist_ckpt_save_pre_mcore_014: bool = Flag(
        default=False,
        help="Save distributed checkpoints in the layout of Megatron Core before 0.14.")
    dist_ckpt_optim_fully_reshardable: bool = Flag(
        default=False,
        help="Save the distributed optimizer so it can be loaded with any parallelism.")
    distrib_optim_fully_reshardable_mem_efficient: bool = Flag(
        default=False,
        help="Save fully reshardable optimizer state with less memory (needs Gloo groups).")
    dist_ckpt_workers: int = Flag(
        default=1,
        help="Worker processes of an asynchronous distributed save.")
    ckpt_drop_redundant_extra_state: bool = Flag(
        default=False,
        help="Do not write Transformer Engine extra state that can be rebuilt.")
    verify_integrity: bool = Flag(default=False, help="Verify checkpoint files after loading.")

    # -- asynchronous save ----------------------------------------------------------------------
    async_save: bool = Flag(
        default=False,
        help="Write checkpoints in the background (needs --use-persistent-ckpt-worker).")
    async_strategy: Literal["nvrx", "mcore"] = Flag(
        default="nvrx",
        help="Library that runs asynchronous saves.")
    use_persistent_ckpt_worker: bool = Flag(
        default=False,
        help="Keep one background process for asynchronous saves.")
    async_ckpt_cpu_priority: int = Flag(
        default=10,
        help="CPU scheduling priority of the asynchronous save worker.")
    async_ckpt_io_priority: int = Flag(
        default=3,
        help="I/O scheduling priority of the asynchronous save worker.")
    async_ckpt_use_cpu_shm: bool = Flag(
        default=False,
        help="Stage asynchronous saves in CPU shared memory.")


def declare(flags: FlagDeclarations) -> None:
    """Every checkpointing flag: the options class, and a retired flag Megatron gives no type
    (an options field would infer ``str``)."""
    flags.add_options(CheckpointingOptions)
    flags.add_argument("--dist-ckpt-format", dest="dist_ckpt_format_deprecated",
                       help="Deprecated and ignored: choose the format with --ckpt-format.")
