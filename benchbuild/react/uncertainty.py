"""Stage 7 of ReaCT: ensemble decoding and token-level reverse mutual information (Malinin & Gales, 2021).

For K members with next-token distributions p_m,t and their mean p̄_t,

    RMI_t = Σ_v p̄_t(v) (log p̄_t(v) − (1/K) Σ_m log p_m,t(v)) = (1/K) Σ_m KL(p̄_t ‖ p_m,t) ≥ 0,

and a sentence's score is the mean of RMI_t over the tokens of the ensemble's own translation (decoded by beam
search over p̄, then teacher-forced through every member). Sentences are batched; the members run as one
(`torch.func.stack_module_state` + `vmap`) on a GPU, so a batch of sentences costs one launch sequence, not K;
on CPU the members run one after another on the same sentence batch, which measured as fast. Run one after another,
members that keep a key/value cache (the zoo's Transformers) decode incrementally: each beam-search step feeds each
member only the newest token (`Ensemble.translate`), instead of the whole prefix.
"""

from __future__ import annotations

import copy
import math
import warnings
from pathlib import Path
from typing import Callable, Sequence

import torch
from torch.func import functional_call, stack_module_state, vmap

from benchbuild.errors import BenchbuildError

# Elements of the (members × sentences × tokens × vocabulary) log-probability tensor in one scoring batch: the RMI
# arithmetic is memory-bound, and small batches (64 MiB) ran faster than large ones on CPU. On a GPU that budget cut
# 10 members of the `mt` size to batches of 2 sentences, 24x slower than batches of 64 (H200, benchmarks/RESULTS.md):
# there a batch may take up to 1/16 of the free memory per float32 copy, at most GPU_SCORE_BUDGET elements (1 GiB).
SCORE_BUDGET = 2 ** 24
GPU_SCORE_BUDGET = 2 ** 28


def score_budget(device: torch.device | str, free_bytes: int | None = None) -> int:
    """Elements of the log-probability tensor one scoring batch may hold on `device`: SCORE_BUDGET on the CPU; on a
    GPU a sixteenth of its free memory (`free_bytes`, else what CUDA reports) in float32 elements, between
    SCORE_BUDGET and GPU_SCORE_BUDGET."""
    device = torch.device(device)
    if device.type != "cuda":
        return SCORE_BUDGET
    if free_bytes is None:
        free_bytes, _ = torch.cuda.mem_get_info(device)
    return min(GPU_SCORE_BUDGET, max(SCORE_BUDGET, free_bytes // (16 * 4)))


def mean_log_probs(member_log_probs: torch.Tensor) -> torch.Tensor:
    """log p̄ over the first (member) dimension: log (1/K) Σ_m p_m."""
    return torch.logsumexp(member_log_probs, dim=0) - math.log(member_log_probs.shape[0])


def reverse_mutual_information(member_log_probs: torch.Tensor) -> torch.Tensor:
    """Token-level RMI from (K, …, V) member log-probabilities; returns shape (…)."""
    # Σ_v p̄ log p̄ − Σ_v p̄ · mean_m log p_m, in few passes over the (K, …, V) tensor: this is memory-bound and
    # costs as much as the members' forward passes. xlogy makes 0 · log 0 = 0 where p̄ underflows.
    mean = member_log_probs.exp().mean(dim=0)
    rmi = (torch.xlogy(mean, mean) - mean * member_log_probs.mean(dim=0)).sum(dim=-1)
    # Jensen makes RMI ≥ 0; rounding can leave −1e-9 where members agree.
    return rmi.clamp_min(0.0)


def sentence_rmi(token_rmi: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean token RMI over each sentence's target positions (`mask` 1 where a token is scored)."""
    mask = mask.to(token_rmi.dtype)
    return (token_rmi * mask).sum(dim=-1) / mask.sum(dim=-1).clamp_min(1.0)


class Ensemble:
    """K seq2seq models sharing one tokenizer and one architecture, evaluated together.

    Each member must accept `input_ids`, `attention_mask`, `decoder_input_ids` and `encoder_outputs` and return
    `.logits` and `.encoder_last_hidden_state` (the zoo's models and `transformers`' seq2seq models do).
    """

    def __init__(self, members: Sequence[torch.nn.Module], tokenizer, device: str | torch.device = "cpu",
                 batched: bool | None = None) -> None:
        if not members:
            raise BenchbuildError("an ensemble needs at least one member")
        self.device = torch.device(device)
        self.members = [member.to(self.device).eval() for member in members]
        self.tokenizer = tokenizer
        self.size = len(self.members)
        # Incremental decoding needs a cache per member, which stacked (vmapped) members cannot carry.
        self.caches = all(getattr(member.config, "caches_decoder_states", False) for member in self.members)
        # Stacked (vmapped) members measured no faster than a loop over members on CPU (benchmarks/RESULTS.md);
        # on a GPU one launch for all members is the point, so that is the default there.
        self.batched = self.device.type == "cuda" if batched is None else batched
        if self.batched:
            params, buffers = stack_module_state(self.members)
            self._params = {name: value.detach() for name, value in params.items()}
            self._buffers = buffers
            self._base = copy.deepcopy(self.members[0]).to("meta")

    @classmethod
    def load(cls, run_dirs: Sequence[str | Path], device: str | torch.device = "cpu",
             batched: bool | None = None) -> "Ensemble":
        """Members from run folders (`from_pretrained`); all must share one tokenizer vocabulary."""
        from transformers.utils import logging as transformers_logging

        from benchbuild import zoo
        from benchbuild.zoo.loading import load_model, load_tokenizer

        transformers_logging.disable_progress_bar()  # "Loading weights" bars would interleave with ours
        zoo.register()
        tokenizers = [load_tokenizer(path) for path in run_dirs]
        for path, tokenizer in zip(run_dirs[1:], tokenizers[1:]):
            if tokenizer.get_vocab() != tokenizers[0].get_vocab():
                raise BenchbuildError(f"ensemble member {path} has another vocabulary than {run_dirs[0]}: "
                                      "members must be trained on the same corpus")
        members = [load_model(path) for path in run_dirs]
        return cls(members, tokenizers[0], device=device, batched=batched)

    def _all_members(self, call: Callable[..., torch.Tensor], *per_member: torch.Tensor,
                     shared: Sequence[torch.Tensor] = ()) -> torch.Tensor:
        """Stack `call(member, *per_member[m], *shared)` over members: one vmapped pass, or a loop."""
        if self.batched:
            def one(params, buffers, *tensors):
                return call(lambda **kwargs: functional_call(self._base, (params, buffers), (), kwargs), *tensors)

            # The shared inputs go in as zero-copy per-member views: everything computed from them (the attention
            # masks) is then batched over members like the queries. On CUDA, fused attention's vmap rule folds the
            # members into the batch of q, k and v but not into an unbatched mask, and fails ("expanded size 20 must
            # match 2", 10 members x 2 sentences: seen on an H200, benchmarks/RESULTS.md).
            members = self.size
            shared = [tensor.expand(members, *tensor.shape) for tensor in shared]
            with warnings.catch_warnings():
                # Fused attention has no vmap rule on CPU: torch loops over members for that one op (and says so).
                warnings.filterwarnings("ignore", message=".*performance drop.*")
                return vmap(one)(self._params, self._buffers, *per_member, *shared)
        return torch.stack([call(member, *(t[index] for t in per_member), *shared)
                            for index, member in enumerate(self.members)])

    @torch.no_grad()
    def encode(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Every member's encoder states, (K, B, S, D)."""
        start = torch.full((input_ids.shape[0], 1), self.tokenizer.bos_token_id, dtype=torch.long, device=self.device)

        def call(member, ids, mask):
            output = member(input_ids=ids, attention_mask=mask, decoder_input_ids=start)
            return output.encoder_last_hidden_state

        return self._all_members(call, shared=(input_ids, attention_mask))

    @torch.no_grad()
    def member_log_probs(self, memory: torch.Tensor, attention_mask: torch.Tensor,
                         decoder_input_ids: torch.Tensor, last_only: bool = False) -> torch.Tensor:
        """(K, B, T, V) next-token log-probabilities of every member at every decoder position (T = 1: the last
        position only, as beam search needs)."""
        from transformers.modeling_outputs import BaseModelOutput

        def call(member, states, mask, decoder_ids):
            output = member(attention_mask=mask, decoder_input_ids=decoder_ids,
                            encoder_outputs=BaseModelOutput(last_hidden_state=states))
            logits = output.logits[:, -1:] if last_only else output.logits
            return torch.log_softmax(logits.float(), dim=-1)

        return self._all_members(call, memory, shared=(attention_mask, decoder_input_ids))

    @torch.no_grad()
    def _next_log_probs(self, memory: torch.Tensor, attention_mask: torch.Tensor, prefixes: torch.Tensor,
                        caches: list | None) -> torch.Tensor:
        """(K, B, V) next-token log-probabilities after `prefixes`: stacked or looped members over the whole prefix,
        or, with `caches` (one per member, filled by the previous steps, rows in the prefixes' order), each member
        fed the newest token only."""
        if caches is None:
            return self.member_log_probs(memory, attention_mask, prefixes, last_only=True)[:, :, -1, :]
        from transformers.modeling_outputs import BaseModelOutput

        from benchbuild.zoo.seq2seq import CACHE_FIELD

        steps = []
        for index, member in enumerate(self.members):
            output = member(attention_mask=attention_mask, decoder_input_ids=prefixes[:, -1:], use_cache=True,
                            encoder_outputs=BaseModelOutput(last_hidden_state=memory[index]),
                            past_key_values=caches[index])
            caches[index] = getattr(output, CACHE_FIELD)
            steps.append(torch.log_softmax(output.logits[:, -1].float(), dim=-1))
        return torch.stack(steps)

    def _source_batch(self, sources: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
        encoded = self.tokenizer(list(sources), return_tensors="pt", padding=True)
        return encoded["input_ids"].to(self.device), encoded["attention_mask"].to(self.device)

    @torch.no_grad()
    def translate(self, sources: Sequence[str], beam: int = 5, max_new_tokens: int = 128) -> list[list[int]]:
        """Beam search over the members' mean distribution p̄ (`beam=1`: greedy); token ids ending in `</s>`
        unless `max_new_tokens` cut them. Hypotheses are ranked by summed log p̄ / length (fairseq's lenpen 1)."""
        if beam < 1:
            raise BenchbuildError(f"--beam must be at least 1; got {beam}")
        bos, eos = self.tokenizer.bos_token_id, self.tokenizer.eos_token_id
        input_ids, attention_mask = self._source_batch(sources)
        batch = input_ids.shape[0]
        memory = self.encode(input_ids, attention_mask).repeat_interleave(beam, dim=1)
        mask = attention_mask.repeat_interleave(beam, dim=0)
        prefixes = torch.full((batch * beam, 1), bos, dtype=torch.long, device=self.device)
        scores = torch.full((batch, beam), -math.inf, device=self.device)
        scores[:, 0] = 0.0
        finished: list[list[tuple[float, list[int]]]] = [[] for _ in range(batch)]
        done = [False] * batch
        caches = [None] * self.size if self.caches and not self.batched else None
        for step in range(max_new_tokens):
            log_probs = mean_log_probs(self._next_log_probs(memory, mask, prefixes, caches))
            vocab = log_probs.shape[-1]
            candidates = (scores.reshape(-1, 1) + log_probs).reshape(batch, beam * vocab)
            top_scores, top_index = candidates.topk(min(2 * beam, beam * vocab), dim=-1)
            next_rows, next_tokens, next_scores = [], [], []
            for sentence in range(batch):
                kept = 0
                for score, index in zip(top_scores[sentence].tolist(), top_index[sentence].tolist()):
                    row, token = sentence * beam + index // vocab, index % vocab
                    if kept == beam or score == -math.inf:
                        break
                    if done[sentence]:
                        next_rows.append(row); next_tokens.append(eos); next_scores.append(-math.inf)
                        kept += 1
                        continue
                    if token == eos:
                        hypothesis = prefixes[row, 1:].tolist() + [eos]
                        finished[sentence].append((score / len(hypothesis), hypothesis))
                        continue
                    next_rows.append(row); next_tokens.append(token); next_scores.append(score)
                    kept += 1
                while kept < beam:
                    next_rows.append(sentence * beam); next_tokens.append(eos); next_scores.append(-math.inf)
                    kept += 1
                if len(finished[sentence]) >= beam:
                    done[sentence] = True
            if all(done):
                break
            rows = torch.tensor(next_rows, device=self.device)
            prefixes = torch.cat([prefixes[rows], torch.tensor(next_tokens, device=self.device)[:, None]], dim=1)
            for cache in caches or ():
                cache.reorder_cache(rows)  # each row's cache follows its hypothesis
            scores = torch.tensor(next_scores, device=self.device).reshape(batch, beam)
        best = []
        for sentence in range(batch):
            if not finished[sentence]:
                for position in range(beam):
                    score = scores[sentence, position].item()
                    if score > -math.inf:
                        hypothesis = prefixes[sentence * beam + position, 1:].tolist()
                        finished[sentence].append((score / max(len(hypothesis), 1), hypothesis))
            best.append(max(finished[sentence], key=lambda item: item[0])[1] if finished[sentence] else [eos])
        return best

    @torch.no_grad()
    def score(self, sources: Sequence[str], hypotheses: Sequence[Sequence[int]]) -> torch.Tensor:
        """Sentence RMI of each (source, hypothesis) pair: every member teacher-forced on the hypothesis."""
        input_ids, attention_mask = self._source_batch(sources)
        length = max(len(h) for h in hypotheses)
        pad, bos = self.tokenizer.pad_token_id, self.tokenizer.bos_token_id
        decoder_ids = torch.full((len(hypotheses), length), pad, dtype=torch.long)
        target_mask = torch.zeros((len(hypotheses), length))
        for row, hypothesis in enumerate(hypotheses):
            decoder_ids[row, :len(hypothesis)] = torch.tensor([bos, *hypothesis[:-1]], dtype=torch.long)
            target_mask[row, :len(hypothesis)] = 1.0
        memory = self.encode(input_ids, attention_mask)
        log_probs = self.member_log_probs(memory, attention_mask, decoder_ids.to(self.device))
        return sentence_rmi(reverse_mutual_information(log_probs), target_mask.to(self.device)).cpu()


def ensemble_rmi(ensemble: Ensemble, sources: Sequence[str], *, beam: int = 5, batch_size: int = 64,
                 max_new_tokens: int | None = None, advance: Callable[..., None] = lambda label="", amount=1: None
                 ) -> tuple[list[float], list[list[int]]]:
    """Decode and score every source (batches of similar length); RMI and hypothesis per source, in input order.

    Hypotheses are cut at `max_new_tokens`, by default twice the batch's longest source plus 10 tokens.
    """
    rmi: list[float] = [0.0] * len(sources)
    hypotheses: list[list[int]] = [[] for _ in sources]
    for chunk, limit in rmi_batches(ensemble.tokenizer, sources, batch_size, max_new_tokens):
        values, decoded = batch_rmi(ensemble, [sources[index] for index in chunk], beam=beam, max_new_tokens=limit)
        for index, hypothesis, value in zip(chunk, decoded, values):
            rmi[index], hypotheses[index] = value, hypothesis
        advance(amount=len(chunk))
    return rmi, hypotheses


def rmi_batches(tokenizer, sources: Sequence[str], batch_size: int,
                max_new_tokens: int | None = None) -> list[tuple[list[int], int]]:
    """The batches `ensemble_rmi` decodes: source indices of similar tokenized length (ties by index), and each
    batch's hypothesis length limit. A batch's scores depend on its company (padding), so any engine that scores
    these batches gets the RMI of `ensemble_rmi`."""
    lengths = [len(ids) for ids in tokenizer(list(sources))["input_ids"]]
    order = sorted(range(len(sources)), key=lambda index: (lengths[index], index))
    batches = []
    for start in range(0, len(order), batch_size):
        chunk = order[start:start + batch_size]
        batches.append((chunk, max_new_tokens or 2 * max(lengths[index] for index in chunk) + 10))
    return batches


def batch_rmi(ensemble: Ensemble, texts: Sequence[str], *, beam: int,
              max_new_tokens: int) -> tuple[list[float], list[list[int]]]:
    """One batch of `rmi_batches`: the ensemble's beam translation of each text and its sentence RMI."""
    texts = list(texts)
    decoded = ensemble.translate(texts, beam=beam, max_new_tokens=max_new_tokens)
    vocab = len(ensemble.tokenizer)
    per_sentence = ensemble.size * max(len(h) for h in decoded) * vocab
    step = max(1, score_budget(ensemble.device) // max(per_sentence, 1))
    rmi: list[float] = []
    for offset in range(0, len(texts), step):
        rmi += ensemble.score(texts[offset:offset + step], decoded[offset:offset + step]).tolist()
    return rmi, decoded
