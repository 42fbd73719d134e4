"""The types of the chapters' parameters, named so that a parameters cell stays one plain line
per parameter.

A chapter's parameters cell imports these and annotates every parameter with one
(``n_boot: Count = 1000``). The runner (:mod:`tokenbook.book.runner`) reads the annotation without
running the notebook and checks every value before anything executes: ``tokenbook run``,
``tokenbook sweep``, ``tokenbook list`` and the chapters' setup cell (plain papermill) apply the
same checks. The names keep each line papermill-readable (papermill's parser drops a line with a
second ``=``, e.g. the ``">= 1"`` of an inline ``Annotated[int, ">= 1"]``).

Bounds are strings in ``Annotated[...]``: ``">= 1"``, ``"> 0"``, ``"0..1"`` (closed),
``"(0, 1)"`` / ``"[0, 1)"`` (interval notation), and ``"len >= 1"`` for a non-empty list. Every
float must be finite (NaN and infinities are rejected). :data:`REQUIREMENTS` lists the data
each chapter needs at paper scale (or from released tables), checked with the parameters.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal, Optional, Union

# -- choices ----------------------------------------------------------------------------------
#: the scale of a run: the library's tiny world (CPU) or the paper's checkpoints and data
Scale = Literal["tiny", "paper"]
#: the off condition of a tiny-scale claim: shuffled inputs (no retraining) or the world
#: generated without the mechanism (retrains)
NullControl = Literal["shuffle", "world"]
#: segments merged by a token straddling a word boundary: share by length, or drop the unit
MergedSegments = Literal["split", "drop"]
#: where the grounded chapters' word surprisals come from
SurprisalSource = Literal["models", "released"]
#: the captions scored at paper scale by the typology chapter
CaptionDataset = Literal["xm3600", "multi30k"]
#: how the memorisation ensemble's training subsets are drawn
EnsembleDesign = Literal["balanced", "random"]
#: the memorisation models' size
ModelPreset = Literal["tiny", "base"]
#: the cancellation chapter's paper-scale prompts
MathDataset = Literal["gsm8k", "dapo"]
#: what counts as the same token in the gradient dumps (tokenbook.cancellation_hypothesis.gradients.UNIT_KEYS)
GradientUnit = Literal["prompt_token", "prompt_position_token"]
#: the tiny arithmetic world's answer formats: one template, or equivalent variants per step
ArithmeticFormats = Literal["fixed", "variants"]
#: the grounded tiny world's caption style (tokenbook.worlds.scenes.make_world)
WorldStyle = Literal["typology", "uid"]
#: the UID world's register: its word order and story process (tokenbook.grounded.tiny.REGISTERS)
StoryRegister = Literal["book", "subject first, bare, protagonist 0.5"]

# -- numbers ----------------------------------------------------------------------------------
#: a random seed (non-negative integer)
Seed = Annotated[int, ">= 0"]
#: a count that must be at least 1 (resamples, steps, models, sizes, workers)
Count = Annotated[int, ">= 1"]
#: a count where 0 means "the default" (whole batch, all in this process, …)
CountOrZero = Annotated[int, ">= 0"]
#: a count of at least 2 (rollouts per group: a group of 1 has no variance)
GroupCount = Annotated[int, ">= 2"]
#: a share in [0, 1]
Share = Annotated[float, "0..1"]
#: a share strictly between 0 and 1 (confidence levels, test levels, subset ratios)
OpenShare = Annotated[float, "(0, 1)"]
#: a positive finite number (learning rates, temperatures, FLOP/s)
Positive = Annotated[float, "> 0"]
#: a grey level of an 8-bit image
GreyLevel = Annotated[int, "0..255"]

# -- lists ------------------------------------------------------------------------------------
#: language codes (strings; ``no`` stays Norwegian); empty: every language available
Languages = list[str]
#: at least one language code
SomeLanguages = Annotated[list[str], "len >= 1"]
#: the cancellation chapter's size sweep: tiny ``[hidden_size, num_layers]`` pairs or paper
#: model ids; at least one
SizeSweep = Annotated[list[Union[Annotated[list[Count], "len >= 2"], str]], "len >= 1"]

# -- optional values --------------------------------------------------------------------------
#: a path, URL or address, or None
OptionalText = Optional[str]
#: a corpus spec for tokenbook.data.parallel.load_corpus, or None
OptionalCorpus = Optional[dict]
#: one corpus spec per language, or None
OptionalCorpora = Optional[list[dict]]
#: a count, or None for "all"
OptionalCount = Optional[Count]


@dataclass(frozen=True)
class Requirement:
    """When every parameter in ``when`` has its value there, at least one of ``needs`` must be
    given (not empty); ``what`` says what to pass."""

    when: tuple[tuple[str, object], ...]
    needs: tuple[str, ...]
    what: str


#: per chapter, the data a run needs, checked before anything runs
REQUIREMENTS: dict[str, tuple[Requirement, ...]] = {
    "memorisation_cartography": (
        Requirement((("scale", "paper"),), ("corpus",),
                    "-p corpus '{source_path: train.en, target_path: train.nl}' (a spec for "
                    "tokenbook.data.parallel.load_corpus; see params/"
                    "memorisation_cartography/paper.yaml)"),
    ),
    "uid_grounding": (
        Requirement((("scale", "paper"),), ("crossmodal_dir", "released_table"),
                    "-p crossmodal_dir FOLDER (captions.jsonl and images/ of Crossmodal-3600), "
                    "or -p released_table FILE_OR_URL (see params/uid_grounding/paper.yaml)"),
    ),
    "groundedness_typology": (
        Requirement((("source", "released"),), ("released_path",),
                    "-p released_path FILE_OR_URL of the authors' groundedness.csv (see "
                    "params/groundedness_typology/released.yaml)"),
        Requirement((("scale", "paper"), ("source", "models"), ("dataset", "xm3600")),
                    ("xm3600_dir",),
                    "-p xm3600_dir FOLDER with captions.jsonl and images/ of Crossmodal-3600"),
        Requirement((("scale", "paper"), ("source", "models"), ("dataset", "multi30k")),
                    ("multi30k_dir",),
                    "-p multi30k_dir CHECKOUT of github.com/multi30k/dataset (and "
                    "-p multi30k_images FOLDER)"),
    ),
    "cancellation_hypothesis": (
        Requirement((("scale", "paper"),), ("model_id",),
                    "-p model_id CHECKPOINT (a Qwen hub id or folder, e.g. Qwen/Qwen3-1.7B; see "
                    "params/cancellation_hypothesis/paper.yaml)"),
    ),
}
