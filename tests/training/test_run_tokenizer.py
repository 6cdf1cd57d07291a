import pytest
from transformers import AutoTokenizer

from benchbuild.training.tokenization import SPECIAL_TOKENS, build_tokenizer

SCAN = ["jump twice", "I_JUMP I_JUMP", "walk left", "I_TURN_LEFT I_WALK", "jump", "I_JUMP"]


def test_word_level_ids_start_with_the_special_tokens_then_words_by_count():
    tokenizer = build_tokenizer(SCAN, "word")
    vocab = tokenizer.get_vocab()
    assert [vocab[token] for token in SPECIAL_TOKENS] == [0, 1, 2, 3]
    assert vocab["I_JUMP"] == 4 and vocab["jump"] == 5  # 3 and 2 occurrences; then count-1 words alphabetically
    assert sorted(vocab, key=vocab.get)[6:] == ["I_TURN_LEFT", "I_WALK", "left", "twice", "walk"]


def test_word_level_round_trip_appends_eos_and_maps_unknown_words(tmp_path):
    tokenizer = build_tokenizer(SCAN, "word")
    ids = tokenizer("jump twice")["input_ids"]
    assert ids == [5, tokenizer.get_vocab()["twice"], tokenizer.eos_token_id]
    assert tokenizer.decode(ids, skip_special_tokens=True) == "jump twice"
    assert tokenizer("run twice")["input_ids"][0] == tokenizer.unk_token_id
    tokenizer.save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    assert loaded("jump twice")["input_ids"] == ids
    assert (loaded.pad_token_id, loaded.bos_token_id, loaded.eos_token_id, loaded.unk_token_id) == (0, 1, 2, 3)


@pytest.mark.shared
def test_bpe_is_deterministic_and_round_trips_text(shared_data, tmp_path):
    react = shared_data / "react"
    lines = (react / "valid.de").read_text(encoding="utf-8").splitlines()[:300]
    lines += (react / "valid.en").read_text(encoding="utf-8").splitlines()[:300]
    first = build_tokenizer(lines, "bpe", vocab_size=400)
    second = build_tokenizer(list(reversed(lines)), "bpe", vocab_size=400)
    assert first.get_vocab() == second.get_vocab()
    assert len(first) == 400
    sentence = "es ist diese pyramide . it &apos;s that pyramid ."
    ids = first(sentence)["input_ids"]
    assert ids == second(sentence)["input_ids"] and ids[-1] == first.eos_token_id
    assert first.decode(ids, skip_special_tokens=True) == sentence
    first.save_pretrained(tmp_path)
    assert AutoTokenizer.from_pretrained(tmp_path)(sentence)["input_ids"] == ids
