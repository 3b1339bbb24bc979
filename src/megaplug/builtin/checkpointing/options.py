"""The checkpointing plugin's settings: where and how often to save, what and how to load.

Spellings, defaults and types follow Megatron's parser; ``--no-save-optim`` and friends
default to ``None`` (not ``False``) as they do there. ``use_dist_ckpt`` is computed.
"""


from typing import Literal, Optional

from typing_extensions import Annotated

from megaplug import Computed, Flag, options

CkptFormat = Literal["torch", "torch_dist", "torch_dcp", "fsdp_dtensor"]
Strictness = Literal["assume_ok_unexpected", "log_unexpected", "log_all", "raise_unexpected",
                     "raise_all", "return_unexpected", "return_all", "ignore_all"]


@options
class CheckpointingOptions:
    """Every flag of the ``checkpointing`` plugin, plus the computed ``use_dist_ckpt``."""

    # -- saving --------------------------------------------------------------------------
    save: Annotated[Optional[str], Flag(help="Directory to save checkpoints to.")] = None
    save_interval: Annotated[Optional[int], Flag(
        "--save-interval", "--persistent-save-interval",
        help="Iterations between persistent checkpoints (needed with --save).")] = None
    save_retain_interval: Annotated[Optional[int], Flag(
        help="Keep only checkpoints at multiples of this many iterations; delete the rest.")] = None
    save_params_interval: Annotated[Optional[int], Flag(
        help="Iterations between dumps of the model parameters.")] = None
    save_activations_interval: Annotated[Optional[int], Flag(
        help="Iterations between dumps of activations.")] = None
    save_tokens_per_expert_interval: Annotated[Optional[int], Flag(
        help="Iterations between dumps of the tokens routed to each expert.")] = None
    save_wgrads_interval: Annotated[Optional[int], Flag(
        help="Iterations between dumps of weight gradients.")] = None
    save_dgrads_interval: Annotated[Optional[int], Flag(
        help="Iterations between dumps of activation gradients.")] = None
    no_save_optim: Annotated[Optional[bool], Flag(
        help="Leave the optimizer state out of saved checkpoints.")] = None
    no_save_rng: Annotated[Optional[bool], Flag(
        help="Leave the random-number-generator state out of saved checkpoints.")] = None
    save_tokenizer_assets: Annotated[bool, Flag(
        "--no-save-tokenizer-assets", "--disable-save-tokenizer-assets",
        help="Do not copy the tokenizer files into checkpoints.")] = True

    # -- non-persistent (frequent, short-lived) checkpoints ------------------------------
    non_persistent_save_interval: Annotated[Optional[int], Flag(
        help="Iterations between non-persistent checkpoints.")] = None
    non_persistent_ckpt_type: Annotated[Optional[Literal["global", "local", "in_memory"]], Flag(
        help="Where non-persistent checkpoints go: a global directory or node-local storage.")] = None
    non_persistent_global_ckpt_dir: Annotated[Optional[str], Flag(
        help="Directory of global non-persistent checkpoints.")] = None
    non_persistent_local_ckpt_dir: Annotated[Optional[str], Flag(
        help="Node-local directory of local non-persistent checkpoints.")] = None
    non_persistent_local_ckpt_algo: Annotated[Literal["fully_parallel", "atomic"], Flag(
        help="How local non-persistent checkpoints are written.")] = "fully_parallel"
    replication: Annotated[bool, Flag(
        help="Replicate local checkpoints on other nodes.")] = False
    replication_jump: Annotated[Optional[int], Flag(
        help="Rank distance between a local checkpoint and its replica.")] = None
    replication_factor: Annotated[int, Flag(help="Copies kept of each local checkpoint.")] = 2

    # -- loading -------------------------------------------------------------------------
    load: Annotated[Optional[str], Flag(help="Directory to load a checkpoint from.")] = None
    pretrained_checkpoint: Annotated[Optional[str], Flag(
        help="Directory of a pretrained checkpoint to fine-tune from.")] = None
    ckpt_step: Annotated[Optional[int], Flag(
        help="Load the checkpoint of this iteration instead of the latest.")] = None
    finetune: Annotated[bool, Flag(
        help="Load only the model weights and start counting iterations from zero.")] = False
    no_load_optim: Annotated[Optional[bool], Flag(
        help="Do not load the optimizer state from the checkpoint.")] = None
    no_load_rng: Annotated[Optional[bool], Flag(
        help="Do not load the random-number-generator state from the checkpoint.")] = None
    load_main_params_from_ckpt: Annotated[bool, Flag(
        help="Initialize the fp32 main parameters from the checkpoint (with --no-load-optim).")] = False
    override_ckpt_iteration: Annotated[Optional[int], Flag(
        help="Treat the loaded checkpoint as taken at this iteration and replay data from there.")] = None
    exit_on_missing_checkpoint: Annotated[bool, Flag(
        help="Stop instead of starting from scratch when --load has no checkpoint.")] = False
    use_checkpoint_args: Annotated[bool, Flag(
        help="Take the model's arguments from the checkpoint being loaded.")] = False
    use_mp_args_from_checkpoint_args: Annotated[bool, Flag(
        help="Also take the model-parallel sizes from the checkpoint's arguments.")] = False
    use_tokenizer_model_from_checkpoint_args: Annotated[bool, Flag(
        "--no-use-tokenizer-model-from-checkpoint-args",
        "--disable-use-tokenizer-model-from-checkpoint-args",
        help="Keep the command line's tokenizer model instead of the checkpoint's.")] = True

    # -- format and conversion ----------------------------------------------------------------
    ckpt_format: Annotated[CkptFormat, Flag(help="Checkpoint format to save in.")] = "torch_dist"
    auto_detect_ckpt_format: Annotated[bool, Flag(
        help="Detect the format of the checkpoint being loaded.")] = False
    ckpt_convert_format: Annotated[Optional[Literal["torch", "torch_dist"]], Flag(
        help="Convert the loaded checkpoint to this format and save it to --ckpt-convert-save.")] = None
    ckpt_convert_save: Annotated[Optional[str], Flag(
        help="Directory for the converted checkpoint.")] = None
    ckpt_convert_update_legacy_dist_opt_format: Annotated[bool, Flag(
        help="Rewrite a legacy distributed-optimizer checkpoint layout while converting.")] = False
    use_dist_ckpt_deprecated: Annotated[bool, Flag(
        "--use-dist-ckpt", help="Deprecated and ignored: choose the format with --ckpt-format.")] = False
    use_dist_ckpt: Annotated[bool, Computed(
        "Whether checkpoints use the distributed format (every format but 'torch').")] = False

    # -- distributed checkpoint behaviour ------------------------------------------------
    ckpt_fully_parallel_save: Annotated[bool, Flag(
        "--no-ckpt-fully-parallel-save",
        help="Let one data-parallel rank write each shard instead of spreading the writes.")] = True
    ckpt_fully_parallel_save_deprecated: Annotated[bool, Flag(
        "--ckpt-fully-parallel-save",
        help="Deprecated and ignored: parallel save is the default.")] = False
    ckpt_fully_parallel_load: Annotated[bool, Flag(
        help="Spread checkpoint reads across data-parallel ranks and exchange the shards.")] = False
    ckpt_fully_parallel_load_exchange_algo: Annotated[
        Literal["broadcast", "gather_rounds", "gather_object"],
        Flag(help="How ranks exchange shards in a fully parallel load.")] = "broadcast"
    ckpt_fully_parallel_load_per_rank_objects: Annotated[bool, Flag(
        help="Load non-tensor objects on every rank in a fully parallel load.")] = False
    ckpt_fully_parallel_save_process_group: Annotated[Literal["dp", "ep_dp"], Flag(
        help="Process group that shares the writes of a fully parallel save.")] = "dp"
    ckpt_fully_parallel_load_process_group: Annotated[Literal["dp", "ep_dp"], Flag(
        help="Process group that shares the reads of a fully parallel load.")] = "dp"
    ckpt_assume_constant_structure: Annotated[bool, Flag(
        help="Reuse the save plan of the first checkpoint; the model structure never changes.")] = False
    ckpt_pg_tensors_cache_path: Annotated[Optional[str], Flag(
        help="Directory caching how tensors are distributed over process groups.")] = None
    ckpt_pg_tensors_cache_create: Annotated[bool, Flag(
        help="Write the process-group tensor cache instead of reading it.")] = False
    ckpt_load_validate_sharding_integrity: Annotated[bool, Flag(
        "--no-ckpt-load-validate-sharding-integrity",
        "--disable-ckpt-load-validate-sharding-integrity",
        help="Skip the sharding-consistency check when loading.")] = True
    strict_fsdp_dtensor_load: Annotated[bool, Flag(
        "--no-strict-fsdp-dtensor-load", "--disable-strict-fsdp-dtensor-load",
        help="Tolerate missing or unexpected keys when loading fsdp_dtensor checkpoints.")] = True
    dist_ckpt_strictness: Annotated[Strictness, Flag(
        help="What to do about keys that differ between the model and a distributed checkpoint.")
    ] = "assume_ok_unexpected"
    dist_ckpt_save_pre_mcore_014: Annotated[bool, Flag(
        help="Save distributed checkpoints in the layout of Megatron Core before 0.14.")] = False
    dist_ckpt_optim_fully_reshardable: Annotated[bool, Flag(
        help="Save the distributed optimizer so it can be loaded with any parallelism.")] = False
    distrib_optim_fully_reshardable_mem_efficient: Annotated[bool, Flag(
        help="Save fully reshardable optimizer state with less memory (needs Gloo groups).")] = False
    dist_ckpt_workers: Annotated[int, Flag(
        help="Worker processes of an asynchronous distributed save.")] = 1
    ckpt_drop_redundant_extra_state: Annotated[bool, Flag(
        help="Do not write Transformer Engine extra state that can be rebuilt.")] = False
    verify_integrity: Annotated[bool, Flag(help="Verify checkpoint files after loading.")] = False

    # -- asynchronous save ----------------------------------------------------------------------
    async_save: Annotated[bool, Flag(
        help="Write checkpoints in the background (needs --use-persistent-ckpt-worker).")] = False
    async_strategy: Annotated[Literal["nvrx", "mcore"], Flag(
        help="Library that runs asynchronous saves.")] = "nvrx"
    use_persistent_ckpt_worker: Annotated[bool, Flag(
        help="Keep one background process for asynchronous saves.")] = False
    async_ckpt_cpu_priority: Annotated[int, Flag(
        help="CPU scheduling priority of the asynchronous save worker.")] = 10
    async_ckpt_io_priority: Annotated[int, Flag(
        help="I/O scheduling priority of the asynchronous save worker.")] = 3
    async_ckpt_use_cpu_shm: Annotated[bool, Flag(
        help="Stage asynchronous saves in CPU shared memory.")] = False
