"""Syntactic Attention computes what its authors' released model computes (jlrussin/syntactic_attention).

Line numbers cite SyntacticAttention.py at commit 7ba0ef3e2c547df11730a753572c95eee632aba6 (the LSTM branch, with the
default options seq_sem, syn_act and sem_mlp off) and train_test.py at 41a88c3b28fd4168a5541c160646c817ab8a758e.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from benchbuild.zoo import build_model, load_entry
from tiny_zoo import BOS, EOS, PAD, zoo_network

VOCAB = 24


def official_model(vocab_size: int, **overrides):
    return build_model(load_entry("syntactic_attention"), vocab_size=vocab_size, pad_token_id=PAD, bos_token_id=BOS,
                       eos_token_id=EOS, overrides=overrides)


def lstm_shapes(name: str, inputs: int, hidden: int, layers: int, bidirectional: bool) -> list[tuple[str, tuple]]:
    """torch.nn.LSTM's parameters: per layer and direction W_ih (4H, in), W_hh (4H, H), b_ih (4H,), b_hh (4H,); a
    layer above the first reads H per direction."""
    directions = ("", "_reverse") if bidirectional else ("",)
    shapes = []
    for layer in range(layers):
        width = inputs if layer == 0 else hidden * len(directions)
        for suffix in directions:
            shapes += [(f"{name}.weight_ih_l{layer}{suffix}", (4 * hidden, width)),
                       (f"{name}.weight_hh_l{layer}{suffix}", (4 * hidden, hidden)),
                       (f"{name}.bias_ih_l{layer}{suffix}", (4 * hidden,)),
                       (f"{name}.bias_hh_l{layer}{suffix}", (4 * hidden,))]
    return shapes


def official_shapes(vocab: int, m: int, x: int, layers: int) -> list[tuple[str, tuple]]:
    """Seq2SeqSynAttn's parameters with in_vocab_size = out_vocab_size = `vocab`, m_hidden_dim `m`, x_hidden_dim `x`,
    n_layers `layers`, as SyntacticAttention.py builds them."""
    return [("encoder.W_m.weight", (vocab, m)),  # L21: nn.Embedding(in_vocab_size, m_hidden_size)
            ("encoder.W_x.weight", (vocab, x // 2)),  # L22: nn.Embedding(in_vocab_size, x_hidden_size//2)
            ("encoder.SOS_embed.weight", (1, x)),  # L39: nn.Embedding(1, x_hidden_size)
            ("encoder.EOS_embed.weight", (1, x)),  # L40
            *lstm_shapes("encoder.rnn1", x // 2, x // 2, layers, True),  # L49-50: LSTM(x//2, x//2, n, bidirectional)
            *lstm_shapes("encoder.rnn2", x, x, layers, True),  # L51-52: LSTM(x, x, n, bidirectional)
            ("encoder.fc0.weight", (2 * x, 2 * x)), ("encoder.fc0.bias", (2 * x,)),  # L55: Linear(2x, 2x)
            *lstm_shapes("decoder.rnn", 2 * x, 2 * x, layers, False),  # L134: LSTM(2x, 2x, n)
            ("decoder.out.weight", (vocab, m)), ("decoder.out.bias", (vocab,))]  # L146: Linear(m_hidden_size, out)


@pytest.mark.parametrize("layers", [1, 2])
def test_parameter_count_matches_official_layer_shapes(layers):
    model = official_model(VOCAB, num_layers=layers)
    # train_test.py L44-49: m_hidden_dim 120, x_hidden_dim 200, n_layers 1 are the defaults and the entry's sizes
    assert (model.config.d_semantic, model.config.hidden_size, model.config.num_layers) == (120, 200, layers)
    shapes = official_shapes(VOCAB, m=120, x=200, layers=layers)
    assert sum(p.numel() for p in model.parameters()) == sum(math.prod(shape) for _, shape in shapes)
    assert sorted(tuple(p.shape) for p in model.parameters()) == sorted(shape for _, shape in shapes)


def test_the_entry_has_the_official_defaults_and_dropout():
    model = official_model(VOCAB)
    assert model.config.num_layers == 1 and model.config.dropout == 0.5  # train_test.py: n_layers 1, dropout_p 0.5
    assert model.decoder_lstm.hidden_size == 400 and model.alignment_lstm.hidden_size == 200  # 002 §3.2
    assert model.context_lstm.hidden_size == 100 and model.context_lstm.dropout == 0.0  # one layer: no RNN dropout


def test_logits_do_not_depend_on_previous_target_words():
    model = zoo_network(load_entry("syntactic_attention"), VOCAB).eval()
    sources = torch.tensor([[5, 6, 7, 8, EOS], [9, 10, 11, EOS, PAD]])
    decoder_ids = torch.tensor([[BOS, 12, 13, 14, 15, 16], [BOS, 17, 18, 19, PAD, PAD]])
    other_words = torch.tensor([[BOS, 20, 3, 21, 4, 22], [BOS, 23, 5, 6, 7, 8]])
    other_source = torch.tensor([[5, 7, 6, 8, EOS], [9, 10, 12, EOS, PAD]])
    with torch.no_grad():
        logits = model(input_ids=sources, decoder_input_ids=decoder_ids).logits
        other_targets = model(input_ids=sources, decoder_input_ids=other_words).logits
        changed_source = model(input_ids=other_source, decoder_input_ids=decoder_ids).logits
    assert torch.equal(logits, other_targets)
    for row in range(2):
        assert not torch.allclose(logits[row], changed_source[row])


def test_initial_decoder_query_comes_from_the_final_states_of_the_second_bilstm():
    model = zoo_network(load_entry("syntactic_attention"), VOCAB).eval()
    sources = torch.tensor([[5, 6, 7, 8, EOS], [9, 10, EOS, PAD, PAD]])
    other = torch.tensor([[5, 6, 7, 9, EOS], [9, 11, EOS, PAD, PAD]])
    with torch.no_grad():
        encoding = model.encode(sources, sources.ne(PAD).long())
        changed = model.encode(other, other.ne(PAD).long())
        first_step = model.attention_weights(1, encoding)[:, 0]
    hidden = model.config.hidden_size
    for row, last in ((0, 5), (1, 3)):  # <s> + the source: the last real position
        assert not torch.allclose(encoding.initial_query[row], changed.initial_query[row])
        # SyntacticAttention.py L99-107: s_0 = ReLU(fc0([h_n forward; h_n backward])) of rnn2's last layer
        final = torch.cat([encoding.last_hidden_state[row, last, :hidden], encoding.last_hidden_state[row, 0, hidden:]])
        torch.testing.assert_close(encoding.initial_query[row], F.relu(model.initial_query(final)))
        # L152-154: the first attention is softmax_j(s_0 · h_j) over the real positions
        scores = encoding.last_hidden_state[row, :last + 1] @ encoding.initial_query[row]
        torch.testing.assert_close(first_step[row, :last + 1], scores.softmax(-1))
        assert torch.all(first_step[row, last + 1:] == 0)


def official_logits_of_one_source(model, source: list[int], steps: int) -> torch.Tensor:
    """The official forward for one source, step by step as SyntacticAttention.py writes it: the source wrapped in
    <s> ... (data.py), LSTMs run over the whole row, roles written in place, zero decoder state (initHidden)."""
    ids = torch.tensor([[BOS, *source]])
    length, hidden = ids.size(1), model.config.hidden_size
    h1, _ = model.context_lstm(model.alignment_embedding(ids))  # L69, L80
    forward, backward = h1[0].chunk(2, dim=-1)
    context = torch.zeros(length, hidden)
    for j in range(length):  # L87-91: word j gets [forward h of j-1; backward h of j+1]
        if j > 0:
            context[j, :hidden // 2] = forward[j - 1]
        if j < length - 1:
            context[j, hidden // 2:] = backward[j + 1]
    context[0], context[-1] = model.start_role.weight[0], model.end_role.weight[0]  # L95-96
    h, (final, _) = model.alignment_lstm(context[None])  # L99
    query = F.relu(model.initial_query(torch.cat([final[-2, 0], final[-1, 0]])))  # L104-107
    state = (torch.zeros(1, 1, 2 * hidden), torch.zeros(1, 1, 2 * hidden))  # L186-192
    m = model.translation_embedding(ids)[0]  # L67
    logits = []
    for _ in range(steps):  # L149-182, one call of SynAttnDecoder.forward per target position
        alpha = (h[0] @ query).softmax(0)
        logits.append(model.output(alpha @ m))
        output, state = model.decoder_lstm((alpha @ h[0])[None, None], state)
        query = output[0, 0]
    return torch.stack(logits)


def test_every_row_of_a_padded_batch_gets_the_official_logits_of_that_row_alone():
    model = zoo_network(load_entry("syntactic_attention"), VOCAB).eval()
    sources = [[5, 6, 7, 8, 9, EOS], [10, 11, EOS], [12, EOS]]
    width = max(map(len, sources))
    batch = torch.tensor([row + [PAD] * (width - len(row)) for row in sources])
    with torch.no_grad():
        logits = model(input_ids=batch, decoder_input_ids=torch.full((3, 7), BOS)).logits
        for row, source in enumerate(sources):
            torch.testing.assert_close(logits[row], official_logits_of_one_source(model, source, 7))


def test_dropout_falls_on_the_embeddings_only():
    model = zoo_network(load_entry("syntactic_attention"), VOCAB, dropout=0.5).train()
    ids = torch.tensor([[5, 6, 7, EOS]])
    torch.manual_seed(0)
    encoding = model.encode(ids, ids.ne(PAD).long())
    wrapped = torch.tensor([[BOS, 5, 6, 7, EOS]])
    m = model.translation_embedding(wrapped)
    dropped = encoding.translation == 0
    assert dropped.any() and not dropped.all()
    torch.testing.assert_close(encoding.translation[~dropped], 2 * m[~dropped])
    # no dropout between the stream's layers: the same h̃ gives the same h_j and s_0 in train and eval mode
    roles = model.role_inputs(wrapped, torch.ones_like(wrapped))
    train_states, train_query = model.alignment_stream(roles, torch.ones_like(wrapped))
    model.eval()
    eval_states, eval_query = model.alignment_stream(roles, torch.ones_like(wrapped))
    torch.testing.assert_close(train_states, eval_states)
    torch.testing.assert_close(train_query, eval_query)


def test_a_tiny_model_learns_a_few_steps_and_generates_its_teacher_forced_argmax():
    model = zoo_network(load_entry("syntactic_attention"), VOCAB)
    sources = torch.tensor([[5, 6, 7, EOS], [8, 9, EOS, PAD], [6, 5, EOS, PAD]])
    labels = torch.tensor([[15, 16, 17, EOS], [18, 19, EOS, -100], [16, 15, EOS, -100]])
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(30):
        loss = model(input_ids=sources, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)  # train_test.py: clip_norm 5.0
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0] / 2
    model.eval()
    with torch.no_grad():
        greedy = model.generate(input_ids=sources, max_length=8, do_sample=False, num_beams=1)
        # a prefix-free next-token distribution makes the greedy sequence the most probable one, so an unnormalised
        # beam search finds it too
        beams = model.generate(input_ids=sources, max_length=8, do_sample=False, num_beams=3, length_penalty=0.0)
        argmax = model(input_ids=sources, decoder_input_ids=torch.full((3, 7), BOS)).logits.argmax(-1)
    assert any(EOS in row for row in greedy[:, 1:].tolist())
    for row in range(3):
        tokens = greedy[row, 1:].tolist()
        end = tokens.index(EOS) + 1 if EOS in tokens else len(tokens)
        assert tokens[:end] == argmax[row, :end].tolist()
        assert beams[row, 1:end + 1].tolist() == tokens[:end]
