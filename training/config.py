"""Settings for the input pipeline, the model and the training run, with their defaults.

Pipeline knobs (``InputConfig``) change throughput, never results for a fixed seed; model
hyperparameters (``ModelConfig``) change results; ``TrainConfig`` ties a run together. All
are frozen dataclasses with named defaults so a run's settings can be logged and compared.
A setting left at its default is then chosen from the version's train size
(``training.run.choice``). Import-light: no TensorFlow here, so the CLI's ``--help`` and the
DAG files stay fast.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

AUTOTUNE = -1  # tf.data.AUTOTUNE, without importing TensorFlow
CACHE_MEMORY = "memory"

DEFAULT_BATCH_SIZE = 1024
DEFAULT_SHUFFLE_BUFFER = 16_384  # examples; ~6 MiB of serialized flights records
DEFAULT_READ_BUFFER_BYTES = 4 * 2**20  # per open shard; large reads matter on gs://
DEFAULT_READ_CHUNK = 256  # records per hand-off from a parallel reader (see training.data.tabular.read_chunks)
DEFAULT_STAGING_WORKERS = 8  # parallel shard copies: object-store latency, not CPU, bounds it

DEFAULT_EPOCHS = 10
DEFAULT_LEARNING_RATE = 1e-3
DEFAULT_HIDDEN_UNITS = (256, 128)
DEFAULT_DROPOUT = 0.2
DEFAULT_ONE_HOT_MAX_VOCAB = 16  # larger vocabularies get an embedding instead
DEFAULT_EMBEDDING_MAX_DIM = 16
DEFAULT_PATIENCE = 2
DEFAULT_MIN_MARGIN = 0.01
DEFAULT_STEPS_PER_EXECUTION = 16  # amortizes per-step host overhead on GPUs; harmless on CPU
DEFAULT_SEED = 42
FAMILIES = ("auto", "trees", "mlp")  # auto: both, the better on the eval split is kept
DEFAULT_TREE_LEARNING_RATE = 0.05
DEFAULT_NUM_LEAVES = 0  # 0: 31 leaves, 63 from 50,000 train rows (training.models.trees)
DEFAULT_MAX_ROUNDS = 3000  # boosting rounds at most; early stopping usually ends sooner
DEFAULT_EARLY_STOPPING_ROUNDS = 100
DEFAULT_FOLDS, DEFAULT_REPEATS = 5, 2  # a small table's k-fold (training.run.folds); 0 folds: off

PRECISIONS = ("auto", "mixed_float16", "float32")
LR_SCHEDULES = ("cosine", "constant")
CLASS_WEIGHTS = ("auto", "balanced", "none")
# The smallest test split on which the small table (accuracy 0.80 against a 0.35
# majority class) can be told apart: at 20 rows the 95% Wilson intervals [0.58, 0.92] and
# [0.18, 0.57] are disjoint, at 19 they touch, at 10 ([0.49, 0.94]) a good model and a coin
# flip look alike. The eval split only stops training: it need only be non-empty.
DEFAULT_MIN_EVAL_EXAMPLES = 20
DEFAULT_GATE_CONFIDENCE = 0.95  # one-sided, of the paired per-example loss test
DEFAULT_PROMOTE_TOLERANCE = 0.0  # a new current model is at least as good as the old one


@dataclass(frozen=True)
class InputConfig:
    """tf.data knobs. Defaults suit a single host reading 128 MiB shards.

    Attributes:
        batch_size: Examples per batch (global batch: split across replicas).
        shuffle_files: Shuffle the shard list each epoch (training only).
        cycle_length: Shards read concurrently by interleave; AUTOTUNE = CPU count.
        block_length: Consecutive chunks (of ``read_chunk`` records) taken from one shard
            before moving to the next.
        num_parallel_reads: Interleave parallelism; AUTOTUNE lets tf.data size it.
        read_buffer_bytes: TFRecordDataset read buffer per shard.
        read_chunk: Records a parallel reader hands over at once. One at a time costs
            ~4x the CPU of reading the record (a thread hand-off per record).
        shuffle_buffer: Examples permuted together: each pool of this many is put in a
            uniformly random order, after the chunks it is cut from passed a shuffle buffer
            of as many examples' worth (training only; 0 disables).
        seed: Fixes shard order and shuffles and makes the pipeline deterministic;
            None lets interleave return elements out of order for speed.
        map_parallel_calls: Parallelism of the per-batch feature map.
        cache: None, "memory", or a local file path prefix for ``Dataset.cache``.
            Cached batches are reshuffled at batch level each epoch, since the cache
            freezes what was read on the first pass.
        prefetch: Batches prefetched; AUTOTUNE lets tf.data size it.
        ram_budget_bytes: Autotune RAM budget; None keeps tf.data's (half of RAM).
        private_threadpool_size: Own thread pool for this pipeline; None shares TF's.
        drop_remainder: Static batch dimension (useful for XLA / TPUs).
        staging_dir: Local folder to copy and verify shards into before reading
            (e.g. a GPU node's SSD); None reads the version's URIs directly.
        staging_workers: Parallel shard copies when staging.
    """

    batch_size: int = DEFAULT_BATCH_SIZE
    shuffle_files: bool = True
    cycle_length: int = AUTOTUNE
    block_length: int = 1
    num_parallel_reads: int = AUTOTUNE
    read_buffer_bytes: int = DEFAULT_READ_BUFFER_BYTES
    read_chunk: int = DEFAULT_READ_CHUNK
    shuffle_buffer: int = DEFAULT_SHUFFLE_BUFFER
    seed: int | None = None
    map_parallel_calls: int = AUTOTUNE
    cache: str | None = None
    prefetch: int = AUTOTUNE
    ram_budget_bytes: int | None = None
    private_threadpool_size: int | None = None
    drop_remainder: bool = False
    staging_dir: str | None = None
    staging_workers: int = DEFAULT_STAGING_WORKERS

    def __post_init__(self) -> None:
        _positive(self, "batch_size", "block_length", "read_buffer_bytes", "read_chunk",
                  "staging_workers")
        _autotune_or_positive(
            self, "cycle_length", "num_parallel_reads", "map_parallel_calls", "prefetch"
        )
        if self.shuffle_buffer < 0:
            raise ValueError(f"InputConfig.shuffle_buffer: expected >= 0, got {self.shuffle_buffer}")
        if self.cache is not None and not self.cache.strip():
            raise ValueError("InputConfig.cache: expected None, 'memory' or a file path, got ''")
        if self.ram_budget_bytes is not None and self.ram_budget_bytes <= 0:
            raise ValueError(
                f"InputConfig.ram_budget_bytes: expected > 0 or None, got {self.ram_budget_bytes}"
            )


@dataclass(frozen=True)
class ModelConfig:
    """Hyperparameters of the tabular model built from the manifest.

    ``family`` picks the model: ``trees`` (gradient-boosted, LightGBM), ``mlp`` (Keras), or
    ``auto``: both, keeping the one better on the eval split (``training.run.families``). The
    ``tree_*`` / ``num_leaves`` / ``*_rounds`` / ``min_data_in_leaf`` fields are the trees';
    0 leaves or 0 rows per leaf = chosen from the train size.
    """

    family: str = "auto"
    hidden_units: tuple[int, ...] = DEFAULT_HIDDEN_UNITS
    dropout: float = DEFAULT_DROPOUT
    one_hot_max_vocab: int = DEFAULT_ONE_HOT_MAX_VOCAB
    embedding_max_dim: int = DEFAULT_EMBEDDING_MAX_DIM
    learning_rate: float = DEFAULT_LEARNING_RATE
    lr_schedule: str = "cosine"  # decays to a tenth over decay_steps (set by ``plan``)
    decay_steps: int | None = None
    tree_learning_rate: float = DEFAULT_TREE_LEARNING_RATE
    num_leaves: int = DEFAULT_NUM_LEAVES
    min_data_in_leaf: int = 0
    max_rounds: int = DEFAULT_MAX_ROUNDS
    early_stopping_rounds: int = DEFAULT_EARLY_STOPPING_ROUNDS

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ValueError(f"ModelConfig.family: expected one of {FAMILIES}, got {self.family!r}")
        _positive(self, "max_rounds", "early_stopping_rounds")
        if not 0 < self.tree_learning_rate <= 1:
            raise ValueError("ModelConfig.tree_learning_rate: expected 0 < rate <= 1, "
                             f"got {self.tree_learning_rate}")
        if self.num_leaves < 0 or self.num_leaves == 1 or self.min_data_in_leaf < 0:
            raise ValueError("ModelConfig.num_leaves / min_data_in_leaf: expected 0 (auto) or "
                             f"a count (leaves >= 2), got {self.num_leaves} / "
                             f"{self.min_data_in_leaf}")
        if not self.hidden_units or any(u <= 0 for u in self.hidden_units):
            raise ValueError(f"ModelConfig.hidden_units: expected positive ints, got {self.hidden_units}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"ModelConfig.dropout: expected 0 <= dropout < 1, got {self.dropout}")
        _positive(self, "one_hot_max_vocab", "embedding_max_dim")
        if self.learning_rate <= 0:
            raise ValueError(f"ModelConfig.learning_rate: expected > 0, got {self.learning_rate}")
        if self.lr_schedule not in LR_SCHEDULES:
            raise ValueError(f"ModelConfig.lr_schedule: expected one of {LR_SCHEDULES}, "
                             f"got {self.lr_schedule!r}")


@dataclass(frozen=True)
class TrainConfig:
    """One training run: data, model, device settings, stopping rule and quality gate.

    Attributes:
        epochs: Upper bound; early stopping on eval loss usually ends sooner.
        steps_per_epoch: None = one pass over the train split (from the manifest).
        patience: Epochs without eval-loss improvement before stopping.
        min_margin: For a blessing, the task's test metrics (accuracy and AUC, macro-F1,
            RMSE relative) must beat the baseline's by this much (``training.judge.gate``).
        gate_confidence: One-sided level of the gate's paired test: the baseline's
            per-example loss minus the model's must be above zero at this level.
        promote_tolerance: A blessed model replaces the dataset's current one only if at
            least as good as it on the new version's test split, less this (absolute for
            scores, relative for errors; 0: at least as good).
        fail_unblessed: Fail the run (``ModelNotBlessedError``, CLI exit 3) when the model
            is not blessed. Off by default, as in TFX: the model is written either way and
            simply not promoted, so a not-blessed run is a result to read, not an outage.
        precision: "auto" = mixed_float16 on GPUs of compute capability >= 7.0.
        devices: Devices to mirror over (e.g. ``("/gpu:0", "/gpu:1")``); empty = every
            visible GPU, else the CPU.
        jit_compile: XLA-compile the train step.
        steps_per_execution: Train steps per host call.
        seed: Weight initialization and dropout seed (data order: ``input.seed``).
        step_budget: Optimizer steps of the whole run; None = chosen from the train size
            (``plan``), as are batch size, eval period and patience left at
            their defaults.
        class_weights: ``balanced`` weighs classes by inverse frequency; ``auto`` does when
            the largest train class is 5x the smallest or more.
        min_eval_examples: Fewer test examples (or an empty eval split, or a test split
            missing a class) refuse the run before fitting: it could not be evaluated.
        measure_stall_batches: If > 0, measure the stall ratio on this many batches
            before training and report it in metrics.json.
        work_dir: Local scratch for outputs before upload; None = a temp dir.
        overwrite: Retrain even if the run folder already holds a finished run.
        folds, repeats: A small table's (``training.run.families.SMALL_TABLE_ROWS``) family
            choice and verdict: ``repeats`` x ``folds``-fold over train and eval; 0 folds skips
            it (chosen on eval, judged on test, as a larger table is).
    """

    input: InputConfig = field(default_factory=InputConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    epochs: int = DEFAULT_EPOCHS
    steps_per_epoch: int | None = None
    patience: int = DEFAULT_PATIENCE
    min_margin: float = DEFAULT_MIN_MARGIN
    precision: str = "auto"
    devices: tuple[str, ...] = ()
    jit_compile: bool = False
    steps_per_execution: int = DEFAULT_STEPS_PER_EXECUTION
    seed: int = DEFAULT_SEED
    measure_stall_batches: int = 0
    work_dir: str | None = None
    overwrite: bool = False
    step_budget: int | None = None
    class_weights: str = "none"
    min_eval_examples: int = DEFAULT_MIN_EVAL_EXAMPLES
    gate_confidence: float = DEFAULT_GATE_CONFIDENCE
    promote_tolerance: float = DEFAULT_PROMOTE_TOLERANCE
    fail_unblessed: bool = False
    folds: int = DEFAULT_FOLDS
    repeats: int = DEFAULT_REPEATS

    def __post_init__(self) -> None:
        _positive(self, "epochs", "patience", "steps_per_execution", "min_eval_examples",
                  "repeats")
        if not isinstance(self.folds, int) or self.folds < 0 or self.folds == 1:
            raise ValueError(f"TrainConfig.folds: expected 0 (no k-fold) or 2 or more, got "
                             f"{self.folds!r}")
        if self.step_budget is not None and self.step_budget <= 0:
            raise ValueError(f"TrainConfig.step_budget: expected > 0 or None, got {self.step_budget}")
        if self.class_weights not in CLASS_WEIGHTS:
            raise ValueError(f"TrainConfig.class_weights: expected one of {CLASS_WEIGHTS}, "
                             f"got {self.class_weights!r}")
        if self.steps_per_epoch is not None and self.steps_per_epoch <= 0:
            raise ValueError(f"TrainConfig.steps_per_epoch: expected > 0 or None, got {self.steps_per_epoch}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"TrainConfig.precision: expected one of {PRECISIONS}, got {self.precision!r}")
        if not 0.0 <= self.min_margin < 0.5:
            raise ValueError(f"TrainConfig.min_margin: expected 0 <= margin < 0.5, got {self.min_margin}")
        if self.measure_stall_batches < 0:
            raise ValueError("TrainConfig.measure_stall_batches: expected >= 0")
        if not 0.5 <= self.gate_confidence < 1.0:
            raise ValueError(f"TrainConfig.gate_confidence: expected 0.5 <= level < 1, got "
                             f"{self.gate_confidence}")
        if not 0.0 <= self.promote_tolerance < 1.0:
            raise ValueError(f"TrainConfig.promote_tolerance: expected 0 <= tolerance < 1, got "
                             f"{self.promote_tolerance}")

    def with_overrides(self, **overrides: object) -> TrainConfig:
        """A copy with flat overrides routed to the part that owns them: ``batch_size`` to
        ``input``, ``hidden_units`` to ``model``, ``epochs`` here. A name that two parts
        share (``seed``) goes to this run's own field; set ``input`` for the data seed.

        Raises:
            ValueError: an override names no field of any part.
        """
        parts: dict[str, dict[str, object]] = {"input": {}, "model": {}, "run": {}}
        for key, value in overrides.items():
            if key in _field_names(TrainConfig) and key not in ("input", "model"):
                parts["run"][key] = value
            elif key in _field_names(InputConfig):
                parts["input"][key] = value
            elif key in _field_names(ModelConfig):
                parts["model"][key] = value
            else:
                raise ValueError(f"unknown training setting {key!r}")
        return replace(
            self, input=replace(self.input, **parts["input"]),
            model=replace(self.model, **parts["model"]), **parts["run"],
        )


@dataclass(frozen=True)
class BenchConfig:
    """bench-input settings: every pipeline gets the same warm-up and batch count."""

    batch_size: int = DEFAULT_BATCH_SIZE
    warmup_batches: int = 20
    batches: int = 200
    naive_batches: int = 50  # the naive pipeline is ~10x slower: fewer batches, same size
    stall_batches: int = 100
    repeats: int = 3
    split: str = "train"
    seed: int | None = None

    def __post_init__(self) -> None:
        _positive(self, "batch_size", "batches", "naive_batches", "stall_batches", "repeats")
        if self.warmup_batches < 0:
            raise ValueError("BenchConfig.warmup_batches: expected >= 0")


def _field_names(cls: type) -> set[str]:
    return {f.name for f in fields(cls)}


def _positive(obj: object, *names: str) -> None:
    for name in names:
        value = getattr(obj, name)
        if not isinstance(value, int) or value <= 0:
            raise ValueError(f"{type(obj).__name__}.{name}: expected a positive int, got {value!r}")


def _autotune_or_positive(obj: object, *names: str) -> None:
    for name in names:
        value = getattr(obj, name)
        if value != AUTOTUNE and (not isinstance(value, int) or value <= 0):
            raise ValueError(
                f"{type(obj).__name__}.{name}: expected AUTOTUNE (-1) or a positive int, got {value!r}"
            )
