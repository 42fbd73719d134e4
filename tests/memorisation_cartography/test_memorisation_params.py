"""The chapter's parameter files: tiny repeats the notebook defaults, paper selects the paper design."""

import ast
from pathlib import Path

import yaml

from tokenbook.models.marian import marian_config, train_bpe_tokenizer

REPO = Path(__file__).resolve().parents[2]
NB = REPO / "notebooks" / "memorisation_cartography.py"
PARAMS = REPO / "params" / "memorisation_cartography"


def _defaults() -> dict:
    text = NB.read_text()
    cell = text.split('# %% tags=["parameters"]', 1)[1].split("# %%", 1)[0]
    out = {}
    for node in ast.parse(cell).body:
        if isinstance(node, ast.Assign):
            out[node.targets[0].id] = ast.literal_eval(node.value)
        elif isinstance(node, ast.AnnAssign):
            out[node.target.id] = ast.literal_eval(node.value)
    return out


def test_tiny_yaml_repeats_the_defaults():
    tiny = yaml.safe_load((PARAMS / "tiny.yaml").read_text())
    assert tiny == _defaults()


def test_paper_yaml_is_the_paper_design():
    paper = yaml.safe_load((PARAMS / "paper.yaml").read_text())
    assert set(paper) <= set(_defaults())
    assert paper["n_models"] == 40 and paper["subset_ratio"] == 0.5 and paper["epochs"] == 100
    assert paper["model_preset"] == "base" and paper["scale"] == "paper"
    assert {"source_path", "target_path"} <= set(paper["corpus"])


def test_base_preset_is_transformer_base():
    tok = train_bpe_tokenizer(["a b c", "d e f"], vocab_size=40)
    cfg = marian_config(tok, "base")
    assert (cfg.d_model, cfg.encoder_layers, cfg.decoder_layers, cfg.encoder_attention_heads,
            cfg.encoder_ffn_dim) == (512, 6, 6, 8, 2048)
    assert cfg.vocab_size == len(tok) and cfg.decoder_start_token_id == tok.pad_token_id
