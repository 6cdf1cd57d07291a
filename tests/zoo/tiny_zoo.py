"""Zoo test helpers: 30 real SCAN rows with a word vocabulary, a tiny size for every model kind, a minimal trainer."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from benchbuild.zoo import build_model, list_entries

PAD, BOS, EOS = 0, 1, 2

# Tiny sizes per model kind so that each model trains in seconds on a contended CPU.
TINY = {
    "transformer": dict(d_model=32, num_heads=4, d_ff=64, encoder_layers=1, decoder_layers=1, dropout=0.0,
                        attention_dropout=0.0, activation_dropout=0.0),
    "dangle": dict(d_model=32, num_heads=4, d_ff=64, adaptive_layers=1, source_layers=1, decoder_layers=1,
                   dropout=0.0, attention_dropout=0.0, activation_dropout=0.0),
    "syntactic_attention": dict(d_semantic=32, hidden_size=32, dropout=0.0),
    "lstm_attention": dict(d_embedding=32, hidden_size=32, num_layers=1, dropout=0.0),
    "hf": dict(d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4,
               decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, dropout=0.0,
               attention_dropout=0.0, activation_dropout=0.0, max_position_embeddings=64),
}
# Variants whose point needs more than one layer keep two.
TWO_LAYERS = {"fusion", "universal_transformer", "relative_universal_transformer"}

ENTRIES = list_entries()


def tiny_overrides(entry) -> dict:
    overrides = dict(TINY[entry.architecture["kind"]])
    if entry.name in TWO_LAYERS:
        overrides.update(encoder_layers=2, decoder_layers=2)
    if entry.architecture["kind"] == "hf" and "path" in entry.architecture:
        return {}
    return overrides


def zoo_network(entry, vocab_size: int, seed: int = 0, **extra):
    torch.manual_seed(seed)
    model = build_model(entry, vocab_size=vocab_size, pad_token_id=PAD, bos_token_id=BOS, eos_token_id=EOS,
                        overrides={**tiny_overrides(entry), **extra})
    return model


@dataclass
class ScanRows:
    sources: list[list[str]]
    targets: list[list[str]]
    vocabulary: list[str]

    def ids(self, tokens: list[str]) -> list[int]:
        return [self.vocabulary.index(t) for t in tokens]

    def batch(self):
        """(input_ids, attention_mask, labels) right-padded; labels end with EOS and pad with -100."""
        sources = [self.ids(s) for s in self.sources]
        targets = [self.ids(t) + [EOS] for t in self.targets]
        width_s, width_t = max(map(len, sources)), max(map(len, targets))
        input_ids = torch.tensor([s + [PAD] * (width_s - len(s)) for s in sources])
        labels = torch.tensor([t + [-100] * (width_t - len(t)) for t in targets])
        return input_ids, input_ids.ne(PAD).long(), labels


def read_scan_rows(shared_data) -> ScanRows:
    """The first 30 rows of SCAN's tasks.txt whose action sequence has at most 6 actions."""
    sources, targets = [], []
    for line in (shared_data / "scan" / "tasks.txt").read_text().splitlines():
        command, actions = line.removeprefix("IN: ").split(" OUT: ")
        if len(actions.split()) <= 6:
            sources.append(command.split())
            targets.append(actions.split())
        if len(sources) == 30:
            break
    words = sorted({w for row in sources + targets for w in row})
    return ScanRows(sources, targets, ["<pad>", "<s>", "</s>", *words])


def exact_match(model, rows: ScanRows, **generate_options) -> float:
    input_ids, attention_mask, _ = rows.batch()
    model.eval()
    with torch.no_grad():
        generated = model.generate(input_ids=input_ids, attention_mask=attention_mask, max_length=11,
                                   do_sample=False, **generate_options)
    hits = 0
    for row, target in zip(generated.tolist(), rows.targets):
        tokens = row[1:]
        if EOS in tokens:
            tokens = tokens[: tokens.index(EOS)]
        hits += tokens == rows.ids(target)
    return hits / len(rows.targets)


# Recurrent models memorise fastest with a larger step; post-norm Transformers are steadier with a smaller one.
LEARNING_RATE = {"lstm_attention": 1e-2, "syntactic_attention": 2e-2}


def train_until_exact(model, rows: ScanRows, max_steps: int = 800) -> tuple[float, int]:
    """Full-batch AdamW until greedy decoding reproduces every row; returns (exact match, steps)."""
    learning_rate = LEARNING_RATE.get(model.config.model_type.removeprefix("benchbuild_"), 3e-3)
    input_ids, attention_mask, labels = rows.batch()
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate, weight_decay=0.0)
    accuracy = 0.0
    for step in range(1, max_steps + 1):
        model.train()
        loss = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if step % 25 == 0 and loss.item() < 0.05:
            accuracy = exact_match(model, rows)
            if accuracy == 1.0:
                return accuracy, step
    return exact_match(model, rows), max_steps
